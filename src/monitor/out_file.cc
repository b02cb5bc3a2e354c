#include "monitor/out_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/error.h"

namespace threadburn::monitor {

OutFile::OutFile(const std::string& path, bool force) : path_(path) {
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | (force ? O_TRUNC : O_EXCL), 0644);
  if (fd_ < 0) throw Error("--out=" + path + ": " + std::strerror(errno));
}

void OutFile::flush() {
  size_t done = 0;
  while (done < buf_.size()) {
    const ssize_t n = ::write(fd_, buf_.data() + done, buf_.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw Error("writing " + path_ + ": " + std::strerror(errno));
    done += static_cast<size_t>(n);
  }
  buf_.clear();
}

void OutFile::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

void OutFile::discard() {
  close();
  ::unlink(path_.c_str());
}

}  // namespace threadburn::monitor

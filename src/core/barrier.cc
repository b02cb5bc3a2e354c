#include "core/barrier.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>

#include "core/clock.h"
#include "core/error.h"

namespace threadburn {

void parse_barrier_flag(const std::string& text, std::string* path, int* parties) {
  const auto colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0) {
    throw Error("--barrier: expected PATH:PARTIES, got '" + text + "'");
  }
  const std::string n = text.substr(colon + 1);
  char* end = nullptr;
  const long v = std::strtol(n.c_str(), &end, 10);
  if (n.empty() || *end != '\0' || v < 1 || v > 4096) {
    throw Error("--barrier: expected a party count in [1, 4096] after the ':', got '" + n + "'");
  }
  *path = text.substr(0, colon);
  *parties = static_cast<int>(v);
}

ProcessBarrier::ProcessBarrier(const std::string& path, int parties) : parties_(parties) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) throw Error("--barrier: " + path + ": " + std::strerror(errno));
  void* p = ::mmap(nullptr, sizeof(uint32_t), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  const int err = errno;
  ::close(fd);
  if (p == MAP_FAILED) throw Error("--barrier: " + path + ": cannot map it: " + std::strerror(err));
  word_ = static_cast<uint32_t*>(p);
}

ProcessBarrier::~ProcessBarrier() {
  if (word_) ::munmap(word_, sizeof(uint32_t));
}

bool ProcessBarrier::wait(int64_t timeout_ns) {
  ++round_;
  const uint32_t target = round_ * static_cast<uint32_t>(parties_);
  if (__atomic_add_fetch(word_, 1, __ATOMIC_SEQ_CST) >= target) {
    // Shared (not _PRIVATE) futex: the waiters are other processes.
    syscall(SYS_futex, word_, FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
    return true;
  }
  const int64_t deadline = wall_ns() + timeout_ns;
  for (;;) {
    const uint32_t seen = __atomic_load_n(word_, __ATOMIC_SEQ_CST);
    if (seen >= target) return true;
    const int64_t left = deadline - wall_ns();
    if (left <= 0) return false;
    timespec ts{left / 1000000000LL, left % 1000000000LL};
    syscall(SYS_futex, word_, FUTEX_WAIT, seen, &ts, nullptr, 0);
  }
}

}  // namespace threadburn

// The monitor's output files: complete lines only reach a file, each write(2)
// a whole number of rows, so a kill of the monitor itself loses at most the
// last flush period; a file the monitor gives up on is removed, never left
// half-written.
#pragma once

#include <cstdint>
#include <string>

namespace threadburn::monitor {

class OutFile {
 public:
  // Creates path (truncates it with force, else refuses an existing one);
  // throws Error naming --out.
  OutFile(const std::string& path, bool force);
  ~OutFile() { close(); }
  OutFile(const OutFile&) = delete;
  OutFile& operator=(const OutFile&) = delete;
  void add(const std::string& lines, bool counts = true) {
    buf_ += lines;
    rows_ += counts ? 1 : 0;
  }
  // Throws Error on a failed write.
  void flush();
  size_t pending() const { return buf_.size(); }
  int64_t rows() const { return rows_; }
  const std::string& path() const { return path_; }
  void close();
  // Closes and removes the file.
  void discard();

 private:
  std::string path_;
  int fd_ = -1;
  std::string buf_;
  int64_t rows_ = 0;
};

}  // namespace threadburn::monitor

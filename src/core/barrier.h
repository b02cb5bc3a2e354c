// A barrier across processes, so that copies of one benchmark started together
// (the sweep's `processes` axis) also measure together: each copy waits before
// each benchmark's warmup until every copy has arrived. The sweep creates PATH
// (4 zero bytes) and passes --barrier=PATH:P to each of the P copies; the
// arrivals are counted in that shared file and waited on with a shared futex.
#pragma once

#include <cstdint>
#include <string>

namespace threadburn {

class ProcessBarrier {
 public:
  // Maps PATH; throws Error naming the flag when it cannot.
  ProcessBarrier(const std::string& path, int parties);
  ~ProcessBarrier();
  ProcessBarrier(const ProcessBarrier&) = delete;
  ProcessBarrier& operator=(const ProcessBarrier&) = delete;

  // Blocks until all parties have called wait() as often as this one (round
  // 1, 2, ...). false after timeout_ns without them (a copy died): the caller
  // goes on, and the rows' start and end times show the missing overlap.
  bool wait(int64_t timeout_ns);
  int parties() const { return parties_; }

 private:
  uint32_t* word_ = nullptr;
  int parties_ = 0;
  uint32_t round_ = 0;
};

// "PATH:P" -> (PATH, P); throws Error naming --barrier.
void parse_barrier_flag(const std::string& text, std::string* path, int* parties);

}  // namespace threadburn

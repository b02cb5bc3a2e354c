// The console output of the benchmark programs: the settings in force and any
// machine warnings once, then one compact line per benchmark (step time with
// a noise marker, CPU, residual burn by class of thread, tail, threads), and
// advice at the end when a result was noisy, in the manner of nanobench's
// unstable-result marker. Every counter stays in the JSON / CSV output.
#pragma once

#include <benchmark/benchmark.h>

#include <string>
#include <vector>

#include "core/rules.h"
#include "runtime/runtime.h"

namespace threadburn::bench {

// Step times whose coefficient of variation exceeds kNoisyCv
// (src/core/rules.h) are marked '~'.
using threadburn::kNoisyCv;

class ConsoleTable : public benchmark::BenchmarkReporter {
 public:
  explicit ConsoleTable(threadburn::Context context) : context_(std::move(context)) {}
  bool ReportContext(const benchmark::BenchmarkReporter::Context& context) override;
  void ReportRuns(const std::vector<Run>& runs) override;
  void Finalize() override;

 private:
  std::string value(const std::string& key) const;
  threadburn::Context context_;
  int noisy_ = 0, skipped_ = 0, failed_ = 0;
};

}  // namespace threadburn::bench

#include "console.h"

#include <cstdio>
#include <sstream>

namespace threadburn::bench {
namespace {

double counter(const benchmark::BenchmarkReporter::Run& run, const char* name, double fallback = -1) {
  auto it = run.counters.find(name);
  return it == run.counters.end() ? fallback : static_cast<double>(it->second);
}

// Debian's libbenchmark is a DEBUG build; only its JSON context says so.
std::string library_build_type(const benchmark::BenchmarkReporter::Context& context) {
  std::ostringstream json;
  benchmark::JSONReporter probe;
  probe.SetOutputStream(&json);
  probe.SetErrorStream(&json);
  probe.ReportContext(context);
  const std::string text = json.str();
  const auto at = text.find("\"library_build_type\": \"");
  if (at == std::string::npos) return "unknown";
  const auto start = at + 23;
  return text.substr(start, text.find('"', start) - start);
}

}  // namespace

std::string ConsoleTable::value(const std::string& key) const {
  for (const auto& [k, v] : context_) {
    if (k == key) return v;
  }
  return "?";
}

bool ConsoleTable::ReportContext(const benchmark::BenchmarkReporter::Context& context) {
  auto& out = GetOutputStream();
  const auto& cpu = context.cpu_info;
  out << "threadburn on " << context.sys_info.name << ": " << cpu.num_cpus << " CPUs, "
      << static_cast<long>(cpu.cycles_per_second / 1e6) << " MHz\n";
  // The knob table's line (runtime.h), as threadburn run and doctor print it.
  out << "settings in force: " << in_force_line(context_) << "\n";
  if (value("omp_runtime") != "none") out << "OpenMP library: " << value("omp_library") << "\n";
  if (value("knob_notes") != "none") out << "note: " << value("knob_notes") << "\n";
  // Machine warnings, once.
  if (!cpu.load_avg.empty() && cpu.load_avg[0] > 0.5 * cpu.num_cpus) {
    char buf[160];
    std::snprintf(buf, sizeof buf,
                  "warning: load average %.2f on %d CPUs: other work competes with the steps and their burn\n",
                  cpu.load_avg[0], cpu.num_cpus);
    out << buf;
  }
  if (cpu.scaling == benchmark::CPUInfo::ENABLED) {
    out << "warning: CPU frequency scaling is on: step times may drift; the CPU and burn figures do not\n";
  }
  if (library_build_type(context) == "debug") {
    out << "note: this Google Benchmark library is a DEBUG build. That slows only its own bookkeeping between\n"
           "      iterations; every figure below is taken by threadburn's own clocks around each step.\n";
  }
  out << "(per step: mean step time, '~' = noisy; CPU in cores during the step; residual = CPU burned in the\n"
         " gap after the step by threads other than main, split by class; tail = step end to the burn's end)\n";
  return true;
}

void ConsoleTable::ReportRuns(const std::vector<Run>& runs) {
  auto& out = GetOutputStream();
  for (const Run& run : runs) {
    if (run.run_type != Run::RT_Iteration) continue;
    out << run.benchmark_name() << "\n";
    if (run.error_occurred) {
      const bool skip = run.error_message.rfind(kSkippedPrefix, 0) == 0;
      (skip ? skipped_ : failed_)++;
      out << "    " << (skip ? "" : "error: ") << run.error_message << "\n";
      continue;
    }
    const double cv = counter(run, "step_ms_cv", 0);
    const bool noisy = cv > kNoisyCv;
    noisy_ += noisy;
    char line[512];
    int n = std::snprintf(line, sizeof line, "    step %8.3f ms%s  cpu %5.2f cores", counter(run, "step_ms"),
                          noisy ? " ~" : "  ", counter(run, "cores_busy"));
    const double gap = counter(run, "gap_slept_ms", 0);
    if (gap > 0) {
      n += std::snprintf(line + n, sizeof line - static_cast<size_t>(n), "  residual %8.3f ms",
                         counter(run, "residual_cpu_ms"));
      std::string split;
      for (const char* cls : {"omp", "tbb", "loader", "gloo", "other"}) {
        const double v = counter(run, (std::string("residual_") + cls + "_ms").c_str(), 0);
        if (v >= 0.05) {
          char part[48];
          std::snprintf(part, sizeof part, "%s%s %.2f", split.empty() ? "" : ", ", cls, v);
          split += part;
        }
      }
      if (!split.empty()) n += std::snprintf(line + n, sizeof line - static_cast<size_t>(n), " [%s]", split.c_str());
      const double tail = counter(run, "tail_ms");
      if (tail >= 0) n += std::snprintf(line + n, sizeof line - static_cast<size_t>(n), "  tail %6.1f ms", tail);
    }
    std::snprintf(line + n, sizeof line - static_cast<size_t>(n), "  threads %.0f", counter(run, "threads"));
    out << line << "\n";
  }
}

void ConsoleTable::Finalize() {
  auto& out = GetOutputStream();
  if (noisy_ > 0) {
    out << "~ " << noisy_ << " result(s) with step times varying by more than " << static_cast<int>(kNoisyCv * 100)
        << " % (cv): run more --steps, stop other work on the machine, or compare with `threadburn compare`\n"
           "  (Mann-Whitney) over several runs before trusting a difference.\n";
  }
  if (skipped_ + failed_ > 0) out << skipped_ << " skipped, " << failed_ << " failed\n";
  out << "All counters: --benchmark_format=json or --benchmark_out=FILE; `threadburn list --counters` explains them.\n";
}

}  // namespace threadburn::bench

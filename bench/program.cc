#include "program.h"

#include <sys/stat.h>

#include <cstdio>
#include <cstring>
#include <iostream>

#include "console.h"
#include "core/json.h"
#include "core/rules.h"
#include "core/schema.h"
#include "metrics.h"

namespace threadburn::bench {

void skip(benchmark::State& state, const std::string& why) {
  state.SkipWithError(why.c_str());
  for (auto _ : state) {
  }
}

Program::Program(std::string name, std::string family, std::string summary, const std::string& default_gaps)
    : name_(std::move(name)), family_(std::move(family)), flags_(name_, std::move(summary)) {
  flags_.add_int_list("gap_ms", default_gaps, 0, 60000, "idle ms after each step (the training loop's sleep)");
  flags_.add_int("steps", 10, 1, 1000000, "timed steps per benchmark (one per iteration)");
  flags_.add_int("warmup", 2, 0, 1000, "untimed steps first (allocations, thread creation)");
  flags_.add_string("device", "cpu", "cpu, cuda or cuda:N (cuda without a GPU: skipped)");
  flags_.add_choice("sampler", "on", {"on", "off"},
                    "off: no burn sampler thread (step times, CPU and residual only; no tail)");
  flags_.add_int("sampler_us", kDefaultSamplerPeriodNs / 1000, 100, 1000,
                 "the sampler's fast period in microseconds (the tail's resolution)");
  flags_.add_string("timeline_dir", "", "write each benchmark's last-step burn timeline CSV here");
  flags_.add_switch("timeline_threads", "add per-thread series to the timeline");
  flags_.add_string("threads_csv", "", "append the per-thread CPU breakdown (step / gap) to this CSV");
  flags_.add_string("barrier", "", "PATH:P: wait for P copies of this program before each benchmark (the sweep sets it)");
}

bool Program::parse(int* argc, char** argv, int* exit_code) {
  std::vector<char*> rest;
  try {
    rest = flags_.parse(*argc, argv);
  } catch (const Error& e) {
    *exit_code = fail(e);
    return false;
  }
  if (flags_.help_requested()) {
    std::fputs(flags_.help_text(
                   "\nGoogle Benchmark's own flags (--benchmark_format=json, --benchmark_out=FILE,\n"
                   "--benchmark_filter=REGEX, ...) pass through. OpenMP settings (OMP_NUM_THREADS,\n"
                   "KMP_BLOCKTIME, GOMP_SPINCOUNT, OMP_WAIT_POLICY, ...) are read once at start-up from\n"
                   "the environment; the JSON context reports the values really in force and the knobs\n"
                   "the live runtime ignored or overrode.\n")
                   .c_str(),
               stdout);
    *exit_code = 0;
    return false;
  }
  for (char* a : rest) {
    if (std::strncmp(a, "--benchmark_format=", 19) == 0 && std::strcmp(a + 19, "console") != 0) console_ = false;
  }
  const int n = static_cast<int>(rest.size());
  for (int i = 0; i < n; ++i) argv[i] = rest[static_cast<size_t>(i)];
  argv[n] = nullptr;
  *argc = n;
  benchmark::Initialize(argc, argv);
  if (benchmark::ReportUnrecognizedArguments(*argc, argv)) {
    *exit_code = 2;
    return false;
  }
  try {
    if (!flags_.text("barrier").empty()) {
      std::string path;
      int parties = 0;
      parse_barrier_flag(flags_.text("barrier"), &path, &parties);
      barrier_ = std::make_unique<ProcessBarrier>(path, parties);
    }
    const std::string& dir = flags_.text("timeline_dir");
    struct stat st {};
    if (!dir.empty() && (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))) {
      throw Error("--timeline_dir: " + dir + ": no such directory");
    }
  } catch (const Error& e) {
    *exit_code = fail(e);
    return false;
  }
  return true;
}

int Program::fail(const std::exception& e) const {
  std::fprintf(stderr, "%s: error: %s\n", name_.c_str(), e.what());
  return 2;
}

LoopOptions Program::loop_options() const {
  LoopOptions o;
  o.warmup = flags_.integer("warmup");
  o.sampler = flags_.text("sampler") == "on";
  o.sampler_period_us = flags_.integer("sampler_us");
  o.timeline_dir = flags_.text("timeline_dir");
  o.timeline_threads = flags_.on("timeline_threads");
  o.threads_csv = flags_.text("threads_csv");
  o.barrier = barrier_.get();
  return o;
}

void Program::describe(const AxisSpace& space, const Context& context) const {
  JsonWriter json;
  json.begin_object().field("program", name_).field("family", family_).field("schema_version", kSchemaVersion);
  json.field("launch", launch_);
  json.key("throughput").begin_object().field("counter", throughput_counter_).field("unit", throughput_unit_).end_object();
  json.field("loop_counters", kLoopCounters);
  describe_rules(&json);
  describe_runtimes(&json);
  // Where each benchmark's timeline file is named: its JSON entry's label.
  json.field("timeline_label_prefix", kTimelineLabelPrefix);
  flags_.describe(&json);
  space.describe(&json);
  describe_metrics(&json);
  describe_knobs(&json);
  json.key("context").begin_object();
  for (const auto& [k, v] : context) json.field(k, v);
  json.end_object();
  json.end_object();
  std::fputs((json.str() + "\n").c_str(), stdout);
}

int Program::run(const AxisSpace& space, const BenchmarkFn& fn, const Context& extra_context,
                 benchmark::TimeUnit unit) {
  std::vector<Point> points;
  Context ctx = runtime_context();
  ctx.insert(ctx.end(), extra_context.begin(), extra_context.end());
  // Every row says how its throughput is read (results.py asks the row).
  ctx.emplace_back("throughput_counter", throughput_counter_.empty() ? "none" : throughput_counter_);
  ctx.emplace_back("throughput_unit", throughput_unit_);
  // ... and what one iteration of the program's loop is, the time a user's
  // loop experiences (the step and the idle gap after it): the counters to add
  // (lib/records.py compares its sum, not the step alone).
  ctx.emplace_back("loop_counters", kLoopCounters);
  try {
    points = space.points();
    if (flags_.describe_requested()) {
      describe(space, ctx);
      return 0;
    }
  } catch (const Error& e) {
    return fail(e);
  }
  for (const Point& p : points) {
    benchmark::RegisterBenchmark(p.name().c_str(), [fn, p](benchmark::State& state) { fn(state, p); })
        ->Iterations(steps())
        ->UseManualTime()
        ->Unit(unit);
  }
  for (const auto& [k, v] : ctx) benchmark::AddCustomContext(k, v);
  if (console_) {
    ConsoleTable table(ctx);
    benchmark::RunSpecifiedBenchmarks(&table);
  } else {
    benchmark::RunSpecifiedBenchmarks();
  }
  benchmark::Shutdown();
  return 0;
}

}  // namespace threadburn::bench

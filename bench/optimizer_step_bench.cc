// seeds/000's pattern: sleep; optimizer.step() + zero_grad(); sleep. One
// optimizer step per iteration over a configurable number of parameters; the
// gap after it is where OpenMP workers keep spinning.
#include <cstdio>
#include <memory>
#include <stdexcept>

#include "bench_common.h"
#include "workload/train.h"

namespace tb = threadburn;

int main(int argc, char** argv) {
  tb::FlagParser flags("optimizer_step_bench",
                       "Times optimizer.step() + zero_grad() and the CPU burned in the gap after it.");
  flags.add("optimizer", "sgd,adadelta", "optimizers: sgd (momentum 0.9), adadelta (lr 1.0)");
  flags.add("params", "4000000", "parameter counts (floats), comma list");
  tb::bench::add_common_flags(&flags, "0,300");
  int code = 0;
  if (!tb::bench::init(&flags, &argc, argv, &code)) return code;

  std::vector<std::string> kinds;
  std::vector<int64_t> params, gaps;
  tb::bench::LoopOptions loop;
  torch::Device device = torch::kCPU;
  int64_t steps = 0;
  try {
    kinds = tb::parse_choice_list("optimizer", flags.get("optimizer"), tb::optimizer_kinds());
    params = tb::parse_int_list("params", flags.get("params"), 1, 2000000000);
    gaps = tb::parse_int_list("gap_ms", flags.get("gap_ms"), 0, 60000);
    steps = tb::parse_int("steps", flags.get("steps"), 1, 1000000);
    loop = tb::bench::common_loop_options(flags);
    device = tb::parse_device(flags.get("device"));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "optimizer_step_bench: error: %s\n", e.what());
    return 2;
  }

  const std::string skip = tb::device_unavailable_reason(device);
  if (skip.empty()) tb::name_intraop_workers();
  const std::string prefix = device.is_cuda() ? "optimizer_step_cuda/" : "optimizer_step/";
  for (const auto& k : kinds) {
    for (int64_t n : params) {
      for (int64_t g : gaps) {
        auto fn = [=](benchmark::State& state) {
          const std::string name =
              prefix + k + "/params:" + std::to_string(n) + "/gap_ms:" + std::to_string(g);
          if (!skip.empty()) {
            state.SkipWithError(skip.c_str());
            for (auto _ : state) {
            }
            return;
          }
          tb::OptimizerWorkload work(k, n, device);
          tb::bench::LoopOptions lo = loop;
          lo.gap_ms = g;
          tb::bench::run_steps(state, name, lo, [&] {
            work.step();
            return tb::bench::Phases{};
          });
          state.counters["params"] = static_cast<double>(n);
        };
        benchmark::RegisterBenchmark((prefix + k).c_str(), fn)
            ->ArgNames({"params", "gap_ms"})
            ->Args({n, g})
            ->Iterations(steps)
            ->UseManualTime()
            ->Unit(benchmark::kMillisecond);
      }
    }
  }
  return tb::bench::run(tb::torch_context(device));
}

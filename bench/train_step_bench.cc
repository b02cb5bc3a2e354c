// One training step per iteration: MNIST Net + Adadelta (seeds/002) and the
// CIFAR-10 CNN + SGD-momentum (seeds/000), over batch x loader workers x gap x
// preload. Step time is the manual time; DESIGN.md's metrics are counters.
#include <cstdio>
#include <map>
#include <memory>
#include <stdexcept>

#include "bench_common.h"
#include "cuda/cuda_host.h"
#include "workload/train.h"

namespace tb = threadburn;

int main(int argc, char** argv) {
  tb::FlagParser flags("train_step_bench",
                       "Times training steps and the CPU that threads keep burning after each step.");
  flags.add("model", "mnist_adadelta,cifar_sgd", "models: mnist_adadelta (seeds/002), cifar_sgd (seeds/000)");
  flags.add("batch", "64", "batch sizes, comma list");
  flags.add("workers", "0,2", "DataLoader worker threads, comma list (0: load on the main thread)");
  flags.add("preload", "0", "1: whole dataset in one tensor, batches by index (seeds/002 gpu mode); comma list of 0/1");
  flags.add("loader", "torch", "loaders: torch (libtorch DataLoader threads), tbb (TBB parallel_pipeline); comma list");
  flags.add("mkldnn", "1", "1: convolutions through oneDNN (ATen's default), 0: ATen's native path; comma list");
  flags.add("cuda_sync", "auto", "CUDA host wait policy, set before the context exists: auto, spin, yield, blocking_sync");
  flags.add("pin_memory", "0", "CUDA: 1 = page-locked host batches before the copy; comma list of 0/1");
  flags.add("non_blocking", "0", "CUDA: 1 = asynchronous host->device copies; comma list of 0/1");
  flags.add("item_sync", "0", "CUDA: 1 = loss.item() every step (seeds/002), a host-device sync; comma list of 0/1");
  flags.add("augment", "1", "1: CIFAR random crop (pad 4) + flip per example in the loader (cifar_sgd only)");
  flags.add("data-dir", "", "read real MNIST IDX / CIFAR-10 binary files here (default: synthetic data)");
  flags.add("synthetic_n", "4096", "examples in the synthetic dataset");
  tb::bench::add_common_flags(&flags, "0,100");
  int code = 0;
  if (!tb::bench::init(&flags, &argc, argv, &code)) return code;

  std::vector<std::string> models;
  std::vector<int64_t> batches, workers, gaps, preloads, mkldnns;
  std::vector<std::string> loaders;
  std::vector<int64_t> pins{0}, nonblocks{0}, items{0};
  std::string cuda_sync;
  tb::bench::LoopOptions loop;
  torch::Device device = torch::kCPU;
  int64_t steps = 0;
  bool augment = true;
  std::map<std::string, tb::ImageSet> datasets;
  try {
    models = tb::parse_choice_list("model", flags.get("model"), tb::train_models());
    batches = tb::parse_int_list("batch", flags.get("batch"), 1, 65536);
    workers = tb::parse_int_list("workers", flags.get("workers"), 0, 256);
    gaps = tb::parse_int_list("gap_ms", flags.get("gap_ms"), 0, 60000);
    preloads = tb::parse_int_list("preload", flags.get("preload"), 0, 1);
    loaders = tb::parse_choice_list("loader", flags.get("loader"), {"torch", "tbb"});
    for (const auto& l : loaders) {
      if (l == "tbb" && !tb::have_tbb()) {
        throw tb::FlagError("--loader: tbb: this build has no TBB (configure with THREADBURN_WITH_TBB=ON)");
      }
    }
    mkldnns = tb::parse_int_list("mkldnn", flags.get("mkldnn"), 0, 1);
    steps = tb::parse_int("steps", flags.get("steps"), 1, 1000000);
    augment = tb::parse_int("augment", flags.get("augment"), 0, 1) == 1;
    const int64_t synthetic_n = tb::parse_int("synthetic_n", flags.get("synthetic_n"), 1, 10000000);
    loop = tb::bench::common_loop_options(flags);
    device = tb::parse_device(flags.get("device"));
    cuda_sync = flags.get("cuda_sync");
    if (tb::cuda::parse_sync_policy(cuda_sync) < 0) {
      throw tb::FlagError("--cuda_sync: unknown policy '" + cuda_sync + "' (auto, spin, yield, blocking_sync)");
    }
    for (const char* f : {"cuda_sync", "pin_memory", "non_blocking", "item_sync"}) {
      if (!device.is_cuda() && flags.was_set(f) && flags.get(f) != "0" && flags.get(f) != "auto") {
        throw tb::FlagError(std::string("--") + f + ": only with --device=cuda");
      }
    }
    if (cuda_sync != "auto" && !tb::cuda::toolkit_compiled()) {
      throw tb::FlagError("--cuda_sync: this build has no CUDA toolkit (configure where CMake finds CUDAToolkit)");
    }
    if (device.is_cuda()) {
      pins = tb::parse_int_list("pin_memory", flags.get("pin_memory"), 0, 1);
      nonblocks = tb::parse_int_list("non_blocking", flags.get("non_blocking"), 0, 1);
      items = tb::parse_int_list("item_sync", flags.get("item_sync"), 0, 1);
    }
    for (int64_t p : preloads) {
      for (int64_t w : workers) {
        if (p == 1 && w != 0 && workers.size() == 1 && preloads.size() == 1) {
          throw tb::FlagError("--workers: must be 0 with --preload=1 (no loader runs)");
        }
      }
    }
    // Datasets load before anything runs: a bad --data-dir fails here, once.
    for (const auto& m : models) {
      datasets[m] = tb::dataset_for(m, flags.get("data-dir"), synthetic_n);
      for (int64_t b : batches) {
        if (b > datasets[m].size()) {
          throw tb::FlagError("--batch: " + std::to_string(b) + " is larger than the " + m + " dataset (" +
                              std::to_string(datasets[m].size()) + " examples)");
        }
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "train_step_bench: error: %s\n", e.what());
    return 2;
  }

  // The wait policy must reach the device before anything creates its context.
  std::string skip = tb::device_unavailable_reason(device);
  if (skip.empty() && device.is_cuda()) {
    const std::string err = tb::cuda::set_sync_policy(device.index(), cuda_sync);
    if (!err.empty()) skip = "skipped: --cuda_sync: " + err;
  }
  if (skip.empty()) tb::name_intraop_workers();
  const std::string prefix = device.is_cuda() ? "train_step_cuda/" : "train_step/";
  for (const auto& m : models) {
    for (int64_t p : preloads) {
      for (int64_t b : batches) {
        for (int64_t w : workers) {
          if (p == 1 && w != 0) continue;  // preloaded data has no loader workers
          for (const auto& loader : loaders) {
          const int64_t tbb = loader == "tbb" ? 1 : 0;
          if (tbb == 1 && (p == 1 || w == 0)) continue;  // the TBB loader needs workers, no preload
          for (int64_t mk : mkldnns) {
          for (int64_t pin : pins) {
          for (int64_t nb : nonblocks) {
          for (int64_t item : items) {
          for (int64_t g : gaps) {
            auto fn = [=, &datasets](benchmark::State& state) {
              const std::string name = prefix + m + "/batch:" + std::to_string(b) + "/workers:" +
                                       std::to_string(w) + "/gap_ms:" + std::to_string(g) +
                                       "/preload:" + std::to_string(p) + "/tbb_loader:" + std::to_string(tbb) +
                                       "/mkldnn:" + std::to_string(mk) +
                                       (device.is_cuda() ? "/pin_memory:" + std::to_string(pin) + "/non_blocking:" +
                                                               std::to_string(nb) + "/item_sync:" + std::to_string(item)
                                                         : std::string());
              if (!skip.empty()) {
                state.SkipWithError(skip.c_str());
                for (auto _ : state) {
                }
                return;
              }
              tb::PipelineOptions po;
              po.batch = b;
              po.workers = w;
              po.preload = p == 1;
              po.tbb_loader = tbb == 1;
              po.pin_memory = pin == 1;
              po.non_blocking = nb == 1;
              po.augment = augment && m == "cifar_sgd";
              po.device = device;
              // Restored on every exit: later benchmarks must not inherit it.
              struct MkldnnScope {
                bool saved = at::globalContext().userEnabledMkldnn();
                explicit MkldnnScope(bool on) { at::globalContext().setUserEnabledMkldnn(on); }
                ~MkldnnScope() { at::globalContext().setUserEnabledMkldnn(saved); }
              } mkldnn_scope(mk == 1);
              std::unique_ptr<tb::TrainWorkload> work;
              try {
                work = std::make_unique<tb::TrainWorkload>(m, datasets.at(m), po);
              } catch (const std::exception& e) {
                state.SkipWithError(e.what());
                for (auto _ : state) {
                }
                return;
              }
              work->set_item_sync(item == 1);
              tb::bench::LoopOptions lo = loop;
              lo.gap_ms = g;
              lo.samples_per_step = static_cast<double>(b);
              lo.report_phases = true;
              std::unique_ptr<tb::cuda::GpuTimer> gpu;
              if (device.is_cuda()) gpu = std::make_unique<tb::cuda::GpuTimer>();
              lo.report_gpu = gpu && gpu->ok();
              tb::bench::run_steps(state, name, lo, [&] {
                if (lo.report_gpu) gpu->start();
                const tb::PhaseTimes t = work->step();
                double gpu_ms = 0;
                if (lo.report_gpu) {
                  gpu->stop();
                  gpu_ms = gpu->elapsed_ms();
                }
                return tb::bench::Phases{t.data_ms, t.forward_ms, t.backward_ms, t.optim_ms,
                                         t.sync_ms,  t.sync_cpu_ms, gpu_ms};
              });
              state.counters["batch"] = static_cast<double>(b);
              state.counters["workers"] = static_cast<double>(w);
            };
            benchmark::RegisterBenchmark((prefix + m).c_str(), fn)
                ->ArgNames(device.is_cuda() ? std::vector<std::string>{"batch", "workers", "gap_ms", "preload",
                                                                        "tbb_loader", "mkldnn", "pin_memory",
                                                                        "non_blocking", "item_sync"}
                                            : std::vector<std::string>{"batch", "workers", "gap_ms", "preload",
                                                                        "tbb_loader", "mkldnn"})
                ->Args(device.is_cuda() ? std::vector<int64_t>{b, w, g, p, tbb, mk, pin, nb, item}
                                        : std::vector<int64_t>{b, w, g, p, tbb, mk})
                ->Iterations(steps)
                ->UseManualTime()
                ->Unit(benchmark::kMillisecond);
          }
          }
          }
          }
          }
          }
        }
      }
    }
  }
  tb::Context ctx = tb::torch_context(device);
  ctx.emplace_back("cuda_toolkit_compiled", tb::cuda::toolkit_compiled() ? "1" : "0");
  ctx.emplace_back("cuda_runtime_version", tb::cuda::runtime_version());
  ctx.emplace_back("cuda_sync_requested", cuda_sync);
  ctx.emplace_back("cuda_sync_in_force",
                   device.is_cuda() && skip.empty() ? tb::cuda::sync_policy_in_force(device.index()) : "n/a");
  return tb::bench::run(ctx);
}

// One training step per iteration: the MNIST Net + Adadelta and the CIFAR-10
// tutorial CNN + SGD-momentum, over model x preload x batch x loader workers x
// loader x oneDNN x gap (x the CUDA knobs on a GPU). Step time is the manual
// time; the metrics are counters (bench/metrics.cc).
#include <cstdio>
#include <map>
#include <memory>

#include "cuda/cuda_host.h"
#include "metrics.h"
#include "program.h"
#include "train_flags.h"
#include "workload/train.h"

namespace tb = threadburn;

namespace {

constexpr const char* kCudaOnly[] = {"pin_memory", "non_blocking", "item_sync"};

void declare_flags(tb::FlagParser& f) {
  tb::bench::declare_training_flags(f);
  f.add_int_list("workers", "0,2", 0, 256, "loader worker threads (0: load on the main thread)");
  f.add_int_list("preload", "0", 0, 1, "1: whole dataset in one tensor, batches by index (no loader)");
  f.add_choice_list("loader", "torch", {"torch", "tbb"},
                    "loaders: torch (libtorch DataLoader threads), tbb (a TBB parallel_pipeline)");
  f.add_int_list("mkldnn", "1", 0, 1, "1: convolutions through oneDNN (ATen's default), 0: ATen's native path");
  f.add_choice("cuda_sync", "auto", {"auto", "spin", "yield", "blocking_sync"},
               "CUDA host wait policy, set before the context exists");
  f.add_int_list("pin_memory", "0", 0, 1, "CUDA: 1 = page-locked host batches before the copy");
  f.add_int_list("non_blocking", "0", 0, 1, "CUDA: 1 = asynchronous host->device copies");
  f.add_int_list("item_sync", "0", 0, 1, "CUDA: 1 = loss.item() every step, a host-device sync");
  f.add_int("gpu_busy", 1, 0, 1,
            "CUDA: 1 = gpu_busy_ms and gpu_idle_share from CUPTI's activity records (flushed after each step), "
            "0 = without CUPTI");
  f.add_int("host_sleep_ms", 0, 0, 60000,
            "a sleep on the host between backward and the optimizer step (the GPU figures' known answer: in "
            "step_ms and gpu_span_ms, not in gpu_busy_ms)");
}

tb::bench::AxisSpace make_space(const tb::FlagParser& f, const torch::Device& device,
                                const std::vector<int64_t>& gaps) {
  tb::bench::AxisSpace space(device.is_cuda() ? "train_step_cuda" : "train_step");
  space.add_axis("model", f.items("model"));
  space.add_axis("preload", f.integers("preload"));
  space.add_axis("batch", f.integers("batch"));
  space.add_axis("workers", f.integers("workers"));
  space.add_axis("loader", f.items("loader"));
  space.add_axis("mkldnn", f.integers("mkldnn"));
  if (device.is_cuda()) {
    for (const char* flag : kCudaOnly) space.add_axis(flag, f.integers(flag));
  }
  space.add_axis("gap_ms", gaps);
  space.add_skip({{{"preload", {"1"}}, {"workers", {"0"}, true}}, "preloaded data has no loader workers"});
  space.add_skip({{{"loader", {"tbb"}}, {"preload", {"1"}}}, "the TBB loader does not run on preloaded data"});
  space.add_skip({{{"loader", {"tbb"}}, {"workers", {"0"}}}, "the TBB loader needs workers >= 1"});
  return space;
}

// Checks across flags, before anything runs (throws Error naming the flag).
void check_flags(const tb::FlagParser& f, const torch::Device& device) {
  for (const auto& l : f.items("loader")) {
    if (l == "tbb" && !tb::have_tbb()) {
      throw tb::Error("--loader: tbb: this build has no TBB (configure with THREADBURN_WITH_TBB=ON)");
    }
  }
  if (!device.is_cuda()) {
    for (const char* flag : {"cuda_sync", "pin_memory", "non_blocking", "item_sync", "gpu_busy"}) {
      if (f.was_set(flag) && f.text(flag) != "0" && f.text(flag) != "auto") {
        throw tb::Error(std::string("--") + flag + ": only with --device=cuda");
      }
    }
  }
  if (f.text("cuda_sync") != "auto" && !tb::cuda::toolkit_compiled()) {
    throw tb::Error("--cuda_sync: this build has no CUDA toolkit (configure where CMake finds CUDAToolkit)");
  }
}

// Datasets load before anything runs; no batch may be larger than one.
std::map<std::string, tb::ImageSet> load_datasets(const tb::FlagParser& f) {
  std::map<std::string, tb::ImageSet> sets = tb::bench::load_training_datasets(f);
  for (const auto& m : f.items("model")) {
    for (int64_t b : f.integers("batch")) {
      if (b > sets[m].size()) {
        throw tb::Error("--batch: " + std::to_string(b) + " is larger than the " + m + " dataset (" +
                        std::to_string(sets[m].size()) + " examples)");
      }
    }
  }
  return sets;
}

// The wait policy must reach the device before anything creates its context.
tb::Availability prepare_device(const torch::Device& device, const std::string& cuda_sync) {
  tb::Availability a = tb::device_availability(device);
  if (!a.ok || !device.is_cuda()) return a;
  try {
    tb::cuda::set_sync_policy(device.index(), cuda_sync);
  } catch (const tb::Error& e) {
    return tb::Availability::no(std::string("skipped: --cuda_sync: ") + e.what());
  }
  return a;
}

// CUPTI for gpu_busy_ms, once per process; where it cannot be had, said once
// (stderr and the context's cuda_cupti) and the figures are absent.
tb::cuda::GpuActivity* start_gpu_activity(bool wanted, std::string* in_force) {
  if (!wanted) {
    *in_force = "off";
    return nullptr;
  }
  std::string why;
  tb::cuda::GpuActivity* a = tb::cuda::GpuActivity::start(&why);
  if (a == nullptr) {
    std::fprintf(stderr, "train_step_bench: gpu_busy_ms and gpu_idle_share absent: %s\n", why.c_str());
    *in_force = "n/a: " + why;
    return nullptr;
  }
  *in_force = a->version();
  return a;
}

// One CUDA step and its GPU figures: gpu_span_ms from the events the step
// records around its device work (TrainWorkload::set_device_span),
// gpu_busy_ms and gpu_idle_share from CUPTI's records within the step's window.
tb::StepFigures gpu_step(tb::TrainWorkload& work, tb::cuda::GpuTimer* span, tb::cuda::GpuActivity* activity) {
  const uint64_t from = activity ? activity->now_ns() : 0;
  tb::StepFigures t = work.step();  // ends when the device is done
  if (activity) {
    const uint64_t to = activity->now_ns();
    const tb::cuda::BusyFigures busy = tb::cuda::busy_figures(activity->take(), from, to);
    t.set("gpu_busy_ms", busy.busy_ms);
    t.set("gpu_idle_share", busy.idle_share);
    static bool lost_said = false;  // once: the figure stays, known to be low
    if (!lost_said && activity->lost() > 0) {
      lost_said = true;
      std::fprintf(stderr, "train_step_bench: CUPTI lost %llu record(s) (dropped, or without timestamps): "
                   "gpu_busy_ms may be low\n", static_cast<unsigned long long>(activity->lost()));
    }
  }
  if (span) t.set("gpu_span_ms", span->elapsed_ms());
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  tb::bench::Program prog("train_step_bench", "train_step",
                          "Times training steps and the CPU that threads keep burning after each step.", "0,100");
  declare_flags(prog.flags());
  prog.set_throughput("samples_per_s", "samples/s");
  tb::bench::register_counters(tb::train_counters());
  tb::bench::register_counters(tb::cuda::gpu_counters());
  int code = 0;
  if (!prog.parse(&argc, argv, &code)) return code;
  const tb::FlagParser& f = prog.flags();
  torch::Device device = torch::kCPU;
  std::map<std::string, tb::ImageSet> datasets;
  std::unique_ptr<tb::bench::AxisSpace> space;
  try {
    device = tb::parse_device(f.text("device"));
    check_flags(f, device);
    space = std::make_unique<tb::bench::AxisSpace>(make_space(f, device, prog.gaps()));
    space->points();  // nothing left to run is a bad flag too
    datasets = load_datasets(f);
  } catch (const std::exception& e) {
    return prog.fail(e);
  }
  const std::string cuda_sync = f.text("cuda_sync");
  const tb::Availability where = f.describe_requested() ? tb::Availability::yes() : prepare_device(device, cuda_sync);
  const bool augment = f.integer("augment") == 1;
  const int64_t host_sleep_ms = f.integer("host_sleep_ms");
  std::string cupti_in_force = "n/a";
  tb::cuda::GpuActivity* activity =
      device.is_cuda() && where.ok && !f.describe_requested()
          ? start_gpu_activity(f.integer("gpu_busy") == 1, &cupti_in_force)
          : nullptr;
  const tb::bench::LoopOptions loop = prog.loop_options();

  auto benchmark = [&](benchmark::State& state, const tb::bench::Point& p) {
    if (!where.ok) return tb::bench::skip(state, where.why);
    tb::PipelineOptions po;
    po.batch = p.integer("batch");
    po.workers = p.integer("workers");
    po.preload = p.flag("preload");
    po.tbb_loader = p.text("loader") == "tbb";
    po.augment = augment && p.text("model") == "cifar_sgd";
    po.device = device;
    if (device.is_cuda()) {
      po.pin_memory = p.flag("pin_memory");
      po.non_blocking = p.flag("non_blocking");
    }
    // Restored on every exit: later benchmarks must not inherit it.
    struct MkldnnScope {
      bool saved = at::globalContext().userEnabledMkldnn();
      explicit MkldnnScope(bool on) { at::globalContext().setUserEnabledMkldnn(on); }
      ~MkldnnScope() { at::globalContext().setUserEnabledMkldnn(saved); }
    } mkldnn_scope(p.flag("mkldnn"));
    std::unique_ptr<tb::TrainWorkload> work;
    try {
      work = std::make_unique<tb::TrainWorkload>(p.text("model"), datasets.at(p.text("model")), po);
    } catch (const std::exception& e) {
      return tb::bench::skip(state, e.what());
    }
    work->set_item_sync(device.is_cuda() && p.flag("item_sync"));
    work->set_host_sleep_ms(host_sleep_ms);
    tb::bench::LoopOptions lo = loop;
    lo.gap_ms = p.integer("gap_ms");
    lo.samples_per_step = static_cast<double>(po.batch);
    tb::cuda::GpuTimer gpu;
    tb::cuda::GpuTimer* span = device.is_cuda() && gpu.ok() ? &gpu : nullptr;
    work->set_device_span(span);
    tb::bench::StepLoop(state, p.name(), lo).run([&] {
      return device.is_cuda() ? gpu_step(*work, span, activity) : work->step();
    });
  };
  tb::Context ctx = tb::torch_context(device);
  ctx.emplace_back("cuda_toolkit_compiled", tb::cuda::toolkit_compiled() ? "1" : "0");
  ctx.emplace_back("cuda_runtime_version", tb::cuda::runtime_version());
  ctx.emplace_back("cuda_sync_requested", cuda_sync);
  ctx.emplace_back("cuda_sync_in_force",
                   device.is_cuda() && where.ok ? tb::cuda::sync_policy_in_force(device.index()) : "n/a");
  ctx.emplace_back("cuda_cupti", cupti_in_force);
  return prog.run(*space, benchmark, ctx);
}

// The same parallel kernel, an SGD update p -= lr * (g + m) over N floats,
// through each threading runtime the training stack uses: raw OpenMP (whichever
// runtime is live), ATen's at::parallel_for, TBB's parallel_for, and a oneDNN
// primitive (eltwise_linear over the same N floats; oneDNN runs on OpenMP here).
// After gaps of 0 .. 300 ms: region time, wake-up cost (region after a gap minus
// back-to-back), residual CPU and tail after the region. Overhead against a
// serial reference follows the EPCC OpenMP microbenchmarks: T_par - T_serial / p.
#include <ATen/Parallel.h>
#include <benchmark/benchmark.h>
#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <vector>
#if THREADBURN_HAVE_DNNL
#include <oneapi/dnnl/dnnl.hpp>
#endif
#if THREADBURN_HAVE_TBB
#include <oneapi/tbb/blocked_range.h>
#include <oneapi/tbb/parallel_for.h>
#endif

#include "bench_common.h"
#include "core/clock.h"
#include "core/stats.h"
#include "workload/train.h"

namespace tb = threadburn;

namespace {

constexpr float kLr = 0.01f;
// One chunk per 32 Ki floats (ATen's GRAIN_SIZE): below it, every runtime runs serially.
constexpr int64_t kGrain = 32768;

struct Data {
  std::vector<float> p, g, m;
  explicit Data(int64_t n) : p(static_cast<size_t>(n), 1.0f), g(static_cast<size_t>(n), 0.5f), m(static_cast<size_t>(n), 0.25f) {}
};

inline void update(Data& d, int64_t begin, int64_t end) {
  float* p = d.p.data();
  const float* g = d.g.data();
  const float* m = d.m.data();
  for (int64_t i = begin; i < end; ++i) p[i] -= kLr * (g[i] + m[i]);
}

class Kernel {
 public:
  virtual ~Kernel() = default;
  virtual void run(Data& d) = 0;
  virtual int threads() const = 0;
};

struct Serial : Kernel {
  void run(Data& d) override { update(d, 0, static_cast<int64_t>(d.p.size())); }
  int threads() const override { return 1; }
};

struct RawOmp : Kernel {
  void run(Data& d) override {
    const int64_t n = static_cast<int64_t>(d.p.size());
#pragma omp parallel for schedule(static)
    for (int64_t c = 0; c < n; c += kGrain) update(d, c, std::min(n, c + kGrain));
  }
  int threads() const override { return omp_get_max_threads(); }
};

struct Aten : Kernel {
  void run(Data& d) override {
    at::parallel_for(0, static_cast<int64_t>(d.p.size()), kGrain,
                     [&](int64_t b, int64_t e) { update(d, b, e); });
  }
  int threads() const override { return at::get_num_threads(); }
};

#if THREADBURN_HAVE_TBB
struct Tbb : Kernel {
  void run(Data& d) override {
    oneapi::tbb::parallel_for(oneapi::tbb::blocked_range<int64_t>(0, static_cast<int64_t>(d.p.size()), kGrain),
                              [&](const oneapi::tbb::blocked_range<int64_t>& r) { update(d, r.begin(), r.end()); });
  }
  int threads() const override { return tb::tbb_default_concurrency(); }
};
#endif

#if THREADBURN_HAVE_DNNL
struct OneDnn : Kernel {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  dnnl::memory mem;
  dnnl::eltwise_forward prim;
  explicit OneDnn(Data& d) {
    dnnl::memory::desc md({static_cast<int64_t>(d.p.size())}, dnnl::memory::data_type::f32,
                          dnnl::memory::format_tag::a);
    mem = dnnl::memory(md, engine, d.p.data());
    // p = (1 - lr) * p - lr: one read and one write per float, in place.
    dnnl::eltwise_forward::desc desc(dnnl::prop_kind::forward_inference, dnnl::algorithm::eltwise_linear, md,
                                     1.0f - kLr, -kLr);
    prim = dnnl::eltwise_forward(dnnl::eltwise_forward::primitive_desc(desc, engine));
  }
  void run(Data&) override {
    prim.execute(stream, {{DNNL_ARG_SRC, mem}, {DNNL_ARG_DST, mem}});
    stream.wait();
  }
  int threads() const override { return omp_get_max_threads(); }
};
#endif

std::unique_ptr<Kernel> make_kernel(const std::string& kind, Data& d) {
  if (kind == "serial") return std::make_unique<Serial>();
  if (kind == "omp") return std::make_unique<RawOmp>();
  if (kind == "aten") return std::make_unique<Aten>();
#if THREADBURN_HAVE_TBB
  if (kind == "tbb") return std::make_unique<Tbb>();
#endif
#if THREADBURN_HAVE_DNNL
  if (kind == "onednn") return std::make_unique<OneDnn>(d);
#endif
  (void)d;
  throw std::invalid_argument("--kernel: " + kind + ": not in this build");
}

// Median wall time of `reps` back-to-back runs, in ms.
double median_ms(Kernel& k, Data& d, int reps) {
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    const int64_t t0 = tb::wall_ns();
    k.run(d);
    t.push_back(static_cast<double>(tb::wall_ns() - t0) / tb::kNsPerMs);
  }
  return tb::median(t);
}

}  // namespace

int main(int argc, char** argv) {
  tb::FlagParser flags("runtime_bench",
                       "One SGD-update kernel through raw OpenMP, ATen, TBB and oneDNN: region time, "
                       "wake-up cost after a gap, residual CPU and tail.");
  std::string kernels = "serial,omp,aten";
  if (tb::have_tbb()) kernels += ",tbb";
  if (tb::have_dnnl()) kernels += ",onednn";
  flags.add("kernel", kernels, "runtimes: serial, omp, aten, tbb, onednn");
  flags.add("n", "1048576", "floats per array (32768: in cache ... 16777216: memory-bound), comma list");
  tb::bench::add_common_flags(&flags, "0,1,10,100");
  int code = 0;
  if (!tb::bench::init(&flags, &argc, argv, &code)) return code;
  std::vector<std::string> kinds;
  std::vector<int64_t> sizes, gaps;
  tb::bench::LoopOptions loop;
  int64_t steps = 0;
  try {
    kinds = tb::parse_choice_list("kernel", flags.get("kernel"), {"serial", "omp", "aten", "tbb", "onednn"});
    for (const auto& k : kinds) {
      if ((k == "tbb" && !tb::have_tbb()) || (k == "onednn" && !tb::have_dnnl())) {
        throw tb::FlagError("--kernel: " + k + ": this build has no " + (k == "tbb" ? "TBB" : "oneDNN") +
                            " (configure with THREADBURN_WITH_" + (k == "tbb" ? "TBB" : "DNNL") + "=ON)");
      }
    }
    sizes = tb::parse_int_list("n", flags.get("n"), 1, 1LL << 30);
    gaps = tb::parse_int_list("gap_ms", flags.get("gap_ms"), 0, 60000);
    steps = tb::parse_int("steps", flags.get("steps"), 1, 1000000);
    loop = tb::bench::common_loop_options(flags);
    if (flags.get("device") != "cpu") throw tb::FlagError("--device: runtime_bench runs on cpu only");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "runtime_bench: error: %s\n", e.what());
    return 2;
  }
  tb::name_intraop_workers();
  for (const auto& kind : kinds) {
    for (int64_t n : sizes) {
      for (int64_t g : gaps) {
        auto fn = [=](benchmark::State& state) {
          const std::string name = "runtime_region/" + kind + "/n:" + std::to_string(n) + "/gap_ms:" + std::to_string(g);
          Data d(n);
          auto kernel = make_kernel(kind, d);
          Serial serial;
          const int reps = n >= (1 << 22) ? 5 : 20;
          const double serial_ms = median_ms(serial, d, reps);
          const double b2b_ms = median_ms(*kernel, d, reps);
          tb::bench::LoopOptions lo = loop;
          lo.gap_ms = g;
          tb::bench::run_steps(state, name, lo, [&] {
            kernel->run(d);
            return tb::bench::Phases{};
          });
          benchmark::DoNotOptimize(d.p.data());
          auto& c = state.counters;
          const double region_ms = c["step_ms"];
          c["serial_ms"] = serial_ms;
          c["backtoback_ms"] = b2b_ms;
          c["wakeup_ms"] = region_ms - b2b_ms;
          c["kernel_threads"] = kernel->threads();
          c["overhead_ms"] = region_ms - serial_ms / kernel->threads();
          c["speedup"] = region_ms > 0 ? serial_ms / region_ms : 0;
          c["n"] = static_cast<double>(n);
        };
        benchmark::RegisterBenchmark(("runtime_region/" + kind).c_str(), fn)
            ->ArgNames({"n", "gap_ms"})
            ->Args({n, g})
            ->Iterations(steps)
            ->UseManualTime()
            ->Unit(benchmark::kMicrosecond);
      }
    }
  }
  tb::Context extra = tb::torch_context(torch::kCPU);
  return tb::bench::run(extra);
}

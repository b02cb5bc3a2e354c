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

#include "metrics.h"
#include "program.h"
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
  throw tb::Error("--kernel: " + kind + ": not in this build");
}

// The kernel's counters (this program's own table).
const tb::CounterTable& kernel_counters() {
  static const tb::CounterTable table = {
      {"serial_ms", "ms", "runtime_bench: the kernel run serially (median of back-to-back runs)"},
      {"backtoback_ms", "ms", "runtime_bench: the region run back to back (median)"},
      {"wakeup_ms", "ms", "runtime_bench: region time after the gap minus back to back: what sleeping workers cost"},
      {"kernel_threads", "1", "runtime_bench: threads the kernel's runtime uses"},
      {"overhead_ms", "ms", "runtime_bench: region time - serial time / threads (EPCC)"},
      {"speedup", "1", "runtime_bench: serial time / region time"},
  };
  return table;
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
  tb::bench::Program prog("runtime_bench", "runtime_region",
                          "One SGD-update kernel through raw OpenMP, ATen, TBB and oneDNN: region time, "
                          "wake-up cost after a gap, residual CPU and tail.",
                          "0,1,10,100");
  tb::bench::register_counters(kernel_counters());
  std::string kernels = "serial,omp,aten";
  if (tb::have_tbb()) kernels += ",tbb";
  if (tb::have_dnnl()) kernels += ",onednn";
  prog.flags().add_choice_list("kernel", kernels, {"serial", "omp", "aten", "tbb", "onednn"},
                               "runtimes: serial, omp, aten, tbb, onednn (default: those this build has)");
  prog.flags().add_int_list("n", "1048576", 1, 1LL << 30,
                            "floats per array (32768: in cache ... 16777216: memory-bound)");
  int code = 0;
  if (!prog.parse(&argc, argv, &code)) return code;
  tb::bench::AxisSpace space("runtime_region");
  try {
    for (const auto& k : prog.flags().items("kernel")) {
      if ((k == "tbb" && !tb::have_tbb()) || (k == "onednn" && !tb::have_dnnl())) {
        throw tb::Error("--kernel: " + k + ": this build has no " + (k == "tbb" ? "TBB" : "oneDNN") +
                        " (configure with THREADBURN_WITH_" + (k == "tbb" ? "TBB" : "DNNL") + "=ON)");
      }
    }
    if (prog.flags().text("device") != "cpu") throw tb::Error("--device: runtime_bench runs on cpu only");
    space.add_axis("kernel", prog.flags().items("kernel"));
    space.add_axis("n", prog.flags().integers("n"));
    space.add_axis("gap_ms", prog.gaps());
  } catch (const std::exception& e) {
    return prog.fail(e);
  }
  tb::observe_tbb_workers();
  const tb::bench::LoopOptions loop = prog.loop_options();
  return prog.run(space, [&](benchmark::State& state, const tb::bench::Point& p) {
    const int64_t n = p.integer("n");
    Data d(n);
    auto kernel = make_kernel(p.text("kernel"), d);
    Serial serial;
    const int reps = n >= (1 << 22) ? 5 : 20;
    const double serial_ms = median_ms(serial, d, reps);
    const double b2b_ms = median_ms(*kernel, d, reps);
    tb::bench::LoopOptions lo = loop;
    lo.gap_ms = p.integer("gap_ms");
    tb::bench::StepLoop(state, p.name(), lo).run([&] {
      kernel->run(d);
      return tb::StepFigures{};
    });
    benchmark::DoNotOptimize(d.p.data());
    tb::bench::Counters c(state);
    const double region_ms = c.get("step_ms");
    c.set("serial_ms", serial_ms);
    c.set("backtoback_ms", b2b_ms);
    c.set("wakeup_ms", region_ms - b2b_ms);
    c.set("kernel_threads", kernel->threads());
    c.set("overhead_ms", region_ms - serial_ms / kernel->threads());
    c.set("speedup", region_ms > 0 ? serial_ms / region_ms : 0);
  }, tb::torch_context(torch::kCPU), benchmark::kMicrosecond);
}

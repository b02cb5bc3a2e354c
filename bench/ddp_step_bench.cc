// One data-parallel training step per iteration: the MNIST Net + Adadelta and
// the CIFAR-10 tutorial CNN + SGD-momentum of train_step_bench, each rank on
// its own shard of the data, the gradients all-reduced through gloo (c10d) in
// DDP's buckets, over model x batch (per rank) x bucket_mb x gap. The ranks
// are whatever the launcher started (torchrun's variables, mpirun, srun, or a
// world of 1 without any: core/rendezvous.h); every rank runs the same
// benchmarks in the same order and reports its own rows (rank, world_size).
// The ranks meet before each benchmark's warmup, so their timed steps overlap.
// A rank that cannot reach its peers (one never comes, the port is taken, one
// died) prints one error line and exits 2 within --timeout_s (plus a margin).
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/rendezvous.h"
#include "metrics.h"
#include "program.h"
#include "train_flags.h"
#include "workload/ddp.h"
#include "workload/train.h"

namespace tb = threadburn;

namespace {

constexpr const char* kProgram = "ddp_step_bench";
// What a watchdog allows beyond --timeout_s: c10d's own timeouts fire first.
constexpr int kWatchdogMarginS = 30;

// Prints "ddp_step_bench: error: <what>" and exits 2 at once: a failed rank
// must not run the destructors of a process group whose peers may be stuck.
[[noreturn]] void die(const std::string& what) {
  std::fflush(stdout);
  std::fprintf(stderr, "%s: error: %s\n", kProgram, what.c_str());
  std::fflush(stderr);
  std::_Exit(2);
}

// The last resort against a hang outside c10d's own timeouts (setting up the
// process group, the meetings, the teardown): SIGALRM writes one line and
// exits 2. One at a time; nothing else in the program uses SIGALRM.
char g_alarm_line[512];
size_t g_alarm_len = 0;
void on_alarm(int) {
  const ssize_t r = ::write(2, g_alarm_line, g_alarm_len);
  (void)r;
  ::_exit(2);
}
class Watchdog {
 public:
  Watchdog(int seconds, const std::string& what) {
    std::snprintf(g_alarm_line, sizeof(g_alarm_line), "%s: error: %s did not finish within %d s\n", kProgram,
                  what.c_str(), seconds);
    g_alarm_len = std::strlen(g_alarm_line);
    struct sigaction sa {};
    sa.sa_handler = on_alarm;
    ::sigaction(SIGALRM, &sa, nullptr);
    ::alarm(static_cast<unsigned>(seconds));
  }
  ~Watchdog() { ::alarm(0); }
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;
};

void declare_flags(tb::FlagParser& f) {
  tb::bench::declare_training_flags(f);
  f.add_int_list("bucket_mb", std::to_string(tb::kDdpDefaultBucketMb), 0, 1024,
                 "gradient bucket caps in MB (DDP's bucket_cap_mb, default 25; the first bucket 1 MB); "
                 "0: one all-reduce per parameter tensor");
  f.add_int("timeout_s", 60, 1, 3600,
            "seconds a rank waits for its peers (rendezvous, each all-reduce) before it fails with exit 2");
}

tb::bench::AxisSpace make_space(const tb::FlagParser& f, const std::vector<int64_t>& gaps) {
  tb::bench::AxisSpace space("ddp_step");
  space.add_axis("model", f.items("model"));
  space.add_axis("batch", f.integers("batch"));
  space.add_axis("bucket_mb", f.integers("bucket_mb"));
  space.add_axis("gap_ms", gaps);
  return space;
}

// Every rank decides alike: against the smallest shard of any rank.
void check_batches(const tb::FlagParser& f, const std::map<std::string, tb::ImageSet>& sets, int world) {
  for (const auto& [m, set] : sets) {
    const int64_t shard = tb::smallest_shard(set.size(), world);
    for (int64_t b : f.integers("batch")) {
      if (b > shard) {
        throw tb::Error("--batch: " + std::to_string(b) + " is larger than a rank's shard of the " + m +
                        " dataset (" + std::to_string(shard) + " of " + std::to_string(set.size()) +
                        " examples over " + std::to_string(world) + " rank(s))");
      }
    }
  }
}

// Google Benchmark's flags that change which benchmarks run, how often, or in
// what order (the output flags may differ between ranks).
bool selects_runs(const std::string& arg) {
  for (const char* p : {"--benchmark_filter", "--benchmark_repetitions", "--benchmark_min_time",
                        "--benchmark_min_warmup_time", "--benchmark_enable_random_interleaving"}) {
    if (arg.rfind(p, 0) == 0) return true;
  }
  return false;
}

// What every rank must agree on: the benchmarks, in order, and the loop.
std::string run_signature(const tb::bench::AxisSpace& space, const tb::FlagParser& f,
                          const std::vector<std::string>& benchmark_args) {
  std::string s;
  for (const auto& p : space.points()) s += p.name() + ";";
  for (const char* flag : {"steps", "warmup", "data_dir", "synthetic_n", "augment"}) {
    s += std::string(flag) + "=" + f.text(flag) + ";";
  }
  for (const auto& a : benchmark_args) s += a + ";";
  return s;
}

// This rank's place in the world, its process group and its shards (none for
// --describe, nor on CUDA, where every benchmark skips).
struct World {
  tb::Rendezvous rv;
  std::unique_ptr<tb::DdpGroup> group;
  std::map<std::string, tb::ImageSet> shards;
};

// Rendezvous and group; exits 2 with one line on any failure (returns only a
// usable world). A bad launcher variable or --batch fails before any peer is
// contacted.
World join_world(const tb::bench::Program& prog, const tb::FlagParser& f,
                 const std::map<std::string, tb::ImageSet>& datasets, const tb::bench::AxisSpace& space,
                 const std::vector<std::string>& benchmark_args) {
  World w;
  try {
    w.rv = tb::rendezvous_from_env();
    check_batches(f, datasets, w.rv.world_size);
  } catch (const std::exception& e) {
    std::_Exit(prog.fail(e));
  }
  const int timeout_s = static_cast<int>(f.integer("timeout_s"));
  try {
    Watchdog dog(timeout_s + kWatchdogMarginS, "rank " + std::to_string(w.rv.rank) + ": the rendezvous at " +
                                                   w.rv.master_addr + ":" + std::to_string(w.rv.master_port));
    w.group = std::make_unique<tb::DdpGroup>(w.rv, std::chrono::seconds(timeout_s));
    w.group->check_same("benchmark list", run_signature(space, f, benchmark_args));
  } catch (const std::exception& e) {
    die(e.what());
  }
  for (const auto& [m, set] : datasets) w.shards[m] = tb::shard_of(set, w.rv.rank, w.rv.world_size);
  return w;
}

// The world in the context (world_size and rank are counters of every row:
// bench/metrics.cc).
void add_world_context(const World& w, tb::Context* ctx) {
  const bool joined = w.group != nullptr;
  ctx->emplace_back("dist_rendezvous", joined ? w.rv.source : "n/a");
  ctx->emplace_back("dist_local_rank", joined ? std::to_string(w.rv.local_rank) : "n/a");
  ctx->emplace_back("dist_master", joined ? w.rv.master_addr + ":" + std::to_string(w.rv.master_port) : "n/a");
  ctx->emplace_back("gloo_device", joined ? w.group->device_address() : "n/a");
  ctx->emplace_back("gloo_threads", joined ? std::to_string(w.group->gloo_threads().size()) : "n/a");
}

// One benchmark: this rank's steps of one point. A rank that failed here and
// skipped would leave its peers waiting in the next collective: any failure
// ends the program instead.
void run_point(benchmark::State& state, const tb::bench::Point& p, World& w, const tb::bench::LoopOptions& loop,
               bool augment) {
  if (!w.group) {
    return tb::bench::skip(state, "skipped: ddp_step_bench runs on the CPU only (gloo all-reduce of host tensors)");
  }
  tb::DdpOptions o;
  o.batch = p.integer("batch");
  o.bucket_mb = p.integer("bucket_mb");
  o.augment = augment && p.text("model") == "cifar_sgd";
  try {
    tb::DdpWorkload work(p.text("model"), w.shards.at(p.text("model")), *w.group, o);
    tb::bench::LoopOptions lo = loop;
    lo.gap_ms = p.integer("gap_ms");
    lo.samples_per_step = static_cast<double>(o.batch);
    lo.meet = [&] { w.group->barrier(); };
    tb::bench::StepLoop(state, p.name(), lo).run([&] { return work.step(); });
    tb::bench::Counters c(state);
    c.set("world_size", w.group->world_size());
    c.set("rank", w.group->rank());
    c.set("buckets", work.buckets());
    c.set("param_checksum", static_cast<double>(work.param_checksum()));
  } catch (const std::exception& e) {
    die(std::string(p.name()) + ": " + e.what());
  }
}

// Nobody tears down its end of the process group while a peer still runs.
void leave_world(World& w, int timeout_s) {
  if (!w.group) return;
  Watchdog dog(timeout_s + kWatchdogMarginS, "rank " + std::to_string(w.rv.rank) + ": the final barrier");
  try {
    w.group->barrier();
    w.group.reset();
  } catch (const std::exception& e) {
    die(e.what());
  }
}

}  // namespace

int main(int argc, char** argv) {
  tb::bench::Program prog(kProgram, "ddp_step",
                          "Times data-parallel training steps (each rank on its shard of the data, --batch per rank, "
                          "gradients all-reduced through gloo over the ranks the launcher started) and the CPU "
                          "that threads keep burning after each step.",
                          "0,100");
  prog.launch_as_ranks();
  declare_flags(prog.flags());
  prog.set_throughput("samples_per_s", "samples/s");
  tb::bench::register_counters(tb::train_counters());
  tb::bench::register_counters(tb::ddp_counters());
  std::vector<std::string> benchmark_args;  // before parse() consumes them
  for (int i = 1; i < argc; ++i) {
    if (selects_runs(argv[i])) benchmark_args.emplace_back(argv[i]);
  }
  int code = 0;
  if (!prog.parse(&argc, argv, &code)) return code;
  const tb::FlagParser& f = prog.flags();
  torch::Device device = torch::kCPU;
  std::map<std::string, tb::ImageSet> datasets;
  std::unique_ptr<tb::bench::AxisSpace> space;
  try {
    device = tb::parse_device(f.text("device"));
    space = std::make_unique<tb::bench::AxisSpace>(make_space(f, prog.gaps()));
    space->points();
    for (const auto& a : benchmark_args) {
      if (a.rfind("--benchmark_enable_random_interleaving", 0) == 0 && a.find("=false") == std::string::npos) {
        throw tb::Error("--benchmark_enable_random_interleaving: the ranks must run the benchmarks in one order");
      }
    }
    if (!f.describe_requested()) datasets = tb::bench::load_training_datasets(f);
  } catch (const std::exception& e) {
    return prog.fail(e);
  }
  tb::Context ctx = tb::torch_context(device);
  ctx.emplace_back("dist_backend", "gloo");
  ctx.emplace_back("dist_timeout_s", f.text("timeout_s"));
  World world;
  if (!f.describe_requested() && !device.is_cuda()) world = join_world(prog, f, datasets, *space, benchmark_args);
  add_world_context(world, &ctx);
  const tb::bench::LoopOptions loop = prog.loop_options();
  const bool augment = f.integer("augment") == 1;
  code = prog.run(*space, [&](benchmark::State& state, const tb::bench::Point& p) {
    run_point(state, p, world, loop, augment);
  }, ctx);
  leave_world(world, static_cast<int>(f.integer("timeout_s")));
  return code;
}

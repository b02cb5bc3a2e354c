// Data-parallel training on the CPU: a c10d process group (TCPStore +
// ProcessGroupGloo) built from a Rendezvous, and a DdpWorkload that does one
// step of what torch.nn.parallel.DistributedDataParallel does: forward,
// backward, the gradients all-reduced in buckets (DDP's bucket assignment),
// averaged over the world, optimizer step. Each rank trains on its own shard
// of the dataset (rank-strided indices). The c10d headers stay in ddp.cc.
#pragma once

#include <sys/types.h>
#include <torch/torch.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/counters.h"
#include "core/rendezvous.h"
#include "workload/data.h"
#include "workload/train.h"

namespace threadburn {

// DDP's defaults: bucket_cap_mb=25, and a first bucket of 1 MB
// (torch.distributed._DEFAULT_FIRST_BUCKET_BYTES).
constexpr int64_t kDdpDefaultBucketMb = 25;
constexpr int64_t kDdpFirstBucketBytes = 1 << 20;

// The process group of this rank. Rank 0 serves a TCPStore at
// master_addr:master_port and every rank connects to it (a world of 1: an
// in-process store, no port); gloo's device binds to the loopback address when
// the master is local (127.0.0.0/8, "localhost"), else to the address this host
// reaches the master from, or to the interface GLOO_SOCKET_IFNAME names.
//
// gloo's threads are classed ThreadClass::kGloo by creation window: every
// thread that appears in /proc/self/task while the store and the process group
// are created and the first all-reduce runs (the device's event loop,
// ProcessGroupGloo's worker threads, the TCPStore's daemon threads). c10d has
// no hook to name or enter its threads, so this is by creation window, not by
// name; the constructor runs before any benchmark, when nothing else in the
// process starts threads.
//
// Every operation that waits for the peers gives up after `timeout` and
// throws Error (one line, "rank R: ..."): a peer that never comes, a port
// already in use, a peer that died.
class DdpGroup {
 public:
  DdpGroup(const Rendezvous& rv, std::chrono::milliseconds timeout);
  ~DdpGroup();
  DdpGroup(const DdpGroup&) = delete;
  DdpGroup& operator=(const DdpGroup&) = delete;

  int rank() const { return rank_; }
  int world_size() const { return world_size_; }
  std::chrono::milliseconds timeout() const { return timeout_; }
  // The address gloo's device is bound to.
  const std::string& device_address() const { return device_address_; }
  // The threads classed kGloo (see above).
  const std::vector<pid_t>& gloo_threads() const { return gloo_threads_; }

  // Every rank meets here (an all-reduce of one element).
  void barrier();
  // Sums each tensor over the ranks, in place: one all-reduce per tensor, all
  // in flight at once, then waited for.
  void allreduce_sum(std::vector<torch::Tensor>& tensors);
  // Rank root's values into every rank's tensors.
  void broadcast(std::vector<torch::Tensor>& tensors, int root);
  // Throws Error when a rank's `text` differs from rank 0's ("rank 1's <what>
  // differs from rank 0's: ..."): the ranks must run the same benchmarks.
  void check_same(const std::string& what, const std::string& text);

  // c10d's work handles, opaque here (ddp.cc).
  struct Impl;

 private:
  // Every rank announces itself in the store and waits for all the others;
  // throws Error naming the ranks missing after the timeout.
  void wait_for_ranks(const std::string& who, const std::string& master);

  int rank_, world_size_;
  std::chrono::milliseconds timeout_;
  std::string device_address_;
  std::vector<pid_t> gloo_threads_;
  std::unique_ptr<Impl> impl_;
  friend class DdpWorkload;
};

// Rank `rank`'s shard of a dataset of the world: examples rank, rank + W, ...
ImageSet shard_of(const ImageSet& set, int rank, int world_size);
// The smallest shard of any rank (every rank checks the batch against it, so
// all ranks decide alike).
int64_t smallest_shard(int64_t examples, int world_size);

// Gradient buckets as DDP assigns them: parameters in reverse order (about the
// order backward produces their gradients), a bucket closed once it holds at
// least its limit: kDdpFirstBucketBytes (or less, when bucket_bytes is less)
// for the first, bucket_bytes for the others. bucket_bytes 0: one bucket per
// parameter. Returns, per bucket, the indices into `numel_bytes`.
std::vector<std::vector<size_t>> assign_buckets(const std::vector<int64_t>& numel_bytes, int64_t bucket_bytes);

// The counters a data-parallel step reports besides training's (owned here:
// ddp_step_bench registers this table): allreduce_ms, world_size, rank,
// buckets, param_checksum.
const CounterTable& ddp_counters();

struct DdpOptions {
  int64_t batch = 64;  // per rank
  int64_t bucket_mb = kDdpDefaultBucketMb;
  bool augment = false;
  torch::Device device = torch::kCPU;
};

class DdpWorkload {
 public:
  // model: one of train_models(); shard: this rank's part of the dataset.
  // Broadcasts rank 0's parameters (DDP does at construction).
  DdpWorkload(const std::string& model, const ImageSet& shard, DdpGroup& group, const DdpOptions& options);
  // data, forward, backward, allreduce (gradients into the buckets, every
  // bucket's all-reduce and its wait, the mean back into the gradients), optim.
  StepFigures step() { return train_.step(); }
  int buckets() const { return static_cast<int>(buckets_.size()); }
  // A 48-bit hash of the parameters' bytes (exact in a double): equal on every
  // rank while the all-reduce keeps the replicas in step.
  int64_t param_checksum() const;
  // The model's parameters (their grad() after a step: the world's mean).
  const std::vector<torch::Tensor>& parameters() const { return params_; }

 private:
  void reduce_gradients();

  DdpGroup& group_;
  TrainWorkload train_;
  std::vector<torch::Tensor> params_;
  struct Bucket {
    std::vector<size_t> params;
    std::vector<int64_t> offsets;
    torch::Tensor flat;
  };
  std::vector<Bucket> buckets_;
};

}  // namespace threadburn

// The data-parallel workload on its own: DDP's bucket assignment, the shards,
// and a world of 1 live (gloo's threads classed, one step with its all-reduce).
// Two ranks and more: tests/bench/check_ddp.py.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <chrono>
#include <vector>

#include "core/rendezvous.h"
#include "core/thread_class.h"
#include "workload/ddp.h"
#include "workload/train.h"

namespace threadburn {
namespace {

using Buckets = std::vector<std::vector<size_t>>;
constexpr int64_t kMb = 1 << 20;

TEST(DdpBuckets, ReverseOrderFirstBucketOneMb) {
  // Parameters 0..3 of 100 B, 2 MB, 30 MB, 10 B: the last first; the first
  // bucket closes at 1 MB, the next ones at the cap (a tensor may overshoot).
  EXPECT_EQ(assign_buckets({100, 2 * kMb, 30 * kMb, 10}, 25 * kMb), Buckets({{3, 2}, {1, 0}}));
  EXPECT_EQ(assign_buckets({kMb, kMb, kMb, kMb}, 2 * kMb), Buckets({{3}, {2, 1}, {0}}));
  // Everything small: one bucket.
  EXPECT_EQ(assign_buckets({10, 20, 30}, 25 * kMb), Buckets({{2, 1, 0}}));
  // 0: one bucket per parameter.
  EXPECT_EQ(assign_buckets({10, 20, 30}, 0), Buckets({{2}, {1}, {0}}));
  EXPECT_TRUE(assign_buckets({}, 25 * kMb).empty());
}

TEST(DdpShards, RankStridedIndices) {
  ImageSet set{torch::arange(10, torch::kUInt8).reshape({10, 1, 1, 1}), torch::arange(10, torch::kLong)};
  const ImageSet s = shard_of(set, 1, 3);
  ASSERT_EQ(s.size(), 3);
  EXPECT_EQ(s.labels[0].item<int64_t>(), 1);
  EXPECT_EQ(s.labels[1].item<int64_t>(), 4);
  EXPECT_EQ(s.labels[2].item<int64_t>(), 7);
  EXPECT_EQ(s.images[2].item<uint8_t>(), 7);
  EXPECT_EQ(shard_of(set, 0, 3).size(), 4);
  EXPECT_EQ(shard_of(set, 0, 1).size(), 10);
  EXPECT_EQ(smallest_shard(10, 3), 3);
  EXPECT_EQ(smallest_shard(10, 1), 10);
}

TEST(DdpGroupLive, WorldOfOneClassesGlooThreadsAndSteps) {
  DdpGroup group(Rendezvous{}, std::chrono::seconds(20));
  EXPECT_EQ(group.world_size(), 1);
  EXPECT_EQ(group.device_address(), "127.0.0.1");
  // gloo's event loop and ProcessGroupGloo's two workers at least.
  ASSERT_GE(group.gloo_threads().size(), 3u);
  for (pid_t tid : group.gloo_threads()) EXPECT_EQ(thread_class(tid), ThreadClass::kGloo) << tid;
  EXPECT_NE(thread_class(current_tid()), ThreadClass::kGloo);

  std::vector<torch::Tensor> t = {torch::full({4}, 3.0)};
  group.allreduce_sum(t);
  EXPECT_EQ(t[0][0].item<double>(), 3.0);
  group.barrier();

  const ImageSet data = dataset_for("cifar_sgd", "", 64);
  DdpOptions o;
  o.batch = 16;
  DdpWorkload work("cifar_sgd", data, group, o);
  EXPECT_EQ(work.buckets(), 1);  // the CIFAR net is far below 1 MB
  const int64_t before = work.param_checksum();
  EXPECT_EQ(before, work.param_checksum());
  const StepPhases p = work.step();
  EXPECT_GT(p.allreduce_ms, 0.0);
  EXPECT_GT(p.backward_ms, 0.0);
  EXPECT_NE(work.param_checksum(), before);  // the optimizer moved the parameters
  EXPECT_LT(work.param_checksum(), int64_t{1} << 48);
}

}  // namespace
}  // namespace threadburn

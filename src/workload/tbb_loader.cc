// A data loader built on TBB, the alternative to libtorch's DataLoader threads:
// a producer thread runs a parallel_pipeline in a task_arena of `workers`
// threads: (serial) next example index -> (parallel) per-example transform ->
// (serial, in order) collate into batches -> a bounded queue the step pops.
#include <oneapi/tbb/parallel_pipeline.h>
#include <oneapi/tbb/task_arena.h>
#include <pthread.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include "workload/data.h"
#include "workload/loader_impl.h"

namespace threadburn {
namespace {

constexpr size_t kQueuedBatches = 2;  // like DataLoader's prefetch of 2 per worker, kept small

class TbbLoaderSource : public BatchSource {
 public:
  TbbLoaderSource(const ImageSet& set, const Normalization& norm, const PipelineOptions& o)
      : set_(set), norm_(norm), o_(o), arena_(static_cast<int>(o.workers)),
        gen_(at::detail::createCPUGenerator(o.seed)) {
    producer_ = std::thread([this] { produce(); });
  }

  ~TbbLoaderSource() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    producer_.join();
  }

  Batch next() override {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return !queue_.empty() || failed_; });
    if (failed_ && queue_.empty()) throw Error("tbb loader: " + error_);
    Batch b = std::move(queue_.front());
    queue_.pop_front();
    cv_.notify_all();
    return b;
  }

 private:
  struct Item {
    int64_t index = 0;
    torch::Tensor data;
  };

  void produce() {
    mark_loader_thread();
    try {
      arena_.execute([&] {
        oneapi::tbb::parallel_pipeline(
            static_cast<size_t>(o_.workers * o_.batch),
            oneapi::tbb::make_filter<void, Item>(oneapi::tbb::filter_mode::serial_in_order,
                                                 [&](oneapi::tbb::flow_control& fc) {
                                                   if (stopping()) {
                                                     fc.stop();
                                                     return Item{};
                                                   }
                                                   return Item{next_index(), {}};
                                                 }) &
                oneapi::tbb::make_filter<Item, Item>(oneapi::tbb::filter_mode::parallel,
                                                     [&](Item it) {
                                                       mark_loader_thread();
                                                       it.data = transform_example(set_.images[it.index], norm_,
                                                                                   o_.augment, o_.seed ^ draws_++);
                                                       return it;
                                                     }) &
                oneapi::tbb::make_filter<Item, void>(oneapi::tbb::filter_mode::serial_in_order,
                                                     [&](Item it) { collate(std::move(it)); }));
      });
    } catch (const std::exception& e) {
      std::lock_guard<std::mutex> lock(mu_);
      failed_ = true;
      error_ = e.what();
      cv_.notify_all();
    }
  }

  bool stopping() {
    std::lock_guard<std::mutex> lock(mu_);
    return stop_;
  }

  int64_t next_index() {
    if (!order_.defined() || pos_ >= order_.size(0)) {
      order_ = torch::randperm(set_.size(), gen_, torch::kLong);
      pos_ = 0;
    }
    return order_[pos_++].item<int64_t>();
  }

  void collate(Item it) {
    pending_data_.push_back(std::move(it.data));
    pending_index_.push_back(it.index);
    if (static_cast<int64_t>(pending_data_.size()) < o_.batch) return;
    Batch b{torch::stack(pending_data_),
            set_.labels.index_select(0, torch::tensor(pending_index_, torch::kLong))};
    pending_data_.clear();
    pending_index_.clear();
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return queue_.size() < kQueuedBatches || stop_; });
    if (stop_) return;
    queue_.push_back(std::move(b));
    cv_.notify_all();
  }

  ImageSet set_;
  Normalization norm_;
  PipelineOptions o_;
  oneapi::tbb::task_arena arena_;
  at::Generator gen_;
  torch::Tensor order_;
  int64_t pos_ = 0;
  std::atomic<uint64_t> draws_{0};
  std::vector<torch::Tensor> pending_data_;
  std::vector<int64_t> pending_index_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Batch> queue_;
  bool stop_ = false, failed_ = false;
  std::string error_;
  std::thread producer_;
};

}  // namespace

std::unique_ptr<BatchSource> make_tbb_loader(const ImageSet& set, const Normalization& norm,
                                             const PipelineOptions& o) {
  return std::make_unique<TbbLoaderSource>(set, norm, o);
}

}  // namespace threadburn

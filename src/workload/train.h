// A training workload: model + optimizer + batch source, one step at a time,
// with the time of each phase. Device-generic (cpu or cuda).
#pragma once

#include <torch/torch.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/phases.h"
#include "runtime/runtime.h"
#include "workload/data.h"
#include "workload/models.h"

namespace threadburn {

const std::vector<std::string>& train_models();       // mnist_adadelta, cifar_sgd
const std::vector<std::string>& optimizer_kinds();    // sgd, adadelta

// Whether the device can run here; if not, why, as a benchmark skip message
// ("skipped: no CUDA device", "skipped: CUDA device 3 does not exist (1 present)").
Availability device_availability(const torch::Device& device);
// Parses "cpu", "cuda", "cuda:N"; throws Error naming --device.
torch::Device parse_device(const std::string& text);

class TrainWorkload {
 public:
  // model: one of train_models(); data: a dataset matching the model's input.
  TrainWorkload(const std::string& model, const ImageSet& data, const PipelineOptions& options);
  StepPhases step();
  // The MNIST example prints loss.item() every step: a host-device sync point.
  void set_item_sync(bool on) { item_sync_ = on; }
  double last_loss() const;  // forces a sync on CUDA: not for timed code
  // Runs between backward and the optimizer step, its wall time the step's
  // allreduce_ms: a data-parallel step all-reduces the gradients there (ddp.h).
  void set_gradient_hook(std::function<void()> hook) { gradient_hook_ = std::move(hook); }
  std::vector<torch::Tensor> parameters() const { return module_->parameters(); }

 private:
  std::string model_;
  PipelineOptions options_;
  torch::nn::AnyModule model_any_;
  std::shared_ptr<torch::nn::Module> module_;
  std::unique_ptr<StepOptimizer> optimizer_;
  std::unique_ptr<BatchSource> source_;
  torch::Tensor loss_;
  bool item_sync_ = false;
  double last_item_ = 0;
  std::function<void()> gradient_hook_;
};

// The dataset a model trains on: real files from data_dir when given, else
// deterministic synthetic images of the right shape (n examples).
ImageSet dataset_for(const std::string& model, const std::string& data_dir, int64_t synthetic_n);

// An optimizer-only step (a loop's sleep; step; sleep): `params` floats in tensors of at most
// 1 << 20 elements (a layer-sized chunk), grads filled once with fixed noise.
class OptimizerWorkload {
 public:
  OptimizerWorkload(const std::string& kind, int64_t params, const torch::Device& device);
  void step();  // optimizer.step() + zero_grad()
  const std::vector<torch::Tensor>& params() const { return params_; }

 private:
  std::vector<torch::Tensor> params_;
  std::unique_ptr<StepOptimizer> optimizer_;
  torch::Device device_;
};

// ATen and torch facts for the benchmark context.
Context torch_context(const torch::Device& device);

}  // namespace threadburn

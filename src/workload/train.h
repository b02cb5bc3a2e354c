// A training workload: model + optimizer + batch source, one step at a time,
// with the time of each phase. Device-generic (cpu or cuda).
#pragma once

#include <torch/torch.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/counters.h"
#include "runtime/runtime.h"
#include "workload/data.h"
#include "workload/models.h"

namespace threadburn {

namespace cuda {
class GpuTimer;
}

// A model the training workloads can train: its name (the --model value),
// one line of help, the images it takes, how its dataset is made or read, its
// network and optimizer, and its loss. The one list of models (train.cc);
// adding one is one more entry there.
struct ModelSpec {
  const char* name;
  const char* help;
  int64_t channels, height, width;
  uint64_t synthetic_seed;
  Normalization (*normalization)();
  ImageSet (*read)(const std::string& data_dir);
  // The network on `device` (as a Module and as an AnyModule for forward) and its optimizer.
  void (*build)(const torch::Device& device, std::shared_ptr<torch::nn::Module>* module,
                torch::nn::AnyModule* any, std::unique_ptr<StepOptimizer>* optimizer);
  torch::Tensor (*loss)(const torch::Tensor& out, const torch::Tensor& target);
};
const std::vector<ModelSpec>& model_registry();
const ModelSpec& model_spec(const std::string& name);  // throws Error naming --model
const std::vector<std::string>& train_models();       // the registry's names, in its order
// "models: a (help), b (help)": the --model flag's help.
std::string train_models_help();
const std::vector<std::string>& optimizer_kinds();    // sgd, adadelta

// Whether the device can run here; if not, why, as a benchmark skip message
// ("skipped: no CUDA device", "skipped: CUDA device 3 does not exist (1 present)").
Availability device_availability(const torch::Device& device);
// Parses "cpu", "cuda", "cuda:N"; throws Error naming --device.
torch::Device parse_device(const std::string& text);

// The counters a training step reports (its phases), owned here: the
// programs that train register this table (bench/metrics.h).
const CounterTable& train_counters();

class TrainWorkload {
 public:
  // model: one of train_models(); data: a dataset matching the model's input.
  TrainWorkload(const std::string& model, const ImageSet& data, const PipelineOptions& options);
  // One step; its figures are the phases of train_counters() (and, with a
  // gradient hook, the hook's figure).
  StepFigures step();
  // The MNIST example prints loss.item() every step: a host-device sync point.
  void set_item_sync(bool on) { item_sync_ = on; }
  double last_loss() const;  // forces a sync on CUDA: not for timed code
  // Runs between backward and the optimizer step, its wall time the step's
  // figure `figure` (a name of the hook owner's counter table): a
  // data-parallel step all-reduces the gradients there (ddp.h: allreduce_ms).
  void set_gradient_hook(const char* figure, std::function<void()> hook) {
    hook_figure_ = figure;
    gradient_hook_ = std::move(hook);
  }
  std::vector<torch::Tensor> parameters() const { return module_->parameters(); }
  // Events around the step's device work (gpu_span_ms): started once the
  // batch is on the device, stopped when the optimizer step is queued, before
  // the step's end waits for the device; the loader's time is not in it.
  void set_device_span(cuda::GpuTimer* timer) { span_ = timer; }
  // A sleep on the host between backward (and the gradient hook) and the
  // optimizer step, in no phase's figure: the known answer of the GPU
  // figures (the GPU waits for its host that long and does no work).
  void set_host_sleep_ms(int64_t ms) { host_sleep_ms_ = ms; }

 private:
  const ModelSpec& model_;
  PipelineOptions options_;
  torch::nn::AnyModule model_any_;
  std::shared_ptr<torch::nn::Module> module_;
  std::unique_ptr<StepOptimizer> optimizer_;
  std::unique_ptr<BatchSource> source_;
  torch::Tensor loss_;
  bool item_sync_ = false;
  double last_item_ = 0;
  const char* hook_figure_ = nullptr;
  std::function<void()> gradient_hook_;
  cuda::GpuTimer* span_ = nullptr;
  int64_t host_sleep_ms_ = 0;
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

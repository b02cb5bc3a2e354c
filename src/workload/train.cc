#include "workload/train.h"

#include <ATen/Parallel.h>
#include <torch/version.h>

#include <stdexcept>

#include "core/clock.h"
#include "cuda/cuda_host.h"

namespace threadburn {
namespace {

double ms_since(int64_t t0_ns) { return ns_to_ms(wall_ns() - t0_ns); }

void sync_if_cuda(const torch::Device& device) {
  if (device.is_cuda()) torch::cuda::synchronize(device.index());
}

std::vector<torch::Tensor> params_of(const std::shared_ptr<torch::nn::Module>& m) {
  return m->parameters();
}

}  // namespace

const std::vector<ModelSpec>& model_registry() {
  static const std::vector<ModelSpec> models = {
      {"mnist_adadelta", "MNIST Net + Adadelta", 1, 28, 28, 2002, mnist_normalization, read_mnist,
       [](const torch::Device& device, std::shared_ptr<torch::nn::Module>* module, torch::nn::AnyModule* any,
          std::unique_ptr<StepOptimizer>* optimizer) {
         MnistNet net;
         net->to(device);
         *module = net.ptr();
         *any = torch::nn::AnyModule(net);
         *optimizer = std::make_unique<Adadelta>(params_of(*module), 1.0);  // the MNIST example: lr=1.0
       },
       [](const torch::Tensor& out, const torch::Tensor& target) { return torch::nll_loss(out, target); }},
      {"cifar_sgd", "CIFAR-10 CNN + SGD-momentum", 3, 32, 32, 2000, cifar_normalization, read_cifar10,
       [](const torch::Device& device, std::shared_ptr<torch::nn::Module>* module, torch::nn::AnyModule* any,
          std::unique_ptr<StepOptimizer>* optimizer) {
         CifarNet net;
         net->to(device);
         *module = net.ptr();
         *any = torch::nn::AnyModule(net);
         // The PyTorch CIFAR-10 tutorial's optimizer: SGD(lr=0.001, momentum=0.9).
         *optimizer = std::make_unique<SgdMomentum>(params_of(*module), 0.001, 0.9);
       },
       [](const torch::Tensor& out, const torch::Tensor& target) {
         return torch::nn::functional::cross_entropy(out, target);
       }},
  };
  return models;
}

const ModelSpec& model_spec(const std::string& name) {
  for (const ModelSpec& m : model_registry()) {
    if (name == m.name) return m;
  }
  throw Error("--model: unknown model '" + name + "'");
}

const std::vector<std::string>& train_models() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const ModelSpec& m : model_registry()) out.emplace_back(m.name);
    return out;
  }();
  return names;
}

std::string train_models_help() {
  std::string out = "models: ";
  for (const ModelSpec& m : model_registry()) {
    out += std::string(&m == &model_registry().front() ? "" : ", ") + m.name + " (" + m.help + ")";
  }
  return out;
}

const CounterTable& train_counters() {
  static const CounterTable table = {
      {"data_ms", "ms", "train steps: waiting for the loader + copy to the device"},
      {"forward_ms", "ms", "train steps: zero_grad + forward + loss"},
      {"backward_ms", "ms", "train steps: loss.backward()"},
      {"optim_ms", "ms", "train steps: optimizer.step()"},
      {"sync_ms", "ms", "CUDA or --item_sync: waiting for the device at the step's end"},
      {"sync_cpu_ms", "ms", "the main thread's CPU while it waited for the device (spin vs blocking wait)"},
  };
  return table;
}

const std::vector<std::string>& optimizer_kinds() {
  static const std::vector<std::string> k = {"sgd", "adadelta"};
  return k;
}

torch::Device parse_device(const std::string& text) {
  if (text == "cpu") return torch::kCPU;
  if (text == "cuda") return torch::Device(torch::kCUDA, 0);
  if (text.rfind("cuda:", 0) == 0) {
    const std::string n = text.substr(5);
    if (!n.empty() && n.find_first_not_of("0123456789") == std::string::npos && n.size() < 4) {
      return torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(std::stoi(n)));
    }
  }
  throw Error("--device: expected cpu, cuda or cuda:N, got '" + text + "'");
}

Availability device_availability(const torch::Device& device) {
  if (!device.is_cuda()) return Availability::yes();
  if (!torch::cuda::is_available()) {
    const int n = cuda::device_count();
    if (n > 0) {
      return Availability::no("skipped: this libtorch is built without CUDA (" + std::to_string(n) +
                              " CUDA device(s) present; see docs/cuda.md)");
    }
    return Availability::no("skipped: no CUDA device");
  }
  const auto n = torch::cuda::device_count();
  if (device.index() >= static_cast<int64_t>(n)) {
    return Availability::no("skipped: CUDA device " + std::to_string(device.index()) + " does not exist (" +
                            std::to_string(n) + " present)");
  }
  return Availability::yes();
}

ImageSet dataset_for(const std::string& model, const std::string& data_dir, int64_t synthetic_n) {
  const ModelSpec& m = model_spec(model);
  return data_dir.empty() ? synthetic_images(synthetic_n, m.channels, m.height, m.width, 10, m.synthetic_seed)
                          : m.read(data_dir);
}

TrainWorkload::TrainWorkload(const std::string& model, const ImageSet& data, const PipelineOptions& options)
    : model_(model_spec(model)), options_(options) {
  if (data.images.size(1) != model_.channels || data.images.size(2) != model_.height ||
      data.images.size(3) != model_.width) {
    throw Error("--data_dir: " + model + " needs " + std::to_string(model_.channels) + "x" +
                std::to_string(model_.height) + "x" + std::to_string(model_.width) + " images");
  }
  model_.build(options.device, &module_, &model_any_, &optimizer_);
  source_ = make_batch_source(data, model_.normalization(), options);
  module_->train();
}

StepFigures TrainWorkload::step() {
  StepFigures t;
  int64_t t0 = wall_ns();
  Batch b = source_->next();
  t.set("data_ms", ms_since(t0));
  if (span_) span_->start();

  t0 = wall_ns();
  optimizer_->zero_grad();
  torch::Tensor out = model_any_.forward(b.data);
  loss_ = model_.loss(out, b.target);
  t.set("forward_ms", ms_since(t0));

  t0 = wall_ns();
  loss_.backward();
  t.set("backward_ms", ms_since(t0));

  if (gradient_hook_) {
    t0 = wall_ns();
    gradient_hook_();
    t.set(hook_figure_, ms_since(t0));
  }
  if (host_sleep_ms_ > 0) sleep_for_ns(host_sleep_ms_ * kNsPerMsInt);

  t0 = wall_ns();
  optimizer_->step();
  t.set("optim_ms", ms_since(t0));
  if (span_) span_->stop();

  double sync_ms = 0, sync_cpu_ms = 0;
  if (item_sync_ || options_.device.is_cuda()) {
    const int64_t cpu0 = thread_cpu_ns();
    t0 = wall_ns();
    if (item_sync_) last_item_ = loss_.item<double>();  // the host reads the loss: a sync point
    sync_if_cuda(options_.device);  // a CUDA step ends when the device is done
    sync_ms = ms_since(t0);
    sync_cpu_ms = ns_to_ms(thread_cpu_ns() - cpu0);
  }
  t.set("sync_ms", sync_ms);
  t.set("sync_cpu_ms", sync_cpu_ms);
  return t;
}

double TrainWorkload::last_loss() const { return loss_.defined() ? loss_.item<double>() : 0.0; }

OptimizerWorkload::OptimizerWorkload(const std::string& kind, int64_t params, const torch::Device& device)
    : device_(device) {
  constexpr int64_t kChunk = 1 << 20;
  auto gen = at::detail::createCPUGenerator(0);
  for (int64_t left = params; left > 0; left -= kChunk) {
    const int64_t n = std::min(left, kChunk);
    auto p = torch::randn({n}, gen).to(device).requires_grad_(true);
    p.mutable_grad() = torch::randn({n}, gen).mul_(1e-3).to(device);
    params_.push_back(p);
  }
  if (kind == "sgd") {
    optimizer_ = std::make_unique<SgdMomentum>(params_, 0.01, 0.9);
  } else if (kind == "adadelta") {
    optimizer_ = std::make_unique<Adadelta>(params_, 1.0);
  } else {
    throw Error("--optimizer: unknown optimizer '" + kind + "'");
  }
}

void OptimizerWorkload::step() {
  optimizer_->step();
  optimizer_->zero_grad();
  sync_if_cuda(device_);
}

Context torch_context(const torch::Device& device) {
  return {
      {"torch_version", TORCH_VERSION},
      {"aten_intra_op_threads", std::to_string(at::get_num_threads())},
      {"aten_inter_op_threads", std::to_string(at::get_num_interop_threads())},
      {"mkldnn_enabled", at::globalContext().userEnabledMkldnn() ? "1" : "0"},
      {"device_in_force", device.str()},
      {"cuda_available", torch::cuda::is_available() ? "1" : "0"},
  };
}

}  // namespace threadburn

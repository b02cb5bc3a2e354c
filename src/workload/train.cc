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

const std::vector<std::string>& train_models() {
  static const std::vector<std::string> m = {"mnist_adadelta", "cifar_sgd"};
  return m;
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
  if (model == "mnist_adadelta") {
    return data_dir.empty() ? synthetic_images(synthetic_n, 1, 28, 28, 10, 2002) : read_mnist(data_dir);
  }
  if (model == "cifar_sgd") {
    return data_dir.empty() ? synthetic_images(synthetic_n, 3, 32, 32, 10, 2000) : read_cifar10(data_dir);
  }
  throw Error("--model: unknown model '" + model + "'");
}

TrainWorkload::TrainWorkload(const std::string& model, const ImageSet& data,
                             const PipelineOptions& options)
    : model_(model), options_(options) {
  if (model == "mnist_adadelta") {
    if (data.images.size(1) != 1 || data.images.size(2) != 28 || data.images.size(3) != 28) {
      throw Error("--data-dir: mnist_adadelta needs 1x28x28 images");
    }
    MnistNet net;
    net->to(options.device);
    module_ = net.ptr();
    model_any_ = torch::nn::AnyModule(net);
    optimizer_ = std::make_unique<Adadelta>(params_of(module_), 1.0);  // the MNIST example: lr=1.0
    source_ = make_batch_source(data, mnist_normalization(), options);
  } else if (model == "cifar_sgd") {
    if (data.images.size(1) != 3 || data.images.size(2) != 32 || data.images.size(3) != 32) {
      throw Error("--data-dir: cifar_sgd needs 3x32x32 images");
    }
    CifarNet net;
    net->to(options.device);
    module_ = net.ptr();
    model_any_ = torch::nn::AnyModule(net);
    // The PyTorch CIFAR-10 tutorial's optimizer: SGD(lr=0.001, momentum=0.9).
    optimizer_ = std::make_unique<SgdMomentum>(params_of(module_), 0.001, 0.9);
    source_ = make_batch_source(data, cifar_normalization(), options);
  } else {
    throw Error("--model: unknown model '" + model + "'");
  }
  module_->train();
}

StepPhases TrainWorkload::step() {
  StepPhases t;
  int64_t t0 = wall_ns();
  Batch b = source_->next();
  t.data_ms = ms_since(t0);

  t0 = wall_ns();
  optimizer_->zero_grad();
  torch::Tensor out = model_any_.forward(b.data);
  loss_ = model_ == "mnist_adadelta" ? torch::nll_loss(out, b.target)
                                     : torch::nn::functional::cross_entropy(out, b.target);
  t.forward_ms = ms_since(t0);

  t0 = wall_ns();
  loss_.backward();
  t.backward_ms = ms_since(t0);

  if (gradient_hook_) {
    t0 = wall_ns();
    gradient_hook_();
    t.allreduce_ms = ms_since(t0);
  }

  t0 = wall_ns();
  optimizer_->step();
  t.optim_ms = ms_since(t0);

  if (item_sync_ || options_.device.is_cuda()) {
    const int64_t cpu0 = thread_cpu_ns();
    t0 = wall_ns();
    if (item_sync_) last_item_ = loss_.item<double>();  // the host reads the loss: a sync point
    sync_if_cuda(options_.device);  // a CUDA step ends when the device is done
    t.sync_ms = ms_since(t0);
    t.sync_cpu_ms = ns_to_ms(thread_cpu_ns() - cpu0);
  }
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

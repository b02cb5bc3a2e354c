#include "workload/models.h"

namespace threadburn {

namespace nn = torch::nn;
namespace F = torch::nn::functional;

MnistNetImpl::MnistNetImpl() {
  conv1 = register_module("conv1", nn::Conv2d(nn::Conv2dOptions(1, 32, 3).stride(1)));
  conv2 = register_module("conv2", nn::Conv2d(nn::Conv2dOptions(32, 64, 3).stride(1)));
  dropout1 = register_module("dropout1", nn::Dropout(0.25));
  dropout2 = register_module("dropout2", nn::Dropout(0.5));
  fc1 = register_module("fc1", nn::Linear(9216, 128));
  fc2 = register_module("fc2", nn::Linear(128, 10));
}

torch::Tensor MnistNetImpl::forward(torch::Tensor x) {
  x = torch::relu(conv1->forward(x));
  x = torch::relu(conv2->forward(x));
  x = torch::max_pool2d(x, 2);
  x = dropout1->forward(x);
  x = torch::flatten(x, 1);
  x = torch::relu(fc1->forward(x));
  x = dropout2->forward(x);
  x = fc2->forward(x);
  return torch::log_softmax(x, 1);
}

CifarNetImpl::CifarNetImpl() {
  conv1 = register_module("conv1", nn::Conv2d(nn::Conv2dOptions(3, 6, 5)));
  conv2 = register_module("conv2", nn::Conv2d(nn::Conv2dOptions(6, 16, 5)));
  fc1 = register_module("fc1", nn::Linear(16 * 5 * 5, 120));
  fc2 = register_module("fc2", nn::Linear(120, 84));
  fc3 = register_module("fc3", nn::Linear(84, 10));
}

torch::Tensor CifarNetImpl::forward(torch::Tensor x) {
  x = torch::max_pool2d(torch::relu(conv1->forward(x)), 2);
  x = torch::max_pool2d(torch::relu(conv2->forward(x)), 2);
  x = torch::flatten(x, 1);
  x = torch::relu(fc1->forward(x));
  x = torch::relu(fc2->forward(x));
  return fc3->forward(x);
}

Adadelta::Adadelta(std::vector<torch::Tensor> params, double lr, double rho, double eps)
    : params_(std::move(params)), lr_(lr), rho_(rho), eps_(eps) {
  for (const auto& p : params_) {
    square_avg_.push_back(torch::zeros_like(p, torch::MemoryFormat::Preserve));
    acc_delta_.push_back(torch::zeros_like(p, torch::MemoryFormat::Preserve));
  }
}

void Adadelta::step() {
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < params_.size(); ++i) {
    const torch::Tensor& grad = params_[i].grad();
    if (!grad.defined()) continue;
    square_avg_[i].mul_(rho_).addcmul_(grad, grad, 1 - rho_);
    torch::Tensor std = square_avg_[i].add(eps_).sqrt_();
    torch::Tensor delta = acc_delta_[i].add(eps_).sqrt_().div_(std).mul_(grad);
    acc_delta_[i].mul_(rho_).addcmul_(delta, delta, 1 - rho_);
    params_[i].add_(delta, -lr_);
  }
}

void Adadelta::zero_grad() {
  for (auto& p : params_) {
    if (p.mutable_grad().defined()) p.mutable_grad().zero_();
  }
}

SgdMomentum::SgdMomentum(std::vector<torch::Tensor> params, double lr, double momentum)
    : sgd_(std::move(params), torch::optim::SGDOptions(lr).momentum(momentum)) {}

}  // namespace threadburn

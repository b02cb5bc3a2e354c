// The two training workloads' models.
#pragma once

#include <torch/torch.h>

#include <string>
#include <vector>

namespace threadburn {

// The PyTorch MNIST example's Net, layer for layer (1x28x28 inputs).
struct MnistNetImpl : torch::nn::Module {
  MnistNetImpl();
  torch::Tensor forward(torch::Tensor x);  // log-probabilities, [N, 10]
  torch::nn::Conv2d conv1{nullptr}, conv2{nullptr};
  torch::nn::Dropout dropout1{nullptr}, dropout2{nullptr};
  torch::nn::Linear fc1{nullptr}, fc2{nullptr};
};
TORCH_MODULE(MnistNet);

// A CIFAR-10 CNN trained with SGD + momentum; the training script's model is not
// given, so this is the PyTorch CIFAR-10 tutorial's Net (3x32x32 inputs).
struct CifarNetImpl : torch::nn::Module {
  CifarNetImpl();
  torch::Tensor forward(torch::Tensor x);  // logits, [N, 10]
  torch::nn::Conv2d conv1{nullptr}, conv2{nullptr};
  torch::nn::Linear fc1{nullptr}, fc2{nullptr}, fc3{nullptr};
};
TORCH_MODULE(CifarNet);

// An optimizer step over given parameters; zero_grad() zeroes existing grads
// (libtorch 1.13's behaviour: no set_to_none).
class StepOptimizer {
 public:
  virtual ~StepOptimizer() = default;
  virtual void step() = 0;
  virtual void zero_grad() = 0;
};

// PyTorch's Adadelta (torch/optim/adadelta.py, 1.13), which libtorch's C++ API
// lacks: square_avg = rho*square_avg + (1-rho)*g^2;
// delta = sqrt(acc_delta+eps)/sqrt(square_avg+eps)*g;
// acc_delta = rho*acc_delta + (1-rho)*delta^2; p -= lr*delta.
class Adadelta : public StepOptimizer {
 public:
  Adadelta(std::vector<torch::Tensor> params, double lr = 1.0, double rho = 0.9, double eps = 1e-6);
  void step() override;
  void zero_grad() override;

 private:
  std::vector<torch::Tensor> params_, square_avg_, acc_delta_;
  double lr_, rho_, eps_;
};

// torch::optim::SGD with momentum (buf = g on the first step, then m*buf + g).
class SgdMomentum : public StepOptimizer {
 public:
  SgdMomentum(std::vector<torch::Tensor> params, double lr, double momentum);
  void step() override { sgd_.step(); }
  void zero_grad() override { sgd_.zero_grad(); }

 private:
  torch::optim::SGD sgd_;
};

}  // namespace threadburn

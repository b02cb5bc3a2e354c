// Datasets and the data pipeline: deterministic synthetic images by default,
// readers for the real MNIST IDX and CIFAR-10 binary files, and two ways to
// feed batches: libtorch DataLoader worker threads (with CIFAR augmentation),
// or the whole set preloaded in one tensor with batches taken by index.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"

namespace threadburn {


struct ImageSet {
  torch::Tensor images;  // uint8 [N, C, H, W]
  torch::Tensor labels;  // int64 [N]
  int64_t size() const { return images.defined() ? images.size(0) : 0; }
};

// Per-channel normalisation constants of each dataset (torchvision's usual ones).
struct Normalization {
  std::vector<double> mean, std;
};
Normalization mnist_normalization();
Normalization cifar_normalization();

ImageSet synthetic_images(int64_t n, int64_t channels, int64_t height, int64_t width,
                          int64_t classes, uint64_t seed);

// MNIST IDX: train-images-idx3-ubyte (magic 2051) + train-labels-idx1-ubyte (magic 2049).
ImageSet read_mnist(const std::string& dir);
void write_mnist(const std::string& dir, const ImageSet& set);
// CIFAR-10 binary: data_batch_1.bin ... data_batch_5.bin, records of 1 label byte + 3072.
ImageSet read_cifar10(const std::string& dir);
void write_cifar10(const std::string& dir, const ImageSet& set, int64_t files = 1);

struct Batch {
  torch::Tensor data;    // float [B, C, H, W] on the device
  torch::Tensor target;  // int64 [B] on the device
};

struct PipelineOptions {
  int64_t batch = 64;
  int64_t workers = 0;      // DataLoader worker threads; 0 = load on the calling thread
  bool preload = false;     // whole set in one tensor on the device, batches by index
  bool tbb_loader = false;  // a TBB parallel_pipeline instead of DataLoader threads
  bool augment = false;     // random crop (pad 4) + horizontal flip, per example
  bool pin_memory = false;  // CUDA only: page-locked host batches
  bool non_blocking = false;
  torch::Device device = torch::kCPU;
  uint64_t seed = 1;
};

class BatchSource {
 public:
  virtual ~BatchSource() = default;
  virtual Batch next() = 0;  // endless: a new epoch starts when one ends
};

std::unique_ptr<BatchSource> make_batch_source(const ImageSet& set, const Normalization& norm,
                                               const PipelineOptions& options);

// One example through the per-example transform (what loader threads run).
torch::Tensor transform_example(const torch::Tensor& image_u8, const Normalization& norm,
                                bool augment, uint64_t seed);

}  // namespace threadburn

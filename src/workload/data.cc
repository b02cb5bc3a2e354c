#include "workload/data.h"

#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <random>

#include "core/thread_class.h"
#include "workload/loader_impl.h"

namespace threadburn {
namespace {

constexpr uint32_t kMnistImageMagic = 2051;
constexpr uint32_t kMnistLabelMagic = 2049;
constexpr int64_t kCifarRecord = 1 + 3 * 32 * 32;

std::vector<uint8_t> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("--data_dir: " + path + ": cannot open");
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

void write_file(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  if (!out) throw Error("cannot write " + path);
}

uint32_t be32(const std::vector<uint8_t>& b, size_t at) {
  return (uint32_t{b[at]} << 24) | (uint32_t{b[at + 1]} << 16) | (uint32_t{b[at + 2]} << 8) | b[at + 3];
}

void put_be32(std::vector<uint8_t>* b, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) b->push_back(static_cast<uint8_t>(v >> shift));
}

bool exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

void check_dir(const std::string& dir) {
  struct stat st {};
  if (dir.empty()) throw Error("--data_dir: empty path");
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    throw Error("--data_dir: " + dir + ": no such directory");
  }
}

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

torch::Tensor channel_tensor(const std::vector<double>& v) {
  return torch::tensor(v, torch::kFloat).view({static_cast<int64_t>(v.size()), 1, 1});
}

}  // namespace

Normalization mnist_normalization() { return {{0.1307}, {0.3081}}; }
Normalization cifar_normalization() { return {{0.4914, 0.4822, 0.4465}, {0.2470, 0.2435, 0.2616}}; }

ImageSet synthetic_images(int64_t n, int64_t channels, int64_t height, int64_t width,
                          int64_t classes, uint64_t seed) {
  auto gen = at::detail::createCPUGenerator(seed);
  ImageSet set;
  set.images = torch::randint(0, 256, {n, channels, height, width}, gen, torch::kUInt8);
  set.labels = torch::randint(0, classes, {n}, gen, torch::kLong);
  return set;
}

ImageSet read_mnist(const std::string& dir) {
  check_dir(dir);
  const std::string ipath = dir + "/train-images-idx3-ubyte";
  const std::string lpath = dir + "/train-labels-idx1-ubyte";
  const auto img = read_file(ipath);
  const auto lab = read_file(lpath);
  if (img.size() < 16 || be32(img, 0) != kMnistImageMagic) {
    throw Error("--data_dir: " + ipath + ": not an MNIST image file (magic 2051 expected)");
  }
  if (lab.size() < 8 || be32(lab, 0) != kMnistLabelMagic) {
    throw Error("--data_dir: " + lpath + ": not an MNIST label file (magic 2049 expected)");
  }
  const int64_t n = be32(img, 4), rows = be32(img, 8), cols = be32(img, 12);
  const size_t want = 16 + static_cast<size_t>(n * rows * cols);
  if (img.size() != want) {
    throw Error("--data_dir: " + ipath + ": truncated or oversized (header says " +
                    std::to_string(want) + " bytes, file has " + std::to_string(img.size()) + ")");
  }
  const int64_t nl = be32(lab, 4);
  if (lab.size() != 8 + static_cast<size_t>(nl)) {
    throw Error("--data_dir: " + lpath + ": truncated or oversized (header says " +
                    std::to_string(8 + nl) + " bytes, file has " + std::to_string(lab.size()) + ")");
  }
  if (nl != n) throw Error("--data_dir: " + lpath + ": " + std::to_string(nl) + " labels for " + std::to_string(n) + " images");
  if (n == 0) throw Error("--data_dir: " + ipath + ": no images");
  ImageSet set;
  set.images = torch::from_blob(const_cast<uint8_t*>(img.data() + 16), {n, 1, rows, cols}, torch::kUInt8).clone();
  set.labels = torch::from_blob(const_cast<uint8_t*>(lab.data() + 8), {n}, torch::kUInt8).to(torch::kLong);
  if (set.labels.max().item<int64_t>() > 9) throw Error("--data_dir: " + lpath + ": label above 9");
  return set;
}

void write_mnist(const std::string& dir, const ImageSet& set) {
  const auto images = set.images.contiguous();
  const int64_t n = images.size(0), rows = images.size(2), cols = images.size(3);
  std::vector<uint8_t> img, lab;
  put_be32(&img, kMnistImageMagic);
  put_be32(&img, static_cast<uint32_t>(n));
  put_be32(&img, static_cast<uint32_t>(rows));
  put_be32(&img, static_cast<uint32_t>(cols));
  img.insert(img.end(), images.data_ptr<uint8_t>(), images.data_ptr<uint8_t>() + images.numel());
  put_be32(&lab, kMnistLabelMagic);
  put_be32(&lab, static_cast<uint32_t>(n));
  const auto labels = set.labels.to(torch::kUInt8).contiguous();
  lab.insert(lab.end(), labels.data_ptr<uint8_t>(), labels.data_ptr<uint8_t>() + n);
  write_file(dir + "/train-images-idx3-ubyte", img);
  write_file(dir + "/train-labels-idx1-ubyte", lab);
}

ImageSet read_cifar10(const std::string& dir) {
  check_dir(dir);
  std::vector<torch::Tensor> images, labels;
  for (int i = 1; i <= 5; ++i) {
    const std::string path = dir + "/data_batch_" + std::to_string(i) + ".bin";
    if (!exists(path)) continue;
    const auto bytes = read_file(path);
    if (bytes.empty() || bytes.size() % kCifarRecord != 0) {
      throw Error("--data_dir: " + path + ": size " + std::to_string(bytes.size()) +
                      " is not a whole number of 3073-byte CIFAR-10 records (truncated?)");
    }
    const int64_t n = static_cast<int64_t>(bytes.size()) / kCifarRecord;
    auto raw = torch::from_blob(const_cast<uint8_t*>(bytes.data()), {n, kCifarRecord}, torch::kUInt8);
    auto lab = raw.select(1, 0).to(torch::kLong);
    if (lab.max().item<int64_t>() > 9) {
      throw Error("--data_dir: " + path + ": label byte above 9: not CIFAR-10 binary");
    }
    labels.push_back(lab);
    images.push_back(raw.narrow(1, 1, 3072).reshape({n, 3, 32, 32}).clone());
  }
  if (images.empty()) {
    throw Error("--data_dir: " + dir + ": no data_batch_1.bin ... data_batch_5.bin (CIFAR-10 binary version)");
  }
  return {torch::cat(images), torch::cat(labels)};
}

void write_cifar10(const std::string& dir, const ImageSet& set, int64_t files) {
  const int64_t n = set.size();
  const int64_t per = (n + files - 1) / files;
  for (int64_t f = 0; f < files; ++f) {
    const int64_t begin = f * per, end = std::min(n, begin + per);
    auto rec = torch::cat({set.labels.slice(0, begin, end).to(torch::kUInt8).unsqueeze(1),
                           set.images.slice(0, begin, end).reshape({end - begin, 3072})}, 1).contiguous();
    std::vector<uint8_t> bytes(rec.data_ptr<uint8_t>(), rec.data_ptr<uint8_t>() + rec.numel());
    write_file(dir + "/data_batch_" + std::to_string(f + 1) + ".bin", bytes);
  }
}

torch::Tensor transform_example(const torch::Tensor& image_u8, const Normalization& norm,
                                bool augment, uint64_t seed) {
  torch::Tensor x = image_u8.to(torch::kFloat).div_(255.0);
  if (augment) {
    // torchvision RandomCrop(32, padding=4) + RandomHorizontalFlip().
    const uint64_t r = splitmix64(seed);
    const int64_t h = x.size(1), w = x.size(2);
    const int64_t top = static_cast<int64_t>(r % 9), left = static_cast<int64_t>((r >> 8) % 9);
    x = torch::constant_pad_nd(x, {4, 4, 4, 4}, 0).slice(1, top, top + h).slice(2, left, left + w);
    if ((r >> 16) & 1) x = x.flip({2});
    x = x.contiguous();
  }
  return x.sub_(channel_tensor(norm.mean)).div_(channel_tensor(norm.std));
}

namespace {

// What the DataLoader's worker threads run, one example at a time.
class ExampleDataset : public torch::data::datasets::Dataset<ExampleDataset> {
 public:
  ExampleDataset(ImageSet set, Normalization norm, bool augment, uint64_t seed)
      : set_(std::move(set)), norm_(std::move(norm)), augment_(augment), seed_(seed) {}

  torch::data::Example<> get(size_t index) override {
    mark_loader_thread();
    const uint64_t draw = seed_ ^ splitmix64(index) ^ splitmix64(calls_->fetch_add(1) + 0x51ed);
    const int64_t i = static_cast<int64_t>(index);
    return {transform_example(set_.images[i], norm_, augment_, draw), set_.labels[i]};
  }
  torch::optional<size_t> size() const override { return static_cast<size_t>(set_.size()); }

 private:
  ImageSet set_;
  Normalization norm_;
  bool augment_;
  uint64_t seed_;
  // shared: the DataLoader moves and copies the dataset.
  std::shared_ptr<std::atomic<uint64_t>> calls_ = std::make_shared<std::atomic<uint64_t>>(0);
};

using Loader = torch::data::StatelessDataLoader<
    torch::data::datasets::MapDataset<ExampleDataset, torch::data::transforms::Stack<>>,
    torch::data::samplers::RandomSampler>;

class LoaderSource : public BatchSource {
 public:
  LoaderSource(const ImageSet& set, const Normalization& norm, const PipelineOptions& o) : o_(o) {
    auto dataset = ExampleDataset(set, norm, o.augment, o.seed)
                       .map(torch::data::transforms::Stack<>());
    loader_ = std::make_unique<Loader>(
        std::move(dataset), torch::data::samplers::RandomSampler(static_cast<int64_t>(set.size())),
        torch::data::DataLoaderOptions().batch_size(static_cast<size_t>(o.batch))
            .workers(static_cast<size_t>(o.workers)).drop_last(true));
    it_ = std::make_unique<torch::data::Iterator<torch::data::Example<>>>(loader_->begin());
  }

  Batch next() override {
    if (*it_ == loader_->end()) *it_ = loader_->begin();  // next epoch
    torch::data::Example<> ex = **it_;
    ++*it_;
    if (o_.device.is_cuda()) {
      if (o_.pin_memory) {
        ex.data = ex.data.pin_memory();
        ex.target = ex.target.pin_memory();
      }
      return {ex.data.to(o_.device, o_.non_blocking), ex.target.to(o_.device, o_.non_blocking)};
    }
    return {ex.data, ex.target};
  }

 private:
  PipelineOptions o_;
  std::unique_ptr<Loader> loader_;
  std::unique_ptr<torch::data::Iterator<torch::data::Example<>>> it_;
};

// The MNIST example's "gpu" mode: the normalised set lives in one tensor on the device
// and a batch is an index_select of a shuffled index range.
class PreloadedSource : public BatchSource {
 public:
  PreloadedSource(const ImageSet& set, const Normalization& norm, const PipelineOptions& o)
      : o_(o), gen_(at::detail::createCPUGenerator(o.seed)) {
    torch::Tensor x = set.images.to(torch::kFloat).div_(255.0);
    const int64_t c = x.size(1);
    x.sub_(channel_tensor(norm.mean).view({1, c, 1, 1})).div_(channel_tensor(norm.std).view({1, c, 1, 1}));
    data_ = x.to(o.device);
    labels_ = set.labels.to(o.device);
    reshuffle();
  }

  Batch next() override {
    if (pos_ + o_.batch > data_.size(0)) reshuffle();
    auto idx = order_.slice(0, pos_, pos_ + o_.batch);
    pos_ += o_.batch;
    return {data_.index_select(0, idx), labels_.index_select(0, idx)};
  }

 private:
  void reshuffle() {
    order_ = torch::randperm(data_.size(0), gen_, torch::kLong).to(o_.device);
    pos_ = 0;
  }
  PipelineOptions o_;
  at::Generator gen_;
  torch::Tensor data_, labels_, order_;
  int64_t pos_ = 0;
};

}  // namespace

void mark_loader_thread() {
  // The main thread (tid == pid) runs the loader itself when workers = 0: it
  // stays the measured thread. Others are marked once; the name is for people.
  thread_local bool marked = false;
  if (marked) return;
  marked = true;
  if (current_tid() == ::getpid()) return;
  mark_current_thread(ThreadClass::kLoader);
  pthread_setname_np(pthread_self(), "tb-loader");
}

std::unique_ptr<BatchSource> make_batch_source(const ImageSet& set, const Normalization& norm,
                                               const PipelineOptions& o) {
  if (o.batch < 1) throw Error("--batch: must be >= 1");
  if (o.batch > set.size()) {
    throw Error("--batch: " + std::to_string(o.batch) + " is larger than the dataset (" +
                                std::to_string(set.size()) + " examples)");
  }
  if (o.preload) {
    if (o.workers != 0) throw Error("--workers: must be 0 with --preload=1 (no loader runs)");
    if (o.tbb_loader) throw Error("--tbb_loader: cannot be combined with --preload=1");
    return std::make_unique<PreloadedSource>(set, norm, o);
  }
  if (o.tbb_loader) {
#if THREADBURN_HAVE_TBB
    if (o.workers < 1) throw Error("--workers: the TBB loader needs at least 1 worker");
    return make_tbb_loader(set, norm, o);
#else
    throw Error("--loader: tbb: this build has no TBB (configure with THREADBURN_WITH_TBB=ON)");
#endif
  }
  return std::make_unique<LoaderSource>(set, norm, o);
}

}  // namespace threadburn

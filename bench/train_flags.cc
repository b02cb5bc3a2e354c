#include "train_flags.h"

namespace threadburn::bench {

void declare_training_flags(FlagParser& f) {
  f.add_choice_list("model", "mnist_adadelta,cifar_sgd", train_models(), train_models_help());
  f.add_int_list("batch", "64", 1, 65536, "batch sizes");
  f.add_int("augment", 1, 0, 1, "1: CIFAR random crop (pad 4) + flip per example in the loader (cifar_sgd only)");
  f.add_string("data_dir", "", "read real MNIST IDX / CIFAR-10 binary files here (default: synthetic data)");
  f.add_int("synthetic_n", 4096, 1, 10000000, "examples in the synthetic dataset");
}

std::map<std::string, ImageSet> load_training_datasets(const FlagParser& f) {
  std::map<std::string, ImageSet> sets;
  for (const auto& m : f.items("model")) sets[m] = dataset_for(m, f.text("data_dir"), f.integer("synthetic_n"));
  return sets;
}

}  // namespace threadburn::bench

// What the programs that train (train_step_bench, ddp_step_bench) share,
// declared once: the training flags (model, batch, augment, data_dir,
// synthetic_n) and the datasets they name.
#pragma once

#include <map>
#include <string>

#include "core/cli.h"
#include "workload/train.h"

namespace threadburn::bench {

void declare_training_flags(FlagParser& f);
// One dataset per --model, before anything runs: a bad --data_dir fails here, once.
std::map<std::string, ImageSet> load_training_datasets(const FlagParser& f);

}  // namespace threadburn::bench

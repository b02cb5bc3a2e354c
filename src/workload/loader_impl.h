// Internal to the workload library: the loader implementations behind
// make_batch_source().
#pragma once

#include <memory>

#include "workload/data.h"

namespace threadburn {

std::unique_ptr<BatchSource> make_tbb_loader(const ImageSet& set, const Normalization& norm,
                                             const PipelineOptions& o);
// Names the calling thread "tb-loader" once, unless it is the thread that
// created the loader (workers = 0 runs the loader on the main thread).
void name_loader_thread();

}  // namespace threadburn

// Internal to the workload library: the loader implementations behind
// make_batch_source().
#pragma once

#include <memory>

#include "workload/data.h"

namespace threadburn {

std::unique_ptr<BatchSource> make_tbb_loader(const ImageSet& set, const Normalization& norm,
                                             const PipelineOptions& o);
// Marks the calling thread as a loader thread (core/thread_class.h) once,
// unless it is the process's main thread (workers = 0 runs the loader there).
void mark_loader_thread();

}  // namespace threadburn

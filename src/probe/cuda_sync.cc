// libthreadburn_cuda_sync.so: preload it with THREADBURN_CUDA_SYNC=spin,
// yield or blocking_sync and the CUDA host wait policy of every device's
// primary context is set before the program's first CUDA call, without
// threadburn and without a change to the program (docs/cuda.md, "The host
// wait policy of your own program"):
//
//   THREADBURN_CUDA_SYNC=blocking_sync
//   LD_PRELOAD=/usr/libexec/threadburn/libthreadburn_cuda_sync.so python3 train.py
//
// Unset or auto: nothing at all (the driver is not even loaded). It never
// stops the program: when it cannot apply the policy (no driver, no device,
// a context already active, a failing call, a word it does not know) it says
// so in one line on stderr, prefixed "threadburn cuda_sync:". It exports no
// symbol.
#include "cuda/driver_policy.h"

namespace {

__attribute__((constructor)) void apply_cuda_sync() {
  // The driver stays loaded (DriverPolicy never closes it: after cuInit its
  // threads run its code); nothing is read back, so nothing is kept.
  threadburn::cuda::DriverPolicy policy;
  threadburn::cuda::apply_from_environment(&policy, true);
}

}  // namespace

// The phases of one training step, timed by the workload (ms, wall clock).
// One struct for the workloads that fill it and the benchmarks that report it.
#pragma once

namespace threadburn {

struct StepPhases {
  double data_ms = 0;      // next batch (waiting for the loader) + copy to the device
  double forward_ms = 0;   // zero_grad + forward + loss
  double backward_ms = 0;
  double optim_ms = 0;     // optimizer step
  double sync_ms = 0;      // loss.item() and/or waiting for the device at the step's end
  double sync_cpu_ms = 0;  // CPU the main thread used meanwhile (spin vs blocking wait)
  double gpu_ms = 0;       // CUDA: GPU time of the step from events
  double allreduce_ms = 0; // data-parallel steps: gradient all-reduce
};

}  // namespace threadburn

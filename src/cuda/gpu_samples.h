// The GPU's busy share from the driver's utilisation samples, as pure
// functions of made-up or real samples (tests/cpp/gpu_samples_test.cc); the
// preload probe gets the samples through NVML (nvml_sampler.h).
//
// What a sample is (NVML's documentation of nvmlUtilization_t and of
// nvmlDeviceGetSamples with NVML_GPU_UTILIZATION_SAMPLES): the percentage of
// the driver's sample period, ending at the sample's timestamp, during which
// one or more kernels ran on the GPU; the period is between 1/6 s and 1 s
// depending on the product. NVML_MEMORY_UTILIZATION_SAMPLES: the percentage
// of the period during which device memory was read or written. So a sample
// says "a kernel was running", not how much of the GPU it used: one small
// kernel at a time reads 100 %. It is the whole device's, every process on it
// together. Resolution: one sample period; a share over a window is exact to
// within the two periods at its edges.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/json.h"
#include "core/timeline.h"

namespace threadburn::gpu {

// One sample on the probe's clock (CLOCK_MONOTONIC ns, core/clock.h's
// wall_ns): the share (0..1) of the period that ends at t_ns.
struct Sample {
  int64_t t_ns = 0;
  double share = 0;
};

// One GPU's samples as collected (any order; duplicates allowed).
struct Series {
  int index = 0;             // NVML's device index (the numbers of CUDA_VISIBLE_DEVICES)
  std::string name;          // nvmlDeviceGetName
  std::string source;        // "samples" (the driver's) or "utilization_rates" (polled)
  std::vector<Sample> busy;    // kernels running
  std::vector<Sample> memory;  // device memory read or written
  // Whether the process uses this GPU, and how that is known (docs/cuda.md,
  // "The process's GPUs"): a context of its own on it (the driver's primary
  // context seen active, matched by PCI bus id), or NVML's list of the
  // device's compute processes naming its pid.
  bool context = false;
  bool listed = false;
  int cuda_device = -1;              // the driver's ordinal of the context; -1: none
  std::string wait_policy = "n/a";   // the host wait policy that context ran under
  double memory_mib = -1;            // the process's device memory at most, as NVML listed it; < 0: unknown
  bool used() const { return context || listed; }
};

// A stream of samples over a window [from_ns, to_ns].
struct Share {
  double share = 0;      // NaN when no sample covers the window
  int64_t samples = 0;   // samples whose period overlaps the window
  double period_ms = 0;  // median spacing of the samples (NaN below two)
  double first_ms = 0;   // first and last of those samples, ms from origin (NaN without any)
  double last_ms = 0;
};

// The time-weighted share over [from_ns, to_ns]: each sample stands for the
// period (t - d, t] before it, d its distance to the sample before (the
// first one: the median spacing), at most twice the median spacing (a
// longer distance means samples were lost: the time between stays
// uncovered, not credited to the next one); the share is the mean of the
// samples' values weighted by how much of their period lies in the window.
// A single sample (no spacing known) counts if it lies in the window.
// Times in the result are ms from origin_ns.
Share window_share(std::vector<Sample> samples, int64_t from_ns, int64_t to_ns, int64_t origin_ns);

// One GPU over a window: its entry of the probe's "gpus" list.
struct Summary {
  int index = 0;
  std::string name, source;
  Share busy, memory;
  bool context = false, listed = false;
  int cuda_device = -1;
  std::string wait_policy = "n/a";
  double memory_mib = -1;
  bool used() const { return context || listed; }
};
Summary summarize(const Series& s, int64_t from_ns, int64_t to_ns, int64_t origin_ns);

// The probe's counters over its GPUs: gpu_busy_share (the mean of the GPUs'
// busy shares; NaN when none was sampled), gpus_sampled (GPUs with at least
// one sample in the window), gpu_samples (their busy samples). The GPUs are
// the process's own (used()) when any is known, else every sampled one: a
// one-GPU training on an 8-GPU node is judged on its GPU, not on an eighth.
struct Totals {
  double busy_share = 0;
  int64_t gpus_sampled = 0;
  int64_t samples = 0;
};
Totals totals(const std::vector<Summary>& gpus);

// The "gpus" list: [{"index", "name", "source", "busy_share",
// "memory_busy_share", "samples", "period_ms", "first_ms", "last_ms", "used",
// "used_by" (context, nvml, context+nvml or none), "cuda_device",
// "wait_policy", "memory_mib"}]; values without a sample (memory_mib, cuda_device: unknown) are null.
void write_gpus(JsonWriter* j, const std::vector<Summary>& gpus);

// "gpu<index>_busy": the timeline series of one GPU's busy share.
std::string busy_series(int index);
// One row per busy sample in [from_ns, to_ns]: t_ms from origin_ns (the end
// of the sample's period, as every timeline rate), the share (0..1, not cores).
void add_busy_series(const Series& s, int64_t from_ns, int64_t to_ns, int64_t origin_ns, TimelineWriter* tl);

// CUDA_VISIBLE_DEVICES: the device numbers when it is a comma-separated list
// of integers (empty: none), nullopt (every device) when unset or anything
// else (GPU-<uuid>, MIG-<uuid>).
std::optional<std::vector<int>> visible_devices(const char* env);

// NVML's sample timestamps are "CPU timestamps in microseconds" on a clock
// its documentation does not name: drivers have used the Unix epoch
// (CLOCK_REALTIME), and CLOCK_BOOTTIME has been reported. The driver's
// latest sample is at most a period old, so its clock is the one whose
// current reading lies nearest it. Readings in us of the three clocks, taken
// together.
enum class Clock { kRealtime, kBoottime, kMonotonic };
struct ClockNow {
  int64_t realtime_us = 0, boottime_us = 0, monotonic_us = 0;
};
Clock nearest_clock(uint64_t latest_us, const ClockNow& now);
// A timestamp of `clock` on the probe's clock (CLOCK_MONOTONIC ns).
int64_t to_monotonic_ns(uint64_t t_us, Clock clock, const ClockNow& now);
const char* clock_name(Clock c);

}  // namespace threadburn::gpu

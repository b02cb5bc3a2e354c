// What the preload probe reports about a whole program, from its samples and
// the parallel regions it saw: CPU by class of thread inside and between
// regions, region statistics, and the burn in each gap between regions (the
// time a program spends outside OpenMP, e.g. a training loop's sleep) with its
// tail. Pure functions of made-up or real samples (tests/cpp/probe_test.cc).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "core/burn.h"
#include "core/counters.h"
#include "core/json.h"

namespace threadburn::probe {

// Region durations in power-of-two buckets of ns (bucket k: [2^k, 2^(k+1))).
constexpr int kDurationBuckets = 48;

struct RegionStats {
  int64_t count = 0;
  int64_t total_ns = 0;  // summed durations of outermost regions
  int max_team = 0;
  std::array<int64_t, kDurationBuckets> buckets{};
  void add(int64_t duration_ns, int team);
  // The duration below which a share q of regions ended: the upper bound of
  // the bucket that holds that quantile (an over-estimate by at most 2x).
  double quantile_us(double q) const;
};

// A stretch with no parallel region, at least the gap threshold long.
struct Gap {
  int64_t start_ns = 0;  // the end of the region before it
  int64_t end_ns = 0;    // the start of the next region (or the program's end)
  bool open = false;     // the program ended in it
};

struct GapBurn {
  double length_ms = 0;
  double omp_cpu_ms = 0;     // the OpenMP team's CPU in the gap
  double others_cpu_ms = 0;  // every thread but main and the sampler
  double others_wait_ms = 0; // their run-queue wait in the gap: CPU they wanted and did not get
  double omp_tail_ms = 0;    // gap start -> end of the team's last burning interval
  // The sampling interval around the gap's start, whose CPU is split between
  // the region before and the gap by time: how uncertain the burn is (CPU of
  // at most this long) and where the tail can end at the earliest.
  double boundary_ms = 0;
  bool measured = false;     // false when the samples no longer cover it
};

// CPU of the samples' span, split by the share of each sampling interval that
// was spent inside regions (BurnSample::mark_ns is the running time inside
// regions): the CPU of an interval half inside regions counts half each way.
struct RegionSplit {
  ClassArray in_regions_ns{};
  ClassArray between_ns{};
};
RegionSplit split_by_regions(const std::vector<BurnSample>& samples);

// The burn in one gap, from the samples that cover it.
GapBurn gap_burn(const std::vector<BurnSample>& samples, const Gap& gap);

// The probe's summary counters (the one counter-table type of
// src/core/counters.h; the summary and describe.json print it, the tune CSV
// reads it).
const CounterTable& counters();

}  // namespace threadburn::probe

// What the preload probe reports about a whole program, from its samples and
// the parallel regions it saw: CPU by class of thread inside and between
// regions, region statistics, and the burn in each gap between regions (the
// time a program spends outside OpenMP, e.g. a training loop's sleep) with its
// tail. Pure functions of made-up or real samples (tests/cpp/probe_test.cc).
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/burn.h"
#include "core/counters.h"
#include "core/json.h"

namespace threadburn::probe {

// Region durations in power-of-two buckets of ns (bucket k: [2^k, 2^(k+1))).
constexpr int kDurationBuckets = 48;
// Durations kept for percentiles: all of them up to this many, then a uniform
// sample of this many (reservoir sampling), per entry point and overall.
constexpr size_t kDurationsKept = 16384;

// A fixed-size uniform sample of durations: exact percentiles while no more
// than `capacity` were added, unbiased estimates from a uniform sample after.
struct DurationSample {
  size_t capacity = kDurationsKept;
  int64_t seen = 0;
  std::vector<int64_t> kept;
  uint64_t rng = 0x9E3779B97F4A7C15ull;
  void add(int64_t duration_ns);
  bool exact() const { return seen <= static_cast<int64_t>(capacity); }
  // The q-quantile in us (core/stats.h's percentile of the kept durations).
  double quantile_us(double q) const;
};

// One entry point's regions (outermost ones in the durations and share).
struct EntryStats {
  int64_t count = 0;   // outermost regions
  int64_t nested = 0;  // regions started inside another one
  int64_t total_ns = 0;
  int max_team = 0;
  std::map<int, int64_t> teams;  // team size -> outermost regions with it
  DurationSample durations;
};

struct RegionStats {
  int64_t count = 0;
  int64_t total_ns = 0;  // summed durations of outermost regions
  int max_team = 0;
  std::array<int64_t, kDurationBuckets> buckets{};
  DurationSample durations;
  int64_t nested = 0;   // regions inside another region (not in count)
  int max_depth = 0;    // deepest nesting seen (0: none)
  std::map<int, EntryStats> entries;  // by omptap::Entry
  void add(int64_t duration_ns, int team);
  // A region of an entry point (omptap::Entry as int) at nesting depth depth:
  // outermost ones (depth 0) as add() plus per entry, nested ones counted.
  void add_region(int entry, int depth, int64_t duration_ns, int team);
  // The duration below which a share q of outermost regions ended (exact
  // while at most kDurationsKept regions ran; from a uniform sample after).
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
  // The sampling interval the tail ended in (the last burning one): the burn
  // stopped somewhere inside it, so the tail is known to within this long.
  // Not always 1 ms: the sampler's period grows where sampling fast would
  // cost more than its share of a core (docs/probe.md, "Costs").
  double tail_interval_ms = 0;
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

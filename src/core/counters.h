// Counters: the one table type every part of the suite that reports counters
// uses (the benchmark programs' step loop, training, CUDA and data-parallel
// pieces, runtime_bench's kernel, the preload probe), the one function that
// describes tables as JSON, and the named figures a step hands back. The step
// loop knows no workload's vocabulary: a workload names its own figures and
// owns the table that gives each its unit and meaning (docs/design.md,
// "Counters belong to their workloads").
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "core/json.h"

namespace threadburn {

struct CounterSpec {
  const char* name;
  const char* unit;
  const char* help;
};
using CounterTable = std::vector<CounterSpec>;

// "counters": [{name, unit, help}, ...], the tables' entries in order.
void describe_counters(JsonWriter* json, const std::vector<const CounterTable*>& tables);
// The entry named `name` in the tables, or nullptr.
const CounterSpec* find_counter(const std::vector<const CounterTable*>& tables, const std::string& name);

// The figures of one step, by name (names of a counter table): the step loop
// reports each as its mean over the timed steps.
class StepFigures {
 public:
  void set(const char* name, double value);
  const std::vector<std::pair<const char*, double>>& items() const { return items_; }

 private:
  std::vector<std::pair<const char*, double>> items_;
};

}  // namespace threadburn

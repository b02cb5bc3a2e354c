// Every counter the benchmark programs report: name, unit, one line of
// meaning. The one table: counters are set only through Counters::set, which
// refuses a name missing here, and --describe prints it, so the CSV schema
// (results/README.md) and the Python side read the counters from here.
#pragma once

#include <benchmark/benchmark.h>

#include <string>
#include <vector>

#include "core/json.h"

namespace threadburn::bench {

struct Metric {
  const char* name;
  const char* unit;
  const char* help;
};

const std::vector<Metric>& metrics();
void describe_metrics(JsonWriter* json);

// state.counters, restricted to the names in metrics().
class Counters {
 public:
  explicit Counters(benchmark::State& state) : state_(state) {}
  void set(const std::string& name, double value);
  double get(const std::string& name) const;

 private:
  benchmark::State& state_;
};

}  // namespace threadburn::bench

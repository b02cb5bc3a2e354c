// The benchmarks a program runs: the cross product of its in-process axes (in
// loop order, outermost first) minus the combinations its skip rules exclude,
// each named "<family>/<first axis value>/<axis>:<value>/...". One flat loop
// instead of one nested loop per axis (as google/benchmark's ArgsProduct), and
// the rules are data: --describe prints axes, rules and the resulting
// benchmarks, and the Python side reads them instead of re-deriving them.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/json.h"

namespace threadburn::bench {

// A combination is skipped when every condition holds: the axis's value is in
// (or, negate, not in) the listed values.
struct Condition {
  std::string axis;
  std::vector<std::string> values;
  bool negate = false;
};
struct SkipRule {
  std::vector<Condition> all;
  std::string why;
};

class Point {
 public:
  Point(std::string name, std::vector<std::pair<std::string, std::string>> values)
      : name_(std::move(name)), values_(std::move(values)) {}
  const std::string& name() const { return name_; }
  const std::string& text(const std::string& axis) const;
  int64_t integer(const std::string& axis) const;
  bool flag(const std::string& axis) const { return integer(axis) != 0; }
  const std::vector<std::pair<std::string, std::string>>& values() const { return values_; }

 private:
  std::string name_;
  std::vector<std::pair<std::string, std::string>> values_;  // axis -> value, in axis order
};

class AxisSpace {
 public:
  explicit AxisSpace(std::string family) : family_(std::move(family)) {}
  void add_axis(const std::string& name, std::vector<std::string> values);
  void add_axis(const std::string& name, const std::vector<int64_t>& values);
  void add_skip(SkipRule rule) { rules_.push_back(std::move(rule)); }

  // Every combination not skipped, outermost axis first. Throws Error when
  // the flags leave nothing to run, naming the rules that skipped it all.
  std::vector<Point> points() const;
  // Whether a combination is skipped, and by which rule (nullptr: runs).
  const SkipRule* skipped_by(const std::map<std::string, std::string>& combo) const;
  // "axes", "skip_rules" and "benchmarks" of --describe.
  void describe(JsonWriter* json) const;
  const std::string& family() const { return family_; }

 private:
  std::string family_;
  std::vector<std::pair<std::string, std::vector<std::string>>> axes_;
  std::vector<SkipRule> rules_;
};

}  // namespace threadburn::bench

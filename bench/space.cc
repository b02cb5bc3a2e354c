#include "space.h"

#include <algorithm>
#include <set>

#include "core/cli.h"
#include "core/error.h"

namespace threadburn::bench {

const std::string& Point::text(const std::string& axis) const {
  for (const auto& [k, v] : values_) {
    if (k == axis) return v;
  }
  throw Error("benchmark " + name_ + " has no axis '" + axis + "'");
}

int64_t Point::integer(const std::string& axis) const { return parse_int(axis, text(axis), INT64_MIN, INT64_MAX); }

void AxisSpace::add_axis(const std::string& name, std::vector<std::string> values) {
  axes_.emplace_back(name, std::move(values));
}

void AxisSpace::add_axis(const std::string& name, const std::vector<int64_t>& values) {
  std::vector<std::string> text;
  for (int64_t v : values) text.push_back(std::to_string(v));
  add_axis(name, std::move(text));
}

const SkipRule* AxisSpace::skipped_by(const std::map<std::string, std::string>& combo) const {
  for (const SkipRule& rule : rules_) {
    bool all = !rule.all.empty();
    for (const Condition& c : rule.all) {
      auto it = combo.find(c.axis);
      if (it == combo.end()) {
        all = false;  // a rule about an axis this invocation lacks never applies
        break;
      }
      const bool in = std::find(c.values.begin(), c.values.end(), it->second) != c.values.end();
      all = all && (in != c.negate);
    }
    if (all) return &rule;
  }
  return nullptr;
}

std::vector<Point> AxisSpace::points() const {
  std::vector<Point> out;
  std::set<std::string> why;
  std::vector<size_t> index(axes_.size(), 0);
  for (const auto& a : axes_) {
    if (a.second.empty()) return out;
  }
  for (bool more = true; more;) {
    std::map<std::string, std::string> combo;
    std::vector<std::pair<std::string, std::string>> ordered;
    std::string name = family_;
    for (size_t i = 0; i < axes_.size(); ++i) {
      const auto& [axis, values] = axes_[i];
      combo[axis] = values[index[i]];
      ordered.emplace_back(axis, values[index[i]]);
      name += i == 0 ? "/" + values[index[i]] : "/" + axis + ":" + values[index[i]];
    }
    if (const SkipRule* rule = skipped_by(combo)) {
      why.insert(rule->why);
    } else {
      out.emplace_back(name, std::move(ordered));
    }
    // Odometer: the last axis turns fastest.
    more = false;
    for (size_t i = axes_.size(); i-- > 0;) {
      if (++index[i] < axes_[i].second.size()) {
        more = true;
        break;
      }
      index[i] = 0;
    }
  }
  if (out.empty()) {
    std::string reasons;
    for (const auto& w : why) reasons += (reasons.empty() ? "" : "; ") + w;
    throw Error("no benchmark to run: every combination of these flags is skipped (" + reasons + ")");
  }
  return out;
}

void AxisSpace::describe(JsonWriter* json) const {
  json->key("axes").begin_array();
  for (const auto& [axis, values] : axes_) {
    json->begin_object().field("name", axis).key("values").strings(values).end_object();
  }
  json->end_array();
  json->key("skip_rules").begin_array();
  for (const SkipRule& rule : rules_) {
    json->begin_object().key("all").begin_array();
    for (const Condition& c : rule.all) {
      json->begin_object().field("axis", c.axis).key(c.negate ? "not_in" : "in").strings(c.values).end_object();
    }
    json->end_array().field("why", rule.why).end_object();
  }
  json->end_array();
  json->key("benchmarks").begin_array();
  for (const Point& p : points()) {
    json->begin_object().field("name", p.name()).key("args").begin_object();
    for (const auto& [k, v] : p.values()) json->field(k, v);
    json->end_object().end_object();
  }
  json->end_array();
}

}  // namespace threadburn::bench

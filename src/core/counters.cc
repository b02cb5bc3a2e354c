#include "core/counters.h"

#include <cstring>

namespace threadburn {

void describe_counters(JsonWriter* json, const std::vector<const CounterTable*>& tables) {
  json->key("counters").begin_array();
  for (const CounterTable* t : tables) {
    for (const CounterSpec& c : *t) {
      json->begin_object().field("name", c.name).field("unit", c.unit).field("help", c.help).end_object();
    }
  }
  json->end_array();
}

const CounterSpec* find_counter(const std::vector<const CounterTable*>& tables, const std::string& name) {
  for (const CounterTable* t : tables) {
    for (const CounterSpec& c : *t) {
      if (name == c.name) return &c;
    }
  }
  return nullptr;
}

void StepFigures::set(const char* name, double value) {
  for (auto& [n, v] : items_) {
    if (std::strcmp(n, name) == 0) {
      v = value;
      return;
    }
  }
  items_.emplace_back(name, value);
}

}  // namespace threadburn

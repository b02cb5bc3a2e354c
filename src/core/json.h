// A small JSON writer for what the programs print about themselves
// (--describe) and what the preload probe writes: objects, arrays, strings,
// numbers. Keys and values are written in the order given.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace threadburn {

// s as a JSON string, valid JSON and valid UTF-8 whatever its bytes: control
// characters escaped, well-formed UTF-8 kept, each ill-formed sequence
// replaced by one \ufffd (json.cc). Every string the writer emits goes
// through it.
std::string json_quote(const std::string& s);

class JsonWriter {
 public:
  JsonWriter& begin_object();
  JsonWriter& end_object();
  JsonWriter& begin_array();
  JsonWriter& end_array();
  JsonWriter& key(const std::string& k);
  JsonWriter& value(const std::string& v);
  JsonWriter& value(const char* v) { return value(std::string(v)); }
  JsonWriter& value(double v);  // NaN and infinities as null
  JsonWriter& value(int64_t v);
  JsonWriter& value(int v) { return value(static_cast<int64_t>(v)); }
  JsonWriter& value(bool v);
  JsonWriter& null();
  JsonWriter& strings(const std::vector<std::string>& v);
  template <typename T>
  JsonWriter& field(const std::string& k, const T& v) {
    key(k);
    return value(v);
  }
  const std::string& str() const { return out_; }

 private:
  void comma();
  std::string out_;
  std::vector<bool> first_;  // per open container: nothing written yet
  bool after_key_ = false;
};

}  // namespace threadburn

#include "core/json.h"

#include <cmath>
#include <cstdio>

namespace threadburn {

namespace {

// How many bytes at s[i] form one well-formed UTF-8 character (RFC 3629: no
// overlong form, no surrogate, nothing above U+10FFFF), as a negative count
// where they do not: -k, the k bytes that begin one but break off (at least
// 1: a byte that begins none). Those k bytes are the "maximal subpart" that
// Unicode (3.9, U+FFFD substitution) and Python's errors="replace" each
// replace with one U+FFFD.
int utf8_length(const std::string& s, std::size_t i) {
  const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = byte(i);
  if (c < 0x80) return 1;
  int n = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // the second byte's range; the later ones' is 80..BF
  if (c >= 0xC2 && c <= 0xDF) {
    n = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    n = 3;
    if (c == 0xE0) lo = 0xA0;  // below: overlong
    if (c == 0xED) hi = 0x9F;  // above: a surrogate (U+D800..DFFF)
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4;
    if (c == 0xF0) lo = 0x90;  // below: overlong
    if (c == 0xF4) hi = 0x8F;  // above: beyond U+10FFFF
  } else {
    return -1;  // a continuation byte, C0/C1 (overlong) or F5..FF: begins nothing
  }
  for (int k = 1; k < n; ++k) {
    if (i + static_cast<std::size_t>(k) >= s.size()) return -k;
    const unsigned char b = byte(i + static_cast<std::size_t>(k));
    if (k == 1 ? (b < lo || b > hi) : (b < 0x80 || b > 0xBF)) return -k;
  }
  return n;
}

}  // namespace

// Valid JSON and valid UTF-8 for any bytes: '"', '\\' and every control
// character escaped, well-formed multibyte characters kept as they are, and
// each ill-formed sequence (a foreign encoding, a truncated name, freed
// memory) replaced by one \ufffd, so that no reader of the file dies on one
// field.
std::string json_quote(const std::string& s) {
  std::string out = "\"";
  out.reserve(s.size() + 2);
  for (std::size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x80) {
      const int n = utf8_length(s, i);
      if (n > 0) {
        out.append(s, i, static_cast<std::size_t>(n));
        i += static_cast<std::size_t>(n);
      } else {
        out += "\\ufffd";
        i += static_cast<std::size_t>(-n);
      }
      continue;
    }
    ++i;
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20 || c == 0x7f) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

void JsonWriter::comma() {
  if (after_key_) {
    after_key_ = false;
    return;
  }
  if (!first_.empty()) {
    if (!first_.back()) out_ += ",";
    first_.back() = false;
  }
}

JsonWriter& JsonWriter::begin_object() {
  comma();
  out_ += "{";
  first_.push_back(true);
  return *this;
}

JsonWriter& JsonWriter::end_object() {
  out_ += "}";
  first_.pop_back();
  return *this;
}

JsonWriter& JsonWriter::begin_array() {
  comma();
  out_ += "[";
  first_.push_back(true);
  return *this;
}

JsonWriter& JsonWriter::end_array() {
  out_ += "]";
  first_.pop_back();
  return *this;
}

JsonWriter& JsonWriter::key(const std::string& k) {
  comma();
  out_ += json_quote(k) + ":";
  after_key_ = true;
  return *this;
}

JsonWriter& JsonWriter::value(const std::string& v) {
  comma();
  out_ += json_quote(v);
  return *this;
}

JsonWriter& JsonWriter::value(double v) {
  comma();
  if (!std::isfinite(v)) {
    out_ += "null";
    return *this;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  out_ += buf;
  return *this;
}

JsonWriter& JsonWriter::value(int64_t v) {
  comma();
  out_ += std::to_string(v);
  return *this;
}

JsonWriter& JsonWriter::value(bool v) {
  comma();
  out_ += v ? "true" : "false";
  return *this;
}

JsonWriter& JsonWriter::null() {
  comma();
  out_ += "null";
  return *this;
}

JsonWriter& JsonWriter::strings(const std::vector<std::string>& v) {
  begin_array();
  for (const auto& s : v) value(s);
  return end_array();
}

}  // namespace threadburn

#include "core/tracefs.h"

#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

namespace threadburn {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

// "key:value" of one ';'-separated part of a field line.
bool part_value(std::string_view part, std::string_view key, std::string_view* value) {
  part = trim(part);
  if (part.substr(0, key.size()) != key || part.size() <= key.size() || part[key.size()] != ':') return false;
  *value = trim(part.substr(key.size() + 1));
  return true;
}

bool to_int(std::string_view s, int* out) {
  const std::string text(s);
  char* end = nullptr;
  const long v = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0') return false;
  *out = static_cast<int>(v);
  return true;
}

// "field:__data_loc char[] parent_comm;\toffset:8;\tsize:4;\tsigned:0;"
std::optional<TraceField> parse_field(std::string_view line) {
  TraceField f;
  std::string_view decl, v;
  bool have_offset = false, have_size = false;
  size_t at = 0;
  while (at <= line.size()) {
    const size_t semi = std::min(line.find(';', at), line.size());
    const std::string_view part = line.substr(at, semi - at);
    if (part_value(part, "field", &v)) decl = v;
    if (part_value(part, "offset", &v)) have_offset = to_int(v, &f.offset);
    if (part_value(part, "size", &v)) have_size = to_int(v, &f.size);
    if (part_value(part, "signed", &v)) f.is_signed = v == "1";
    at = semi + 1;
  }
  if (decl.empty() || !have_offset || !have_size) return std::nullopt;
  f.data_loc = decl.substr(0, 10) == "__data_loc";
  f.rel_loc = decl.substr(0, 9) == "__rel_loc";
  // The name is the declaration's last word, without an array suffix.
  std::string_view name = decl;
  const size_t bracket = name.rfind('[');
  if (bracket != std::string_view::npos && name.find(']', bracket) == name.size() - 1 &&
      name.find_last_of(" \t") < bracket) {
    name = name.substr(0, bracket);
  }
  const size_t space = name.find_last_of(" \t");
  if (space != std::string_view::npos) name = name.substr(space + 1);
  if (name.empty()) return std::nullopt;
  f.name = std::string(name);
  return f;
}

bool is_dir(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool has_events(const std::string& dir) { return is_dir(dir + "/events"); }

}  // namespace

const TraceField* TraceFormat::field(std::string_view n) const {
  for (const auto& f : fields) {
    if (f.name == n) return &f;
  }
  return nullptr;
}

std::optional<TraceFormat> parse_trace_format(std::string_view text) {
  TraceFormat out;
  size_t at = 0;
  while (at < text.size()) {
    const size_t nl = std::min(text.find('\n', at), text.size());
    const std::string_view line = trim(text.substr(at, nl - at));
    at = nl + 1;
    std::string_view v;
    if (part_value(line, "name", &v)) out.name = std::string(v);
    if (part_value(line, "ID", &v) && !to_int(v, &out.id)) return std::nullopt;
    if (line.substr(0, 6) == "field:") {
      if (auto f = parse_field(line)) out.fields.push_back(std::move(*f));
    }
  }
  if (out.id < 0 || out.fields.empty()) return std::nullopt;
  return out;
}

namespace {

// A field of Unsigned's width at p, sign-extended through Signed when the
// format says the field is signed.
template <typename Unsigned, typename Signed>
int64_t load_int(const uint8_t* p, bool is_signed) {
  Unsigned v;
  std::memcpy(&v, p, sizeof v);
  return is_signed ? static_cast<int64_t>(static_cast<Signed>(v)) : static_cast<int64_t>(v);
}

}  // namespace

int64_t trace_int(const TraceField& f, const uint8_t* data, size_t size) {
  if (f.offset < 0 || static_cast<size_t>(f.offset) + static_cast<size_t>(f.size) > size) return 0;
  const uint8_t* p = data + f.offset;
  switch (f.size) {
    case 1: return load_int<uint8_t, int8_t>(p, f.is_signed);
    case 2: return load_int<uint16_t, int16_t>(p, f.is_signed);
    case 4: return load_int<uint32_t, int32_t>(p, f.is_signed);
    case 8: return load_int<uint64_t, int64_t>(p, true);
    default: return 0;
  }
}

std::string trace_str(const TraceField& f, const uint8_t* data, size_t size) {
  size_t from = static_cast<size_t>(f.offset), len = static_cast<size_t>(f.size);
  if (f.data_loc || f.rel_loc) {
    if (static_cast<size_t>(f.offset) + 4 > size) return "";
    uint32_t loc;
    std::memcpy(&loc, data + f.offset, 4);
    from = (loc & 0xffffu) + (f.rel_loc ? static_cast<size_t>(f.offset) + 4 : 0);
    len = loc >> 16;
  }
  if (from >= size) return "";
  len = std::min(len, size - from);
  const char* p = reinterpret_cast<const char*>(data + from);
  return std::string(p, strnlen(p, len));
}

Availability find_tracefs(std::string* dir, bool* mounted) {
  *mounted = false;
  if (const char* env = std::getenv("THREADBURN_TRACEFS"); env && *env) {
    *dir = env;
    if (has_events(*dir)) return Availability::yes();
    return Availability::no("no tracepoints: THREADBURN_TRACEFS=" + *dir + " has no events/ folder");
  }
  std::ifstream mounts("/proc/mounts");
  std::string dev, path, type;
  std::string rest;
  while (mounts >> dev >> path >> type && std::getline(mounts, rest)) {
    if (type == "tracefs" && has_events(path)) {
      *dir = path;
      return Availability::yes();
    }
  }
  for (const char* p : {"/sys/kernel/tracing", "/sys/kernel/debug/tracing"}) {
    if (has_events(p)) {
      *dir = p;
      return Availability::yes();
    }
  }
  // Not mounted: mount it where the kernel provides the mount point, as perf
  // does (it stays mounted; nothing else changes).
  *dir = "/sys/kernel/tracing";
  if (!is_dir(*dir)) return Availability::no("no tracepoints: this kernel has no tracefs (/sys/kernel/tracing)");
  if (::mount("nodev", dir->c_str(), "tracefs", 0, nullptr) != 0) {
    return Availability::no(std::string("tracefs is not mounted and cannot be mounted here (") + std::strerror(errno) +
                            "): mount -t tracefs nodev /sys/kernel/tracing");
  }
  *mounted = true;
  if (has_events(*dir)) return Availability::yes();
  return Availability::no("no tracepoints: tracefs on /sys/kernel/tracing has no events/ folder");
}

Availability read_trace_format(const std::string& dir, const std::string& event, TraceFormat* out) {
  const std::string path = dir + "/events/" + event + "/format";
  std::ifstream in(path);
  if (!in) {
    return Availability::no("no tracepoint " + event + " (" + path + ": " +
                            (errno == EACCES ? "permission denied" : "not found") + ")");
  }
  std::stringstream text;
  text << in.rdbuf();
  auto f = parse_trace_format(text.str());
  if (!f) return Availability::no(path + ": not a tracepoint format");
  *out = std::move(*f);
  return Availability::yes();
}

}  // namespace threadburn

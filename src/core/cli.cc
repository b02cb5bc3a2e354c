#include "core/cli.h"

#include <cerrno>
#include <cstdlib>
#include <sstream>

namespace threadburn {
namespace {

std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> out;
  std::string item;
  std::istringstream in(text);
  while (std::getline(in, item, sep)) out.push_back(item);
  if (!text.empty() && text.back() == sep) out.push_back("");
  return out;
}

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t") - b + 1);
}

std::string range_text(int64_t min, int64_t max) {
  if (max == INT64_MAX) return "an integer >= " + std::to_string(min);
  return "an integer in [" + std::to_string(min) + ", " + std::to_string(max) + "]";
}

}  // namespace

int64_t parse_int(const std::string& flag, const std::string& text, int64_t min, int64_t max) {
  const std::string t = trim(text);
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(t.c_str(), &end, 10);
  if (t.empty() || errno != 0 || *end != '\0') {
    throw FlagError("--" + flag + ": expected " + range_text(min, max) + ", got '" + text + "'");
  }
  if (v < min || v > max) {
    throw FlagError("--" + flag + ": expected " + range_text(min, max) + ", got " + t);
  }
  return v;
}

std::vector<int64_t> parse_int_list(const std::string& flag, const std::string& text,
                                    int64_t min, int64_t max) {
  if (trim(text).empty()) throw FlagError("--" + flag + ": expected a comma-separated list, got nothing");
  std::vector<int64_t> out;
  for (const auto& item : split(text, ',')) out.push_back(parse_int(flag, item, min, max));
  return out;
}

std::vector<std::string> parse_choice_list(const std::string& flag, const std::string& text,
                                           const std::vector<std::string>& choices) {
  if (trim(text).empty()) throw FlagError("--" + flag + ": expected a comma-separated list, got nothing");
  std::vector<std::string> out;
  for (const auto& raw : split(text, ',')) {
    const std::string item = trim(raw);
    bool known = false;
    for (const auto& c : choices) known = known || c == item;
    if (!known) {
      std::string list;
      for (const auto& c : choices) list += (list.empty() ? "" : ", ") + c;
      throw FlagError("--" + flag + ": unknown value '" + item + "' (expected one of: " + list + ")");
    }
    out.push_back(item);
  }
  return out;
}

FlagParser::FlagParser(std::string program, std::string summary)
    : program_(std::move(program)), summary_(std::move(summary)) {}

void FlagParser::add(const std::string& name, const std::string& default_value,
                     const std::string& help) {
  flags_[name] = Flag{default_value, help, default_value, false};
  order_.push_back(name);
}

std::vector<char*> FlagParser::parse(int argc, char** argv) {
  std::vector<char*> rest{argv[0]};
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      help_ = true;
      continue;
    }
    if (arg.rfind("--benchmark_", 0) == 0 || arg.rfind("--v=", 0) == 0) {
      rest.push_back(argv[i]);
      continue;
    }
    if (arg.rfind("--", 0) != 0) {
      throw FlagError("unexpected argument '" + arg + "' (flags look like --name=value; see --help)");
    }
    std::string name = arg.substr(2), value;
    const auto eq = name.find('=');
    bool has_value = eq != std::string::npos;
    if (has_value) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
    }
    auto it = flags_.find(name);
    if (it == flags_.end()) throw FlagError("--" + name + ": unknown flag (see --help)");
    if (!has_value) {
      if (i + 1 >= argc) throw FlagError("--" + name + ": missing value");
      value = argv[++i];
    }
    it->second.value = value;
    it->second.set = true;
  }
  return rest;
}

const std::string& FlagParser::get(const std::string& name) const { return flags_.at(name).value; }
bool FlagParser::was_set(const std::string& name) const { return flags_.at(name).set; }

std::string FlagParser::help_text() const {
  std::ostringstream out;
  out << "usage: " << program_ << " [flags] [--benchmark_* flags]\n\n" << summary_ << "\n\nflags:\n";
  for (const auto& name : order_) {
    const Flag& f = flags_.at(name);
    std::string left = "  --" + name + "=" + (f.default_value.empty() ? "\"\"" : f.default_value);
    if (left.size() < 34) left.resize(34, ' ');
    else left += "\n" + std::string(34, ' ');
    out << left << f.help << "\n";
  }
  out << "\nGoogle Benchmark's own flags (--benchmark_format=json, --benchmark_out=FILE,\n"
         "--benchmark_repetitions=N, --benchmark_filter=REGEX, ...) pass through;\n"
         "see --benchmark_list_tests and Google Benchmark's documentation.\n"
         "OpenMP settings (OMP_NUM_THREADS, KMP_BLOCKTIME, GOMP_SPINCOUNT, OMP_WAIT_POLICY)\n"
         "are read once at start-up from the environment; the JSON context reports the\n"
         "values really in force and the knobs the live runtime ignores.\n";
  return out.str();
}

}  // namespace threadburn

#include "core/cli.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <regex>
#include <sstream>
#include <utility>

namespace threadburn {
namespace {

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t") - b + 1);
}

std::string range_text(int64_t min, int64_t max) {
  if (max == INT64_MAX) return "an integer >= " + std::to_string(min);
  return "an integer in [" + std::to_string(min) + ", " + std::to_string(max) + "]";
}

std::string number_range_text(double min, double max) {
  char range[96];
  std::snprintf(range, sizeof range, "a number in [%g, %g]", min, max);
  return range;
}

// The parser's rules as data: what an integer is (after trimming spaces and
// tabs), and every message it refuses a command line with. The parser uses
// them and --describe prints them ("flag_syntax"), so a test double of the
// programs refuses as they do, word for word, without a copy of the rules.
constexpr const char* kIntegerPattern = "[+-]?[0-9]+";
const std::vector<std::pair<const char*, const char*>> kMessages = {
    {"bad_value", "--{flag}: expected {expected}, got '{text}'"},
    {"out_of_range", "--{flag}: expected {expected}, got {text}"},
    {"empty_list", "--{flag}: expected a comma-separated list, got nothing"},
    {"unknown_value", "--{flag}: unknown value '{item}' (expected one of: {choices})"},
    {"one_value", "--{flag}: expected one value, got '{text}'"},
    {"unknown_flag", "--{flag}: unknown flag (see --help)"},
    {"missing_value", "--{flag}: missing value"},
    {"positional", "unexpected argument '{text}' (flags look like --name=value; see --help)"},
};

// The message `key` with its {placeholders} filled in.
Error refusal(const std::string& key, const std::vector<std::pair<std::string, std::string>>& values) {
  std::string text;
  for (const auto& [k, v] : kMessages) {
    if (key == k) text = v;
  }
  for (const auto& [name, value] : values) {
    const std::string slot = "{" + name + "}";
    for (auto at = text.find(slot); at != std::string::npos; at = text.find(slot, at + value.size())) {
      text.replace(at, slot.size(), value);
    }
  }
  return Error(text);
}

std::string joined(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& c : items) out += (out.empty() ? "" : ", ") + c;
  return out;
}

const char* kind_name(FlagKind k) {
  switch (k) {
    case FlagKind::kInt: return "int";
    case FlagKind::kIntList: return "int_list";
    case FlagKind::kDouble: return "double";
    case FlagKind::kChoice: return "choice";
    case FlagKind::kChoiceList: return "choice_list";
    case FlagKind::kString: return "string";
    case FlagKind::kSwitch: return "switch";
  }
  return "string";
}

bool is_list(FlagKind k) { return k == FlagKind::kIntList || k == FlagKind::kChoiceList; }

FlagSpec make_spec(const std::string& name, FlagKind kind, const std::string& def, const std::string& help) {
  FlagSpec s;
  s.name = name;
  s.kind = kind;
  s.default_value = def;
  s.help = help;
  return s;
}

}  // namespace

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> out;
  std::string item;
  std::istringstream in(text);
  while (std::getline(in, item, ',')) out.push_back(trim(item));
  if (!text.empty() && text.back() == ',') out.push_back("");
  return out;
}

int64_t parse_int(const std::string& flag, const std::string& text, int64_t min, int64_t max) {
  static const std::regex integer(kIntegerPattern);
  const std::string t = trim(text);
  errno = 0;
  const long long v = std::regex_match(t, integer) ? std::strtoll(t.c_str(), nullptr, 10) : 0;
  if (!std::regex_match(t, integer) || errno != 0) {
    throw refusal("bad_value", {{"flag", flag}, {"expected", range_text(min, max)}, {"text", text}});
  }
  if (v < min || v > max) throw refusal("out_of_range", {{"flag", flag}, {"expected", range_text(min, max)}, {"text", t}});
  return v;
}

std::vector<int64_t> parse_int_list(const std::string& flag, const std::string& text, int64_t min, int64_t max) {
  if (trim(text).empty()) throw refusal("empty_list", {{"flag", flag}});
  std::vector<int64_t> out;
  for (const auto& item : split_list(text)) out.push_back(parse_int(flag, item, min, max));
  return out;
}

double parse_double(const std::string& flag, const std::string& text, double min, double max) {
  const std::string t = trim(text);
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(t.c_str(), &end);
  if (t.empty() || *end != '\0' || errno != 0 || !std::isfinite(v) || v < min || v > max) {
    throw refusal("bad_value", {{"flag", flag}, {"expected", number_range_text(min, max)}, {"text", text}});
  }
  return v;
}

std::vector<std::string> parse_choice_list(const std::string& flag, const std::string& text,
                                           const std::vector<std::string>& choices) {
  if (trim(text).empty()) throw refusal("empty_list", {{"flag", flag}});
  std::vector<std::string> out;
  for (const auto& item : split_list(text)) {
    if (std::find(choices.begin(), choices.end(), item) == choices.end()) {
      throw refusal("unknown_value", {{"flag", flag}, {"item", item}, {"choices", joined(choices)}});
    }
    out.push_back(item);
  }
  return out;
}

FlagParser::FlagParser(std::string program, std::string summary)
    : program_(std::move(program)), summary_(std::move(summary)) {}

void FlagParser::add(FlagSpec s) {
  values_[s.name] = s.default_value;
  set_[s.name] = false;
  specs_.push_back(std::move(s));
}

void FlagParser::add_int(const std::string& name, int64_t def, int64_t min, int64_t max, const std::string& help) {
  FlagSpec s = make_spec(name, FlagKind::kInt, std::to_string(def), help);
  s.min = min;
  s.max = max;
  add(s);
}

void FlagParser::add_int_list(const std::string& name, const std::string& def, int64_t min, int64_t max,
                              const std::string& help, bool axis) {
  FlagSpec s = make_spec(name, FlagKind::kIntList, def, help);
  s.min = min;
  s.max = max;
  s.axis = axis;
  add(s);
}

void FlagParser::add_double(const std::string& name, double def, double min, double max, const std::string& help) {
  FlagSpec s = make_spec(name, FlagKind::kDouble, "", help);
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", def);
  s.default_value = buf;
  s.dmin = min;
  s.dmax = max;
  add(s);
}

void FlagParser::add_choice(const std::string& name, const std::string& def, std::vector<std::string> choices,
                            const std::string& help) {
  FlagSpec s = make_spec(name, FlagKind::kChoice, def, help);
  s.choices = std::move(choices);
  add(s);
}

void FlagParser::add_choice_list(const std::string& name, const std::string& def, std::vector<std::string> choices,
                                 const std::string& help, bool axis) {
  FlagSpec s = make_spec(name, FlagKind::kChoiceList, def, help);
  s.choices = std::move(choices);
  s.axis = axis;
  add(s);
}

void FlagParser::add_string(const std::string& name, const std::string& def, const std::string& help) {
  add(make_spec(name, FlagKind::kString, def, help));
}

void FlagParser::add_switch(const std::string& name, const std::string& help) {
  add(make_spec(name, FlagKind::kSwitch, "0", help));
}

const FlagSpec& FlagParser::spec(const std::string& name) const {
  for (const auto& s : specs_) {
    if (s.name == name) return s;
  }
  throw refusal("unknown_flag", {{"flag", name}});
}

void FlagParser::check(const FlagSpec& s, const std::string& value) const {
  switch (s.kind) {
    case FlagKind::kInt: parse_int(s.name, value, s.min, s.max); break;
    case FlagKind::kIntList: parse_int_list(s.name, value, s.min, s.max); break;
    case FlagKind::kDouble: parse_double(s.name, value, s.dmin, s.dmax); break;
    case FlagKind::kChoice:
      if (split_list(value).size() != 1) throw refusal("one_value", {{"flag", s.name}, {"text", value}});
      parse_choice_list(s.name, value, s.choices);
      break;
    case FlagKind::kChoiceList: parse_choice_list(s.name, value, s.choices); break;
    case FlagKind::kSwitch: parse_int(s.name, value, 0, 1); break;
    case FlagKind::kString: break;
  }
}

std::vector<char*> FlagParser::parse(int argc, char** argv) {
  std::vector<char*> rest{argv[0]};
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      help_ = true;
      continue;
    }
    if (arg == "--describe") {
      describe_ = true;
      continue;
    }
    if (arg.rfind("--benchmark_", 0) == 0 || arg.rfind("--v=", 0) == 0) {
      rest.push_back(argv[i]);
      continue;
    }
    if (arg.rfind("--", 0) != 0) {
      throw refusal("positional", {{"text", arg}});
    }
    std::string name = arg.substr(2), value;
    const auto eq = name.find('=');
    const bool has_value = eq != std::string::npos;
    if (has_value) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
    }
    // One spelling, '_' (as Google Benchmark's --benchmark_*); '-' is still
    // accepted for it (--data-dir, the spelling before 0.2), see help_text.
    std::replace(name.begin(), name.end(), '-', '_');
    const FlagSpec& s = spec(name);
    if (!has_value) {
      if (s.kind == FlagKind::kSwitch) {
        value = "1";
      } else if (i + 1 >= argc) {
        throw refusal("missing_value", {{"flag", name}});
      } else {
        value = argv[++i];
      }
    }
    values_[name] = value;
    set_[name] = true;
  }
  if (!help_) {
    for (const auto& s : specs_) check(s, values_.at(s.name));
  }
  return rest;
}

const std::string& FlagParser::text(const std::string& name) const {
  spec(name);
  return values_.at(name);
}

int64_t FlagParser::integer(const std::string& name) const {
  const FlagSpec& s = spec(name);
  return parse_int(name, values_.at(name), s.min, s.max);
}

double FlagParser::number(const std::string& name) const {
  const FlagSpec& s = spec(name);
  return parse_double(name, values_.at(name), s.dmin, s.dmax);
}

bool FlagParser::on(const std::string& name) const { return parse_int(name, text(name), 0, 1) == 1; }

std::vector<int64_t> FlagParser::integers(const std::string& name) const {
  const FlagSpec& s = spec(name);
  return parse_int_list(name, values_.at(name), s.min, s.max);
}

std::vector<std::string> FlagParser::items(const std::string& name) const {
  const FlagSpec& s = spec(name);
  if (!s.choices.empty()) return parse_choice_list(name, values_.at(name), s.choices);
  return split_list(values_.at(name));
}

bool FlagParser::was_set(const std::string& name) const {
  spec(name);
  return set_.at(name);
}

std::string FlagParser::help_text(const std::string& epilogue) const {
  std::ostringstream out;
  out << "usage: " << program_ << " [flags] [--benchmark_* flags]\n\n" << summary_ << "\n\nflags:\n";
  for (const auto& s : specs_) {
    std::string left = "  --" + s.name;
    if (s.kind != FlagKind::kSwitch) left += "=" + (s.default_value.empty() ? "\"\"" : s.default_value);
    if (left.size() < 34) {
      left.resize(34, ' ');
    } else {
      left += "\n" + std::string(34, ' ');
    }
    std::string help = s.help;
    if (is_list(s.kind)) help += " (comma list)";
    if (!s.choices.empty()) {
      std::string c;
      for (const auto& v : s.choices) c += (c.empty() ? "" : ", ") + v;
      if (help.find(c) == std::string::npos) help += " [" + c + "]";
    }
    out << left << help << "\n";
  }
  out << "  --describe                      print this program's flags, benchmarks and counters as JSON\n";
  out << "Flag names are spelled with '_'; '-' is accepted in their place (--data-dir\n"
         "= --data_dir: the spelling before 0.2, accepted until 0.3).\n";
  out << epilogue;
  return out.str();
}

void FlagParser::describe(JsonWriter* json) const {
  json->key("flags").begin_array();
  for (const auto& s : specs_) {
    json->begin_object().field("name", s.name).field("kind", kind_name(s.kind))
        .field("default", s.default_value).field("value", values_.at(s.name)).field("help", s.help)
        .field("axis", s.axis);
    if (s.kind == FlagKind::kInt || s.kind == FlagKind::kIntList) {
      json->field("min", s.min);
      if (s.max != INT64_MAX) json->field("max", s.max);
      json->field("expected", range_text(s.min, s.max));
    }
    if (s.kind == FlagKind::kSwitch) json->field("expected", range_text(0, 1));
    if (s.kind == FlagKind::kDouble) {
      json->field("min", s.dmin).field("max", s.dmax).field("expected", number_range_text(s.dmin, s.dmax));
    }
    if (!s.choices.empty()) json->key("choices").strings(s.choices);
    json->end_object();
  }
  json->end_array();
  json->key("flag_syntax").begin_object().field("integer", kIntegerPattern).key("messages").begin_object();
  for (const auto& [key, text] : kMessages) json->field(key, text);
  json->end_object().end_object();
}

}  // namespace threadburn

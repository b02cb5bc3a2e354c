// Command-line flags: each flag is declared once with its kind, default, bounds
// or choices and one line of help; parse() checks every flag (defaults
// included) before anything runs and throws Error naming the flag; the same
// declarations print --help and the programs' self-description (--describe),
// which is where the Python side learns flags, bounds and choices.
// Flags are "--name=value" or "--name value"; lists are comma-separated.
// "--benchmark_*" flags pass through to Google Benchmark.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/json.h"

namespace threadburn {

enum class FlagKind { kInt, kIntList, kDouble, kChoice, kChoiceList, kString, kSwitch };

struct FlagSpec {
  std::string name;
  FlagKind kind = FlagKind::kString;
  std::string default_value;
  std::string help;
  int64_t min = 0, max = INT64_MAX;       // kInt, kIntList
  double dmin = 0, dmax = 0;              // kDouble
  std::vector<std::string> choices;       // kChoice, kChoiceList
  bool axis = false;  // a benchmark axis: one benchmark per value of the list
};

// The one-flag parsers behind FlagParser, also used directly by tests.
int64_t parse_int(const std::string& flag, const std::string& text, int64_t min, int64_t max);
std::vector<int64_t> parse_int_list(const std::string& flag, const std::string& text, int64_t min, int64_t max);
double parse_double(const std::string& flag, const std::string& text, double min, double max);
std::vector<std::string> parse_choice_list(const std::string& flag, const std::string& text,
                                           const std::vector<std::string>& choices);
std::vector<std::string> split_list(const std::string& text);

class FlagParser {
 public:
  FlagParser(std::string program, std::string summary);

  void add(FlagSpec spec);
  void add_int(const std::string& name, int64_t def, int64_t min, int64_t max, const std::string& help);
  void add_int_list(const std::string& name, const std::string& def, int64_t min, int64_t max,
                    const std::string& help, bool axis = true);
  void add_double(const std::string& name, double def, double min, double max, const std::string& help);
  void add_choice(const std::string& name, const std::string& def, std::vector<std::string> choices,
                  const std::string& help);
  void add_choice_list(const std::string& name, const std::string& def, std::vector<std::string> choices,
                       const std::string& help, bool axis = true);
  void add_string(const std::string& name, const std::string& def, const std::string& help);
  // A flag without a value (--force); "--force=1" / "--force=0" also work.
  void add_switch(const std::string& name, const std::string& help);

  // Returns the arguments left for Google Benchmark (argv[0] first). --help
  // and --describe set help_requested() / describe_requested(). Throws Error on
  // an unknown flag, a flag without a value, a stray positional argument, or
  // any value (given or default) its declaration refuses.
  std::vector<char*> parse(int argc, char** argv);
  bool help_requested() const { return help_; }
  bool describe_requested() const { return describe_; }

  const std::string& text(const std::string& name) const;
  int64_t integer(const std::string& name) const;
  double number(const std::string& name) const;
  bool on(const std::string& name) const;  // kSwitch
  std::vector<int64_t> integers(const std::string& name) const;
  std::vector<std::string> items(const std::string& name) const;  // kChoiceList (or any list)
  bool was_set(const std::string& name) const;

  const std::vector<FlagSpec>& specs() const { return specs_; }
  const std::string& program() const { return program_; }
  std::string help_text(const std::string& epilogue = "") const;
  // "flags": [{name, kind, default, value, help, axis, min, max, expected | choices}, ...]
  // ("expected": the words a refusal uses for its values), and "flag_syntax":
  // the parser's rules as data, {"integer": its pattern, "messages": {key:
  // template}}, the very templates it refuses a command line with.
  void describe(JsonWriter* json) const;

 private:
  const FlagSpec& spec(const std::string& name) const;
  void check(const FlagSpec& s, const std::string& value) const;

  std::string program_, summary_;
  std::vector<FlagSpec> specs_;
  std::map<std::string, std::string> values_;
  std::map<std::string, bool> set_;
  bool help_ = false, describe_ = false;
};

}  // namespace threadburn

// Command-line flags of the benchmark programs: each flag one line of help,
// parsed by functions that are unit-tested, all checked before anything runs.
// Flags are "--name=value" or "--name value"; lists are comma-separated.
// "--benchmark_*" flags pass through to Google Benchmark.
#pragma once

#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace threadburn {

// What a bad flag throws; what() names the flag: "--batch: expected ...".
class FlagError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

std::vector<int64_t> parse_int_list(const std::string& flag, const std::string& text,
                                    int64_t min, int64_t max);
int64_t parse_int(const std::string& flag, const std::string& text, int64_t min, int64_t max);
std::vector<std::string> parse_choice_list(const std::string& flag, const std::string& text,
                                           const std::vector<std::string>& choices);

class FlagParser {
 public:
  FlagParser(std::string program, std::string summary);
  void add(const std::string& name, const std::string& default_value, const std::string& help);
  // Returns the arguments left for Google Benchmark (argv[0] first). Sets
  // help_requested() on --help/-h instead of throwing. Throws FlagError on an
  // unknown flag, a flag without a value, or a stray positional argument.
  std::vector<char*> parse(int argc, char** argv);
  const std::string& get(const std::string& name) const;
  bool was_set(const std::string& name) const;
  bool help_requested() const { return help_; }
  std::string help_text() const;

 private:
  struct Flag {
    std::string value, help, default_value;
    bool set = false;
  };
  std::string program_, summary_;
  std::vector<std::string> order_;
  std::map<std::string, Flag> flags_;
  bool help_ = false;
};

}  // namespace threadburn

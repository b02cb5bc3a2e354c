// The one error convention of threadburn's C++ code (docs/design.md, "Errors"):
// a failure the user must see throws threadburn::Error, whose what() is the
// single line to print, naming the flag, file or setting at fault
// ("--batch: expected an integer in [1, 65536], got 0"). Programs catch it in
// main, print "<program>: error: <what()>" and exit 2 before anything runs.
// Facts that may legitimately be absent (no CUDA device, no TBB in this build)
// are not errors: they are values, e.g. an Availability with its reason.
#pragma once

#include <stdexcept>
#include <string>

namespace threadburn {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Whether something can be used here, and if not, why (one line).
struct Availability {
  bool ok = true;
  std::string why;
  static Availability yes() { return {}; }
  static Availability no(std::string reason) { return {false, std::move(reason)}; }
};

}  // namespace threadburn

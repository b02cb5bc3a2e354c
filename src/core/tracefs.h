// The kernel's tracepoint formats, as tracefs describes them
// (events/<group>/<event>/format): an event's id and, for each field of its
// raw record, the offset, size and signedness. The layout is read at run time,
// never assumed: it changes between kernels (sched_process_fork's names became
// __data_loc strings, sched_migrate_task's too). Pure parsing is separate from
// finding the mount, so the parser is unit-tested on the text alone.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"

namespace threadburn {

struct TraceField {
  std::string name;
  int offset = 0, size = 0;
  bool is_signed = false;
  // __data_loc: the field holds (length << 16 | offset) of a string in the
  // record; __rel_loc: the same, the offset counted from the field's end.
  bool data_loc = false, rel_loc = false;
};

struct TraceFormat {
  std::string name;
  int id = -1;
  std::vector<TraceField> fields;
  // nullptr when the event has no such field.
  const TraceField* field(std::string_view name) const;
};

// A format file's text; nullopt when it holds no id or no field.
std::optional<TraceFormat> parse_trace_format(std::string_view text);

// A field's value in a raw record of `size` bytes: integers sign- or
// zero-extended as the format says (0 when the field lies outside the
// record); strings up to their NUL, from a char array or a __data_loc.
int64_t trace_int(const TraceField& f, const uint8_t* data, size_t size);
std::string trace_str(const TraceField& f, const uint8_t* data, size_t size);

// The tracefs folder holding events/: THREADBURN_TRACEFS when set (the one
// place to point the monitor elsewhere, e.g. at a folder without the sched
// events), else the first tracefs in /proc/mounts, else /sys/kernel/tracing or
// /sys/kernel/debug/tracing. When none is mounted and this process may mount
// it (root), tracefs is mounted on /sys/kernel/tracing, as perf does; *mounted
// says so. Availability::no with the reason otherwise.
Availability find_tracefs(std::string* dir, bool* mounted);

// events/<event>/format under dir (event: "sched/sched_switch").
Availability read_trace_format(const std::string& dir, const std::string& event, TraceFormat* out);

}  // namespace threadburn

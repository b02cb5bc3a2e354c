// The results schema version: one number for the programs' JSON context and
// --describe and for the CSV rows the sweep writes. It comes from
// python/threadburn/schema_version.txt (CMake passes it in), the one place
// to bump when a counter or column is added, removed or changes meaning.
#pragma once

namespace threadburn {

inline constexpr const char* kSchemaVersion = THREADBURN_SCHEMA_VERSION;

}  // namespace threadburn

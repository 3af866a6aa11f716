// The JSON Lines trace format (docs/trace-format.md): recorded schedules too large for YAML.
// Line 1 is a header object, every following line one operation of one rank, in that rank's
// issue order. Loading produces the same Scenario model as the YAML loader; writing turns a
// recorded scenario (flat op lists, what `lockstep import` produces) back into a trace.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "sim/loader.h"
#include "sim/scenario.h"

namespace lockstep::sim {

// The version this build reads and writes (the header's "lockstep_trace").
inline constexpr int64_t TRACE_FORMAT_VERSION = 1;

// At most this many error diagnostics per trace; loading stops after the last one.
inline constexpr size_t MAX_TRACE_ERRORS = 1000;

// At most this many host threads per rank.
inline constexpr size_t MAX_TRACE_THREADS_PER_RANK = 1024;

// Groups (world, the header's, new_group's) times world ranks is at most this: each group keeps
// a slot per rank (GroupDef::comm_of_rank).
inline constexpr uint64_t MAX_TRACE_GROUP_SLOTS = uint64_t{1} << 27;

// True when `path` names a trace (ends in ".jsonl").
bool is_trace_path(std::string_view path);

// Reads and loads one trace file. Never throws; every problem is a diagnostic
// (`file:line:col: error: ...`). Operations keep their line and column (Stmt::loc is the
// position of the line's "op" key). A trace has no parameters: any override is an error.
LoadResult load_trace_file(const std::string& path, std::span<const ParamOverride> overrides,
                           const LoadLimits& limits = {});

// Loads a trace from text; `path` is used in diagnostics and Scenario::path.
LoadResult load_trace_text(std::string_view text, const std::string& path,
                           std::span<const ParamOverride> overrides,
                           const LoadLimits& limits = {});

// Why `recorded` cannot be written as a trace ("" when it can): every program must be a flat
// list of OP statements with constant expressions, every group one communicator, and no group
// may have its own link.
std::string trace_write_problem(const Scenario& recorded);

// The canonical trace of a scenario for which trace_write_problem() is "": ranks in ascending
// order, a rank's threads in order, each thread's ops in order, keys in a fixed order and
// defaults left out. load_trace_text(write_trace(s)) gives back a scenario that writes the
// same bytes.
std::string write_trace(const Scenario& recorded);

// Appends `text` as a JSON string with the escapes write_trace uses (", \, \n, \t, \u00XX for
// other control bytes; everything else as is), for writers that must produce the same bytes.
void append_json_string(std::string_view text, std::string& out);

}  // namespace lockstep::sim

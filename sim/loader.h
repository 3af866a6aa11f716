// Scenario YAML -> Scenario. The only user of yaml-cpp in the tree.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sim/diagnostic.h"
#include "sim/scenario.h"

namespace lockstep::sim {

// `-D name=value` on the command line.
struct ParamOverride {
  std::string name;
  std::string value;
};

// Explicit bounds on what a scenario may ask for; each is reported by name when hit.
// The CLI raises them with --max-file-bytes, --max-world, --max-nesting and --max-repeat.
struct LoadLimits {
  int64_t max_file_bytes = 64LL << 20;  // 64 MiB
  int32_t max_world = 1 << 20;          // ranks
  int32_t max_nesting = 64;             // nested blocks (repeat / if / choose / group)
  int64_t max_repeat = 100'000'000;     // a constant `repeat` count (others: at run time)
  int64_t max_ops = 1LL << 24;          // operations in a recorded trace (16 Mi)
  // Read common trace lines with the trace loader's one-pass scanner (the general JSON reader
  // reads the rest). false: the general reader reads every line; the tests compare the two.
  bool trace_fast_path = true;
  // A trace whose operation lines take at least this many bytes is read on two threads: its
  // second half by a second scanner, whose lines are then taken in order as if read in one
  // pass (docs/trace-format.md). 0: never. The tests set 1 and compare with 0.
  int64_t trace_split_bytes = 4LL << 20;
};

struct LoadResult {
  std::optional<Scenario> scenario;     // set iff there is no error diagnostic
  std::vector<Diagnostic> diagnostics;  // errors and warnings, in source order
  std::string text;                     // the file's text (for formatting diagnostics); a
                                        // scenario or trace without diagnostics leaves it
                                        // empty (its text is moved into Scenario::text, not
                                        // copied: a regular file's mapping, sim/input_file.h)
  uint64_t trace_part_lines = 0;        // a trace's lines read by its second thread (0: none;
                                        // LoadLimits::trace_split_bytes)
  bool ok() const { return scenario.has_value(); }
};

// A load reports at most this many errors and as many warnings (the first, in source order),
// then one line that counts the rest: a file with 10^5 unused params stays readable, and
// formatting what is reported stays cheap.
inline constexpr size_t MAX_DIAGNOSTICS_SHOWN = 50;

// Reads at most `max_bytes` + 1 bytes of a file (so that "too large" can be told), or sets
// `error` to the system's reason.
std::optional<std::string> read_text_file(const std::string& path, int64_t max_bytes, std::string& error);

// What the YAML and trace loaders share: `load` parses a text; run on `text`, or on the file at
// `path` (a regular file within `max_bytes` mapped, anything else read), a read failure or an
// exception while loading (std::bad_alloc) becomes a diagnostic, never a throw.
using TextLoad = std::function<LoadResult(SourceText&&)>;
LoadResult load_text_with(SourceText text, const std::string& path, const TextLoad& load);
LoadResult load_file_with(const std::string& path, int64_t max_bytes, const TextLoad& load);

// Reads and loads one scenario file. Never throws; every problem is a diagnostic.
LoadResult load_scenario_file(const std::string& path, std::span<const ParamOverride> overrides,
                              const LoadLimits& limits = {});

// Loads a scenario from text; `path` is used in diagnostics and Scenario::path.
LoadResult load_scenario_text(std::string_view text, const std::string& path,
                              std::span<const ParamOverride> overrides,
                              const LoadLimits& limits = {});

}  // namespace lockstep::sim

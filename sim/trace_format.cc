// The JSON Lines trace format: loading a trace (the entry points, TraceLoader::run and its
// diagnostics). The scan, header, lines, groups and the second part are in trace_*.cc beside it;
// the writer in trace_writer.cc.
#include "sim/trace_format.h"

#include <algorithm>
#include <cassert>
#include <span>

#include "sim/trace_loader.h"

namespace lockstep::sim {

namespace trace {

LoadResult TraceLoader::run() {
  try {
    load();
  } catch (const TooManyErrors&) {
    diagnostics_.push_back({path_, {}, Severity::ERROR,
                            "too many errors; stopped after " +
                                std::to_string(MAX_TRACE_ERRORS)});
  }
  part_.reset();  // a load that stopped early leaves the second part's thread to stop
  std::stable_sort(diagnostics_.begin(), diagnostics_.end(),
                   [](const Diagnostic& a, const Diagnostic& b) {
                     return std::pair(a.loc.line, a.loc.col) < std::pair(b.loc.line, b.loc.col);
                   });
  LoadResult result;
  result.diagnostics = std::move(diagnostics_);
  result.trace_part_lines = part_lines_;
  if (errors_ == 0) {
    scenario_.path = path_;
    // The text lives in the scenario; the result keeps a copy only for its diagnostics.
    if (!result.diagnostics.empty()) result.text = std::string(text_);
    scenario_.text = std::move(source_);
    result.scenario = std::move(scenario_);
  } else {
    result.text = std::string(text_);
  }
  return result;
}

void TraceLoader::error(SourceLoc at, std::string message) {
  assert(!in_part_);  // a part takes only lines without diagnostics
  if (errors_ >= MAX_TRACE_ERRORS) throw TooManyErrors{};
  ++errors_;
  diagnostics_.push_back({path_, at, Severity::ERROR, std::move(message)});
}

void TraceLoader::warning(SourceLoc at, std::string message) {
  diagnostics_.push_back({path_, at, Severity::WARNING, std::move(message)});
}

bool TraceLoader::expect_kind(const JsonValue& value, JsonKind kind, std::string_view what) {
  if (value.kind == kind) return true;
  error(at(value), "expected " + std::string(what) + ", got " + type_name(value));
  return false;
}

std::optional<std::string_view> TraceLoader::name_of(const JsonValue& value, std::string_view key) {
  if (!expect_kind(value, JsonKind::STRING, "a string")) return std::nullopt;
  if (value.text.empty()) {
    error(at(value), quoted(key) + " is empty");
    return std::nullopt;
  }
  return value.text;
}

std::optional<int64_t> TraceLoader::integer_of(const JsonValue& value, std::string_view what,
                                  std::string_view name, int64_t min) {
  if (!expect_kind(value, JsonKind::INTEGER, what)) return std::nullopt;
  if (value.integer >= min) return value.integer;
  const std::string bound = min == 0 ? " must not be negative" : " must be positive";
  error(at(value), std::string(name) + bound + ", got " + std::to_string(value.integer));
  return std::nullopt;
}

bool TraceLoader::check_in_world(int64_t rank, SourceLoc loc) {
  if (rank >= 0 && rank < scenario_.world) return true;
  const int32_t world = scenario_.world;
  const std::string ranks = world == 1   ? "0"
                            : world == 2 ? "0, 1"
                                         : "0-" + std::to_string(world - 1);
  error(loc, "rank " + std::to_string(rank) + " is outside the world (ranks " + ranks + ")");
  return false;
}

std::optional<int32_t> TraceLoader::rank_of(const JsonValue& value) {
  if (!expect_kind(value, JsonKind::INTEGER, "a rank")) return std::nullopt;
  if (!check_in_world(value.integer, at(value))) return std::nullopt;
  return static_cast<int32_t>(value.integer);
}

}  // namespace trace

bool is_trace_path(std::string_view path) {
  return path.size() >= 6 && path.substr(path.size() - 6) == ".jsonl";
}

LoadResult load_trace_file(const std::string& path, std::span<const ParamOverride> overrides,
                           const LoadLimits& limits) {
  return load_file_with(path, limits.max_file_bytes, [&](SourceText&& text) {
    return trace::TraceLoader(std::move(text), path, overrides, limits).run();
  });
}

LoadResult load_trace_text(std::string_view text, const std::string& path,
                           std::span<const ParamOverride> overrides, const LoadLimits& limits) {
  return load_text_with(SourceText(std::string(text)), path, [&](SourceText&& owned) {
    return trace::TraceLoader(std::move(owned), path, overrides, limits).run();
  });
}

}  // namespace lockstep::sim

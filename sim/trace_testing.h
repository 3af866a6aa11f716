// Helpers shared by the trace format's tests: a text loaded as "t.jsonl", its diagnostics, a
// trace of four ranks around some op lines.
#pragma once

#include <doctest/doctest.h>

#include <string>
#include <string_view>

#include "sim/trace_format.h"

namespace lockstep::sim::trace_testing {

inline constexpr std::string_view HEADER4 = R"({"lockstep_trace": 1, "scenario": "t", "world": 4})";

inline LoadResult load(std::string_view text, const LoadLimits& limits = {}) {
  return load_trace_text(text, "t.jsonl", {}, limits);
}

// Every diagnostic's first line ("t.jsonl:2:5: error: ..."), one per line.
inline std::string messages(const LoadResult& loaded) {
  std::string out;
  for (const Diagnostic& d : loaded.diagnostics) out += format_diagnostic(d, "");
  return out;
}

inline std::string messages(std::string_view text, const LoadLimits& limits = {}) {
  return messages(load(text, limits));
}

// HEADER4 followed by `ops` (lines separated by '\n').
inline std::string trace4(std::string_view ops) {
  std::string text(HEADER4);
  text += '\n';
  text += ops;
  text += '\n';
  return text;
}

inline Scenario loaded(std::string_view text) {
  LoadResult result = load(text);
  INFO(messages(result));
  REQUIRE(result.ok());
  return std::move(*result.scenario);
}

inline const StmtList& body(const Scenario& s, int32_t rank, size_t thread = 0) {
  return s.program_of(rank).at(thread).body();
}

// One case of the error tests: op lines and the exact diagnostics they give.
struct ErrorCase {
  std::string_view ops;       // lines after HEADER4
  std::string_view expected;  // every diagnostic
};

}  // namespace lockstep::sim::trace_testing

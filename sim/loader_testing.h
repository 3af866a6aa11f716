// Helpers shared by the scenario loader's tests: a text loaded as "s.yaml", its diagnostics as
// "line:col: severity: message" lines, a scenario around a program.
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

#include "sim/expr.h"
#include "sim/loader.h"

namespace doctest {
template <>
struct StringMaker<std::vector<std::string>> {
  static String convert(const std::vector<std::string>& lines) {
    std::string out = "\n";
    for (const std::string& line : lines) out += "    " + line + "\n";
    return out.c_str();
  }
};
template <>
struct StringMaker<lockstep::sim::SourceLoc> {
  static String convert(const lockstep::sim::SourceLoc& loc) {
    return (std::to_string(loc.line) + ":" + std::to_string(loc.col)).c_str();
  }
};
}  // namespace doctest

namespace lockstep::sim::loader_testing {

inline LoadResult load(std::string_view text, std::vector<ParamOverride> overrides = {},
                const LoadLimits& limits = {}) {
  return load_scenario_text(text, "s.yaml", overrides, limits);
}

// Every diagnostic as "line:col: severity: message".
inline std::vector<std::string> problems(const LoadResult& result) {
  std::vector<std::string> out;
  for (const Diagnostic& d : result.diagnostics) {
    CHECK(d.file == "s.yaml");
    const char* severity = d.severity == Severity::ERROR     ? "error"
                           : d.severity == Severity::WARNING ? "warning"
                                                             : "note";
    out.push_back(std::to_string(d.loc.line) + ":" + std::to_string(d.loc.col) + ": " + severity +
                  ": " + d.message);
  }
  return out;
}

inline std::vector<std::string> problems(std::string_view text, std::vector<ParamOverride> overrides = {},
                                  const LoadLimits& limits = {}) {
  const LoadResult result = load(text, std::move(overrides), limits);
  CHECK(result.ok() ==
        std::none_of(result.diagnostics.begin(), result.diagnostics.end(),
                     [](const Diagnostic& d) { return d.severity == Severity::ERROR; }));
  return problems(result);
}

// A scenario of `world` ranks whose program is `program` (indented by the caller as a list).
inline std::string with_program(std::string_view program, std::string_view extra = "", int world = 4) {
  return "scenario: t\nworld: " + std::to_string(world) + "\n" + std::string(extra) + "program:\n" +
         std::string(program);
}

inline const Scenario& loaded(const LoadResult& result) {
  if (!result.ok()) {
    for (const Diagnostic& d : result.diagnostics) MESSAGE(format_diagnostic(d, result.text));
  }
  REQUIRE(result.ok());
  return *result.scenario;
}

inline int64_t value_of(const Expr& expr) {
  REQUIRE(expr.is_constant());
  return expr.value;
}

}  // namespace lockstep::sim::loader_testing

// Helpers shared by the unit tests.
#pragma once

#include <doctest/doctest.h>

#include <string>
#include <string_view>

#include "sim/loader.h"
#include "sim/scenario.h"

namespace lockstep::testing {

// Loads a scenario from text; fails the test (printing every diagnostic) when it does not load.
inline sim::Scenario scenario_from(std::string_view text, const std::string& path = "test.yaml") {
  sim::LoadResult loaded = sim::load_scenario_text(text, path, {});
  std::string diagnostics;
  for (const sim::Diagnostic& d : loaded.diagnostics) diagnostics += sim::format_diagnostic(d, loaded.text);
  INFO(diagnostics);
  REQUIRE(loaded.ok());
  return std::move(*loaded.scenario);
}

// Loads a bundled scenario by its path from the source folder (as the tests run there).
inline sim::Scenario scenario_file(const std::string& path) {
  sim::LoadResult loaded = sim::load_scenario_file(path, {});
  std::string diagnostics;
  for (const sim::Diagnostic& d : loaded.diagnostics) diagnostics += sim::format_diagnostic(d, loaded.text);
  INFO(path << "\n" << diagnostics);
  REQUIRE(loaded.ok());
  return std::move(*loaded.scenario);
}

}  // namespace lockstep::testing

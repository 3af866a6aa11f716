// The report path on what a fuzz target loaded (tests/fuzz/README.md): a scenario or trace that
// loads is checked (a few executions, bounded in operations and time) and its JSON report, text
// report, JUnit XML and GitHub annotations are made; one that does not load gets the same
// reports of its diagnostics. Nothing may crash or throw (invalid UTF-8 aborted report_json).
// Shared by the loader, trace and import targets and by import/import_fuzz_test.cc.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "checker/explore.h"
#include "checker/report.h"
#include "sim/loader.h"

namespace lockstep::fuzz {

// "" when every report was made and is not empty; otherwise what went wrong.
inline std::string fuzz_reports(const sim::LoadResult& loaded, const std::string& path) {
  checker::InputReport report;
  report.input = path;
  if (loaded.ok()) {
    checker::CheckOptions options;
    options.strategy = "dfs";
    options.max_executions = 3;
    options.max_memory_bytes = 0;
    options.engine.limits.max_ops = 20'000;
    options.engine.deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    report.scenario = &*loaded.scenario;
    report.result = checker::check_scenario(*loaded.scenario, options);
  } else {
    for (const sim::Diagnostic& d : loaded.diagnostics) report.errors.push_back(sim::format_diagnostic(d, loaded.text));
  }
  const std::vector<checker::InputReport> reports{report};
  if (checker::report_json(reports, false).empty() || checker::report_json(reports, true).empty()) return "empty JSON report";
  if (checker::report_text(report, false).empty() && !loaded.ok()) return "empty text report";
  if (checker::report_junit(reports, false).empty()) return "empty JUnit report";
  (void)checker::report_github(reports);
  return "";
}

}  // namespace lockstep::fuzz

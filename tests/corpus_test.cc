// The golden corpus: every scenario under scenarios/ states its expected verdict, and the
// checker must reach it. A canary proves the harness can still fail.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "checker/explore.h"
#include "checker/report.h"
#include "sim/loader.h"
#include "sim/trace_format.h"

namespace lockstep {

namespace {

std::vector<std::string> corpus_files() {
  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(LOCKSTEP_SOURCE_DIR "/scenarios")) {
    if (entry.path().extension() == ".yaml" || entry.path().extension() == ".jsonl") {
      files.push_back(std::filesystem::relative(entry.path(), LOCKSTEP_SOURCE_DIR).generic_string());
    }
  }
  std::sort(files.begin(), files.end());
  return files;
}

// The text report of every corpus scenario, concatenated.
std::string check_corpus(size_t& checked) {
  std::string all;
  checked = 0;
  for (const std::string& file : corpus_files()) {
    const std::string path = LOCKSTEP_SOURCE_DIR "/" + file;
    sim::LoadResult loaded = file.ends_with(".jsonl") ? sim::load_trace_file(path, {}) : sim::load_scenario_file(path, {});
    std::string diagnostics;
    for (const sim::Diagnostic& d : loaded.diagnostics) diagnostics += sim::format_diagnostic(d, loaded.text);
    INFO(file << "\n" << diagnostics);
    REQUIRE(loaded.ok());
    const sim::Scenario& scenario = *loaded.scenario;
    REQUIRE_MESSAGE(scenario.expect.has_value(), file << " has no expect:");
    checker::InputReport report;
    report.input = file;
    report.scenario = &scenario;
    report.result = checker::check_scenario(scenario, {});
    CHECK_MESSAGE(report.result->exhaustive, file);
    CHECK_MESSAGE(sim::verdict_name(report.result->verdict) == sim::verdict_name(*scenario.expect), file);
    // The report names a bug's kind only when there are several; with one, the verdict is its kind.
    if (report.result->bugs.size() == 1) CHECK_MESSAGE(report.result->bugs[0].kind == report.result->verdict, file);
    CHECK_MESSAGE(report.result->bugs.empty() == (report.result->verdict == sim::Verdict::OK), file);
    all += checker::report_text(report, false);
    ++checked;
  }
  return all;
}

}  // namespace

TEST_CASE("every corpus scenario gets its expected verdict, and twice the same report") {
  size_t first_count = 0;
  size_t second_count = 0;
  const std::string first = check_corpus(first_count);
  const std::string second = check_corpus(second_count);
  CHECK(first_count >= 44);  // the hang corpus (docs/hang-patterns.md) and the examples
  CHECK(first_count == second_count);
  CHECK(first == second);
}

TEST_CASE("canary: head-to-head blocking sends are always found as a deadlock") {
  sim::LoadResult loaded = sim::load_scenario_file(LOCKSTEP_SOURCE_DIR "/scenarios/corpus/head-to-head-sends.yaml", {});
  REQUIRE(loaded.ok());
  const checker::CheckResult result = checker::check_scenario(*loaded.scenario, {});
  REQUIRE(result.verdict == sim::Verdict::DEADLOCK);
  REQUIRE(result.bugs.size() == 1);
  CHECK(result.bugs[0].cycle == std::vector<int32_t>{0, 1, 0});
}

}  // namespace lockstep

#include <fstream>
#include <sstream>

#include "cli/cli.h"

namespace lockstep {

TEST_CASE("golden: the full check report of the corpus, explanations and execution counts included") {
  std::ostringstream out, err;
  const int code = cli::run_cli({"check", "scenarios/"}, out, err);
  CHECK(code == cli::EXIT_BUG);
  CHECK(err.str() == "");
  std::ifstream file(LOCKSTEP_SOURCE_DIR "/tests/golden/check-scenarios.txt");
  REQUIRE(file);
  std::stringstream golden;
  golden << file.rdbuf();
  CHECK(out.str() == golden.str());
}

}  // namespace lockstep

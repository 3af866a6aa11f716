// docs/hang-patterns.md against the corpus: every verdict block on the page is what the checker
// prints, every scenario named there has the verdict named there, and every corpus scenario (with
// its source) is on the page. The catalogue and the scenarios cannot drift apart.
#include <doctest/doctest.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "checker/explore.h"
#include "checker/report.h"
#include "sim/loader.h"
#include "tests/testing.h"

namespace lockstep {
namespace {

std::string read_text(const std::filesystem::path& path) {
  std::ifstream file(path, std::ios::binary);
  REQUIRE_MESSAGE(file.good(), path.string());
  std::ostringstream text;
  text << file.rdbuf();
  return text.str();
}

// The text report of one scenario, named by its path relative to the source folder.
std::string check_report(const std::string& relative, const sim::Scenario& scenario) {
  checker::InputReport report;
  report.input = relative;
  report.scenario = &scenario;
  report.result = checker::check_scenario(scenario, {});
  return checker::report_text(report, false);
}

}  // namespace

TEST_CASE("docs: hang-patterns.md quotes the checker verbatim and names every corpus scenario with its verdict") {
  const std::filesystem::path root(LOCKSTEP_SOURCE_DIR);
  const std::string markdown = read_text(root / "docs" / "hang-patterns.md");

  // The patterns, numbered in order.
  // (Plain scans, no std::regex: <regex> trips GCC 12's -Wmaybe-uninitialized under -O2
  // -fsanitize, which the asan build treats as an error.)
  std::vector<int> numbers;
  {
    std::istringstream in(markdown);
    std::string line;
    while (std::getline(in, line)) {
      if (!line.starts_with("## ")) continue;
      size_t digits = 3;
      while (digits < line.size() && std::isdigit(static_cast<unsigned char>(line[digits])) != 0) ++digits;
      if (digits > 3 && digits < line.size() && line[digits] == '.') numbers.push_back(std::stoi(line.substr(3, digits - 3)));
    }
  }
  REQUIRE(numbers.size() == 20);
  for (size_t i = 0; i < numbers.size(); ++i) CHECK(numbers[i] == static_cast<int>(i) + 1);

  // Every corpus scenario loads; keep them for the checks below.
  std::map<std::string, sim::LoadResult> corpus;
  for (const auto& entry : std::filesystem::directory_iterator(root / "scenarios" / "corpus")) {
    if (entry.path().extension() != ".yaml") continue;
    const std::string relative = "scenarios/corpus/" + entry.path().filename().string();
    // Loaded under its relative name, so that source locations read as in `lockstep check scenarios/`.
    sim::LoadResult loaded = sim::load_scenario_text(read_text(entry.path()), relative, {});
    REQUIRE_MESSAGE(loaded.ok(), relative);
    REQUIRE_MESSAGE(loaded.scenario->expect.has_value(), relative << " has no expect:");
    corpus.emplace(relative, std::move(loaded));
  }
  REQUIRE(corpus.size() >= 34);

  // `scenarios/corpus/NAME.yaml` (VERDICT): the scenario exists and expects that verdict.
  std::set<std::string> named;
  const std::string prefix = "`scenarios/corpus/";
  for (size_t at = markdown.find(prefix); at != std::string::npos; at = markdown.find(prefix, at + 1)) {
    const size_t close = markdown.find("` (", at + 1);
    const size_t end = close == std::string::npos ? std::string::npos : markdown.find(')', close);
    if (end == std::string::npos) break;
    const std::string path = markdown.substr(at + 1, close - at - 1);
    const std::string verdict = markdown.substr(close + 3, end - close - 3);
    // Only `scenarios/corpus/NAME.yaml` (word): a path without spaces, a verdict of letters.
    if (!path.ends_with(".yaml") || path.find_first_of(" `\n") != std::string::npos ||
        verdict.empty() || verdict.find_first_not_of("abcdefghijklmnopqrstuvwxyz") != std::string::npos) {
      continue;
    }
    CAPTURE(path);
    const auto found = corpus.find(path);
    REQUIRE_MESSAGE(found != corpus.end(), path << " is named in docs/hang-patterns.md but does not exist");
    CHECK(sim::verdict_name(*found->second.scenario->expect) == verdict);
    named.insert(path);
  }

  // Every ```text block is the beginning of the checker's report for the scenario it names.
  std::set<std::string> quoted;
  for (const testing::FencedBlock& block : testing::fenced_blocks(markdown, "text")) {
    const std::string where = "docs/hang-patterns.md:" + std::to_string(block.line);
    CAPTURE(where);
    const std::string path = block.text.substr(0, block.text.find(':'));
    const auto found = corpus.find(path);
    REQUIRE_MESSAGE(found != corpus.end(), where << " quotes " << path << ", which is not a corpus scenario");
    const std::string report = check_report(path, *found->second.scenario);
    CHECK_MESSAGE(report.starts_with(block.text), "the checker now says:\n" << report);
    quoted.insert(path);
  }

  // Every corpus scenario is on the page with its verdict, every bug is quoted, every source cited.
  for (const auto& [path, loaded] : corpus) {
    CAPTURE(path);
    const sim::Scenario& scenario = *loaded.scenario;
    CHECK_MESSAGE(named.contains(path), path << " is missing from docs/hang-patterns.md");
    if (*scenario.expect != sim::Verdict::OK) {
      CHECK_MESSAGE(quoted.contains(path), "docs/hang-patterns.md quotes no report of " << path);
    }
    CHECK_MESSAGE(!scenario.description.empty(), path << " has no description");
    REQUIRE_MESSAGE(!scenario.source_url.empty(), path << " has no source:");
    CHECK_MESSAGE(markdown.find(scenario.source_url) != std::string::npos,
                  "docs/hang-patterns.md does not cite " << scenario.source_url);
  }
}

}  // namespace lockstep

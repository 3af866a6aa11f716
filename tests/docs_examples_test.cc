// Every ```yaml block of docs/scenario-language.md is a complete scenario that loads with no
// error: the reference cannot drift from the loader.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "sim/loader.h"
#include "tests/testing.h"

namespace lockstep::sim {
namespace {

TEST_CASE("docs: every example of the scenario language loads without an error") {
  const std::filesystem::path path =
      std::filesystem::path(LOCKSTEP_SOURCE_DIR) / "docs" / "scenario-language.md";
  std::ifstream file(path, std::ios::binary);
  REQUIRE(file.good());
  std::ostringstream markdown;
  markdown << file.rdbuf();
  const std::vector<testing::FencedBlock> examples = testing::fenced_blocks(markdown.str(), "yaml");
  CHECK(examples.size() >= 15);
  for (const testing::FencedBlock& example : examples) {
    const std::string name = "docs/scenario-language.md:" + std::to_string(example.line);
    CAPTURE(name);
    const LoadResult result = load_scenario_text(example.text, name, {});
    std::string errors;
    for (const Diagnostic& d : result.diagnostics) {
      if (d.severity == Severity::ERROR) errors += format_diagnostic(d, result.text);
    }
    CHECK(errors == "");
    CHECK(result.ok());
  }
}

}  // namespace
}  // namespace lockstep::sim

// Every ```yaml block of docs/scenario-language.md is a complete scenario that loads with no
// error: the reference cannot drift from the loader.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "sim/loader.h"

namespace lockstep::sim {
namespace {

struct Example {
  int line = 0;  // of the opening fence
  std::string text;
};

std::vector<Example> yaml_examples(const std::string& markdown) {
  std::vector<Example> examples;
  std::istringstream in(markdown);
  std::string line;
  int number = 0;
  Example* open = nullptr;
  while (std::getline(in, line)) {
    ++number;
    if (open == nullptr && line == "```yaml") {
      examples.push_back({number, ""});
      open = &examples.back();
    } else if (open != nullptr && line == "```") {
      open = nullptr;
    } else if (open != nullptr) {
      open->text += line + "\n";
    }
  }
  CHECK(open == nullptr);  // every fence is closed
  return examples;
}

TEST_CASE("docs: every example of the scenario language loads without an error") {
  const std::filesystem::path path =
      std::filesystem::path(LOCKSTEP_SOURCE_DIR) / "docs" / "scenario-language.md";
  std::ifstream file(path, std::ios::binary);
  REQUIRE(file.good());
  std::ostringstream markdown;
  markdown << file.rdbuf();
  const std::vector<Example> examples = yaml_examples(markdown.str());
  CHECK(examples.size() >= 15);
  for (const Example& example : examples) {
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

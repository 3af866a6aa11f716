// The corpus of malformed scenarios: every tests/bad/NAME.yaml must fail to load with exactly the
// diagnostics in tests/bad/NAME.expected (each formatted by format_diagnostic, concatenated).
// An optional tests/bad/NAME.defines holds -D overrides, one NAME=VALUE per line.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "sim/loader.h"

namespace lockstep::sim {
namespace {

namespace fs = std::filesystem;

const fs::path BAD_DIR = fs::path(LOCKSTEP_SOURCE_DIR) / "tests" / "bad";

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

std::vector<ParamOverride> read_defines(const fs::path& path) {
  std::vector<ParamOverride> overrides;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    const size_t eq = line.find('=');
    if (eq != std::string::npos) overrides.push_back({line.substr(0, eq), line.substr(eq + 1)});
  }
  return overrides;
}

// The corpus entries with a given extension, by name, sorted.
std::vector<std::string> names_with(std::string_view extension) {
  std::vector<std::string> names;
  for (const fs::directory_entry& entry : fs::directory_iterator(BAD_DIR)) {
    if (entry.path().extension() == extension) names.push_back(entry.path().stem().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

TEST_CASE("bad corpus: every malformed scenario fails with exactly its expected diagnostics") {
  const std::vector<std::string> names = names_with(".yaml");
  CHECK(names.size() >= 25);
  for (const std::string& name : names) {
    CAPTURE(name);
    const std::string relative = "tests/bad/" + name + ".yaml";
    REQUIRE_MESSAGE(fs::exists(relative), "run the tests from the source directory (ctest does)");
    const fs::path defines = BAD_DIR / (name + ".defines");
    const std::vector<ParamOverride> overrides =
        fs::exists(defines) ? read_defines(defines) : std::vector<ParamOverride>{};
    const LoadResult result = load_scenario_file(relative, overrides);
    CHECK_FALSE(result.ok());
    std::string actual;
    for (const Diagnostic& diagnostic : result.diagnostics) {
      actual += format_diagnostic(diagnostic, result.text);
    }
    CHECK(actual == read_text(BAD_DIR / (name + ".expected")));
  }
}

TEST_CASE("bad corpus: every .expected and .defines file belongs to a scenario") {
  const std::vector<std::string> scenarios = names_with(".yaml");
  for (std::string_view extension : {".expected", ".defines"}) {
    for (const std::string& name : names_with(extension)) {
      CAPTURE(name);
      CHECK(std::binary_search(scenarios.begin(), scenarios.end(), name));
    }
  }
  CHECK(names_with(".expected") == scenarios);
}

}  // namespace
}  // namespace lockstep::sim

// ctest runs each doctest case by name (doctest_discover_tests). A ';' in a name splits it as a
// CMake list, so ctest would run a filter that matches nothing and report a pass: a test that
// cannot fail. This keeps every name runnable.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>

namespace lockstep {

TEST_CASE("every test case name can be run by ctest") {
  const std::regex test_case(R"re(TEST_CASE\("([^"]*)"\))re");
  std::set<std::string> names;
  size_t files = 0;
  for (const char* dir : {"sim", "checker", "cli", "tests"}) {
    for (const auto& entry : std::filesystem::directory_iterator(std::string(LOCKSTEP_SOURCE_DIR) + "/" + dir)) {
      const std::string file = entry.path().filename().string();
      if (!file.ends_with("_test.cc")) continue;
      ++files;
      std::ifstream in(entry.path());
      std::stringstream text;
      text << in.rdbuf();
      const std::string source = text.str();
      for (auto it = std::sregex_iterator(source.begin(), source.end(), test_case); it != std::sregex_iterator(); ++it) {
        const std::string name = (*it)[1].str();
        INFO(file << ": " << name);
        CHECK(name.find(';') == std::string::npos);
        CHECK(names.insert(name).second);  // unique: a name runs exactly one case
      }
    }
  }
  CHECK(files > 10);
  CHECK(names.size() > 100);
}

}  // namespace lockstep

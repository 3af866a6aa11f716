// ctest runs each doctest case by name (doctest_discover_tests). A ';' in a name splits it as a
// CMake list, so ctest would run a filter that matches nothing and report a pass: a test that
// cannot fail. This keeps every name runnable.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

namespace lockstep {

TEST_CASE("every test case name can be run by ctest") {
  const std::string marker = "TEST_CASE(\"";  // a plain scan: std::regex trips GCC 12's
                                               // -Wmaybe-uninitialized under -O2 -fsanitize
  std::set<std::string> names;
  size_t files = 0;
  for (const char* dir : {"sim", "checker", "cli", "gpu_validation", "tests"}) {
    for (const auto& entry : std::filesystem::directory_iterator(std::string(LOCKSTEP_SOURCE_DIR) + "/" + dir)) {
      const std::string file = entry.path().filename().string();
      if (!file.ends_with("_test.cc")) continue;
      ++files;
      std::ifstream in(entry.path());
      std::stringstream text;
      text << in.rdbuf();
      const std::string source = text.str();
      for (size_t at = source.find(marker); at != std::string::npos; at = source.find(marker, at + 1)) {
        const size_t start = at + marker.size();
        const size_t end = source.find('"', start);
        if (end == std::string::npos) break;
        const std::string name = source.substr(start, end - start);
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

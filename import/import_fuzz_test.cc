// Every input the importer fuzz target (tests/fuzz/import_fuzz.cc) once failed on, kept in
// tests/fuzz/regressions/import-*, must pass its checks now (import_fuzz_one.h). Under the
// sanitizer build a leak or an out-of-bounds read fails the run as well.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "tests/fuzz/import_fuzz_one.h"

namespace lockstep::import {

TEST_CASE("import fuzz regressions: every saved input is imported or refused cleanly") {
  namespace fs = std::filesystem;
  std::vector<fs::path> inputs;
  for (const auto& entry : fs::directory_iterator("tests/fuzz/regressions")) {
    if (entry.path().filename().string().rfind("import-", 0) == 0) inputs.push_back(entry.path());
  }
  std::sort(inputs.begin(), inputs.end());
  REQUIRE_FALSE(inputs.empty());
  for (const fs::path& input : inputs) {
    std::ifstream in(input, std::ios::binary);
    std::ostringstream bytes;
    bytes << in.rdbuf();
    const std::string data = bytes.str();
    INFO(input.string());
    CHECK(fuzz::import_fuzz_one(reinterpret_cast<const uint8_t*>(data.data()), data.size()) == "");
  }
  fs::remove_all(fs::temp_directory_path() / ("lockstep-import-fuzz-" + std::to_string(::getpid())));
}

}  // namespace lockstep::import

// The doctest runner. ctest runs each test case as its own process, two at a time (the test
// presets' `jobs`), so each process gets its own temporary directory: TMPDIR points into a
// fresh one for the process and its children, removed at exit. Tests that keep files under
// std::filesystem::temp_directory_path() by fixed names cannot then meet.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <system_error>

int main(int argc, char** argv) {
  const char* base = std::getenv("TMPDIR");
  std::string made = std::string(base != nullptr && *base != 0 ? base : "/tmp") + "/lockstep-tests-XXXXXX";
  const bool own = ::mkdtemp(made.data()) != nullptr;
  if (own) ::setenv("TMPDIR", made.c_str(), 1);
  doctest::Context context(argc, argv);
  const int result = context.run();
  if (own) {
    std::error_code ignored;
    std::filesystem::remove_all(made, ignored);
  }
  return result;
}

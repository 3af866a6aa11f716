// What the tests of `lockstep record` share: the binary, running a command line, reading a
// file, a fresh folder removed at the end, and lines joined as a recording's file.
#pragma once

#include <doctest/doctest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace lockstep::record::testing {

inline const std::string LOCKSTEP = LOCKSTEP_BINARY;

struct Ran {
  int code = -1;
  std::string output;  // stdout and stderr
};

inline Ran run(const std::string& command) {
  Ran ran;
  FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  REQUIRE(pipe != nullptr);
  std::array<char, 4096> buffer{};
  size_t n = 0;
  while ((n = std::fread(buffer.data(), 1, buffer.size(), pipe)) > 0) ran.output.append(buffer.data(), n);
  const int status = ::pclose(pipe);
  ran.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return ran;
}

inline std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Lines, each ended by a newline.
inline std::string joined_lines(const std::vector<std::string>& lines) {
  std::string out;
  for (const std::string& l : lines) out += l + "\n";
  return out;
}

// A fresh folder for one test, removed at the end.
struct TempDir {
  std::filesystem::path path;
  TempDir() {
    std::string name = (std::filesystem::temp_directory_path() / "lockstep-record-test-XXXXXX").string();
    REQUIRE(::mkdtemp(name.data()) != nullptr);
    path = name;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
};

}  // namespace lockstep::record::testing

#include "sim/output_file.h"

#include <doctest/doctest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "tests/testing.h"

namespace lockstep::sim {

namespace {

namespace fs = std::filesystem;

fs::path fresh_dir(const std::string& name) { return testing::fresh_temp_dir("lockstep-output-file-test", name); }
std::string read_all(const fs::path& path) { return testing::file_bytes(path); }

size_t entries(const fs::path& dir) {
  size_t n = 0;
  for ([[maybe_unused]] const auto& entry : fs::directory_iterator(dir)) ++n;
  return n;
}

}  // namespace

TEST_CASE("output file: a regular file is replaced whole and no temporary is left") {
  const fs::path dir = fresh_dir("regular");
  const fs::path target = dir / "report.json";
  std::ofstream(target) << "old";
  CHECK(write_output_file(target.string(), "new\n") == "");
  CHECK(read_all(target) == "new\n");
  CHECK(write_output_file((dir / "fresh.json").string(), "") == "");
  CHECK(fs::is_regular_file(dir / "fresh.json"));
  CHECK(entries(dir) == 2);
}

TEST_CASE("output file: a link planted at the old temporary names is never followed") {
  const fs::path dir = fresh_dir("planted");
  const fs::path victim = dir / "victim";
  std::ofstream(victim) << "keep";
  for (const char* planted : {"report.json.tmp", ".report.json.tmp", "report.json.lockstep-tmp"}) {
    fs::create_symlink(victim, dir / planted);
  }
  CHECK(write_output_file((dir / "report.json").string(), "report") == "");
  CHECK(read_all(victim) == "keep");
  CHECK(read_all(dir / "report.json") == "report");
  CHECK(fs::is_symlink(dir / "report.json.tmp"));
}

TEST_CASE("output file: a device or a FIFO is written in place, never replaced by a regular file") {
  const fs::path dir = fresh_dir("special");
  // A link to /dev/null (what --json /dev/null meets, without touching /dev/null itself).
  const fs::path null_link = dir / "null";
  fs::create_symlink("/dev/null", null_link);
  CHECK(write_output_file(null_link.string(), "discarded") == "");
  CHECK(fs::is_symlink(null_link));
  CHECK(fs::is_character_file(null_link));
  // A FIFO: its reader gets the bytes; the FIFO stays.
  const fs::path fifo = dir / "fifo";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  std::string got;
  std::thread reader([&] { got = read_all(fifo); });
  CHECK(write_output_file(fifo.string(), "through the pipe") == "");
  reader.join();
  CHECK(got == "through the pipe");
  CHECK(fs::is_fifo(fifo));
  CHECK(entries(dir) == 2);
}

TEST_CASE("output file: a folder is refused and a failed write leaves nothing behind") {
  const fs::path dir = fresh_dir("refused");
  CHECK(write_output_file(dir.string(), "x") == "Is a directory");
  CHECK(write_output_file((dir / "missing" / "x.json").string(), "x") == "No such file or directory");
  {
    OutputFile abandoned;  // never committed: as when the writer fails half way
    REQUIRE(abandoned.open((dir / "abandoned.json").string()) == "");
    std::fputs("half", abandoned.stream());
    CHECK(entries(dir) == 1);  // the temporary
  }
  CHECK(entries(dir) == 0);
}

}  // namespace lockstep::sim

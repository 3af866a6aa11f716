// Counterexample files: named after the input file and the bug class, never replaced without
// --force, one per class.
#include "cli/cli.h"
#include "tests/testing.h"

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

namespace lockstep::cli {

namespace {

int lockstep_code(std::vector<std::string> args, std::string* err = nullptr, std::string* out = nullptr) {
  std::ostringstream o, e;
  const int code = run_cli(args, o, e);
  if (err) *err = e.str();
  if (out) *out = o.str();
  return code;
}

constexpr const char* HEAD_TO_HEAD = "scenario: same-name\nworld: 2\nprogram:\n  - send: {to: \"1 - rank\", size: 1MiB}\n"
                                     "  - recv: {from: \"1 - rank\", size: 1MiB}\n";
constexpr const char* UNEVEN = "scenario: same-name\nworld: 2\nprogram:\n  - repeat: \"2 - rank\"\n    do: [{allreduce: {size: 4}}]\n";

}  // namespace

TEST_CASE("counterexamples: two inputs with one scenario name get a file each, named after the input") {
  const std::filesystem::path dir = testing::fresh_temp_dir("lockstep-cex-files-test", "names");
  std::filesystem::create_directories(dir / "a");
  std::filesystem::create_directories(dir / "b");
  std::ofstream(dir / "a" / "job.yaml") << HEAD_TO_HEAD;
  std::ofstream(dir / "b" / "job.yaml") << UNEVEN;
  std::ofstream(dir / "other.yaml") << UNEVEN;
  const std::string cex = (dir / "cex").string();
  std::string err, out;
  CHECK(lockstep_code({"check", (dir / "a" / "job.yaml").string(), (dir / "b" / "job.yaml").string(),
                       (dir / "other.yaml").string(), "--cex-dir", cex},
                      &err, &out) == EXIT_BUG);
  INFO(err);
  CHECK(std::filesystem::exists(dir / "cex" / "job-1.json"));
  const std::string second = ((dir / "b").generic_string() + "/job");
  std::string flat = second;
  std::replace(flat.begin(), flat.end(), '/', '_');
  CHECK(std::filesystem::exists(dir / "cex" / (flat + "-1.json")));
  CHECK(std::filesystem::exists(dir / "cex" / "other-1.json"));
  CHECK(out.find("replay: lockstep replay " + (dir / "cex" / "other-1.json").generic_string() + " --sim") != std::string::npos);
}

TEST_CASE("counterexamples: an existing file is not replaced without --force") {
  const std::filesystem::path dir = testing::fresh_temp_dir("lockstep-cex-files-test", "force");
  std::ofstream(dir / "job.yaml") << UNEVEN;
  const std::string cex = (dir / "cex").string();
  CHECK(lockstep_code({"check", (dir / "job.yaml").string(), "--cex-dir", cex}) == EXIT_BUG);
  std::ofstream(dir / "cex" / "job-1.json") << "mine";
  std::string err;
  CHECK(lockstep_code({"check", (dir / "job.yaml").string(), "--cex-dir", cex}, &err) == EXIT_BAD_INPUT);
  CHECK(err == (dir / "cex" / "job-1.json").generic_string() + ": error: file exists (from an earlier check?); --force replaces it\n");
  std::ifstream kept(dir / "cex" / "job-1.json");
  CHECK(std::string(std::istreambuf_iterator<char>(kept), {}) == "mine");
  CHECK(lockstep_code({"check", (dir / "job.yaml").string(), "--cex-dir", cex, "--force"}) == EXIT_BUG);
  std::ifstream replaced(dir / "cex" / "job-1.json");
  CHECK(std::string(std::istreambuf_iterator<char>(replaced), {}).starts_with("{"));
}

TEST_CASE("counterexamples: one file per bug class, for its smallest member") {
  const std::filesystem::path dir = testing::fresh_temp_dir("lockstep-cex-files-test", "classes");
  std::ofstream(dir / "stop.yaml") << "scenario: stop\nworld: 3\nprogram:\n  - allreduce: {size: 4}\n  - sync\n"
                                      "  - choose:\n      stop: [exit]\n      go: []\n  - allreduce: {size: 4}\n";
  const std::string json = (dir / "report.json").string();
  CHECK(lockstep_code({"check", (dir / "stop.yaml").string(), "--cex-dir", (dir / "cex").string(), "--json", json}) == EXIT_BUG);
  std::ifstream in(json);
  const nlohmann::json report = nlohmann::json::parse(in);
  REQUIRE(report["classes"].size() == 1);
  CHECK(report["bugs"].size() == 6);
  const size_t representative = report["classes"][0]["representative"];
  size_t files = 0;
  for (size_t i = 0; i < report["bugs"].size(); ++i) {
    if (report["bugs"][i]["counterexample"].is_null()) continue;
    ++files;
    CHECK(i == representative);
    CHECK(report["bugs"][i]["counterexample"] == (dir / "cex" / "stop-1.json").string());
  }
  CHECK(files == 1);
}

}  // namespace lockstep::cli

// Hostile and extreme inputs end the way docs/outputs.md says: a diagnostic and exit 2, a bounded file,
// a verdict that is right, never a crash or a file clobbered. Each case is a row of the hardening
// table (docs/outputs.md, docs/scenario-language.md "Encoding"); the small inputs sit in
// tests/hardening/, the big ones are generated here.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/cli.h"
#include "sim/trace_format.h"
#include "tests/fuzz/report_fuzz.h"
#include "tests/testing.h"

namespace lockstep {

namespace {

namespace fs = std::filesystem;
using Run = testing::CliRun;

Run lockstep(const std::vector<std::string>& args) { return testing::run_lockstep(args); }
fs::path fresh_dir(const std::string& name) { return testing::fresh_temp_dir("lockstep-hardening-test", name); }
std::string read_all(const fs::path& path) { return testing::file_bytes(path); }

const char* const DEADLOCK = R"Y(scenario: NAME
world: 2
program:
  - send: {to: "1 - rank", size: 64MiB}
  - recv: {from: "1 - rank", size: 64MiB}
)Y";

std::string deadlock_named(const std::string& name) {
  std::string text = DEADLOCK;
  text.replace(text.find("NAME"), 4, name);
  return text;
}

}  // namespace

TEST_CASE("hardening: a scenario or trace with an invalid UTF-8 byte is refused at load by every verb, with its location") {
  const fs::path dir = fresh_dir("utf8");
  const fs::path yaml = dir / "bad-name.yaml";
  std::ofstream(yaml) << deadlock_named("dead\xff" "lock");
  const std::string expected = yaml.string() + ":1:15: error: invalid UTF-8 byte 0xFF: a scenario or trace is UTF-8 text\n"
                               "  scenario: dead?lock\n"
                               "                ^\n";
  for (const char* verb : {"check", "validate", "run"}) {
    CAPTURE(verb);
    const Run run = lockstep({verb, yaml.string()});
    CHECK(run.code == cli::EXIT_BAD_INPUT);
    CHECK(run.err == expected);
  }
  const Run json = lockstep({"check", yaml.string(), "--json", "-"});
  CHECK(json.code == cli::EXIT_BAD_INPUT);
  CHECK(nlohmann::json::parse(json.out)["verdict"] == "error");
  const fs::path trace = dir / "bad.jsonl";
  std::ofstream(trace) << "{\"lockstep_trace\": 1, \"scenario\": \"t\", \"world\": 1}\n{\"rank\": 0, \"op\": \"\xc3\"}\n";
  const Run traced = lockstep({"check", trace.string()});
  CHECK(traced.code == cli::EXIT_BAD_INPUT);
  CHECK(traced.err.rfind(trace.string() + ":2:20: error: invalid UTF-8 byte 0xC3", 0) == 0);
}

TEST_CASE("hardening: a path that is not UTF-8 reaches the JSON and JUnit reports replaced, never aborting them") {
  const fs::path dir = fresh_dir("utf8-path");
  const fs::path input = dir / "dead\xfflock.yaml";
  std::ofstream(input) << deadlock_named("deadlock");
  const fs::path junit = dir / "junit.xml";
  const Run run = lockstep({"check", input.string(), "--json", "-", "--junit", junit.string()});
  CHECK(run.code == cli::EXIT_BUG);
  const nlohmann::json report = nlohmann::json::parse(run.out);
  CHECK(report["input"] == (dir / "dead\xEF\xBF\xBDlock.yaml").string());
  CHECK(report["verdict"] == "deadlock");
  CHECK(read_all(junit).find("dead\xEF\xBF\xBDlock.yaml") != std::string::npos);
}

TEST_CASE("hardening: a rank whose virtual time passes int64 is an error at its op, not an ok verdict") {
  const std::string input = "tests/hardening/time-overflow.yaml";
  const Run run = lockstep({"check", input});
  CHECK(run.code == cli::EXIT_BAD_INPUT);
  CHECK(run.err == input + ":8:9: error: virtual time of rank 0 overflows: compute ends past 2^63 ns (292 years)\n"
                           "        - compute: 2562047h\n"
                           "          ^\n");
  CHECK(lockstep({"run", input}).code == cli::EXIT_BAD_INPUT);
}

TEST_CASE("hardening: a 200-character input file name gives a bounded counterexample file name, hashed") {
  const fs::path dir = fresh_dir("long-name");
  const std::string name(200, 'n');
  const fs::path input = dir / (name + ".yaml");
  std::ofstream(input) << deadlock_named("long");
  const fs::path cex = dir / "cex";
  const Run run = lockstep({"check", input.string(), "--cex-dir", cex.string()});
  INFO(run.err);
  CHECK(run.code == cli::EXIT_BUG);
  std::vector<std::string> files;
  for (const auto& entry : fs::directory_iterator(cex)) files.push_back(entry.path().filename().string());
  REQUIRE(files.size() == 1);
  CHECK(files[0].size() == 100 + std::string("-1.json").size());
  CHECK(files[0].rfind(std::string(83, 'n') + "-", 0) == 0);
  CHECK(lockstep({"replay", (cex / files[0]).string(), "--sim"}).code == cli::EXIT_BUG);
  // Another long name with the same start gets another file.
  const fs::path other = dir / (name + "x.yaml");
  std::ofstream(other) << deadlock_named("long");
  CHECK(lockstep({"check", other.string(), "--cex-dir", cex.string()}).code == cli::EXIT_BUG);
  size_t count = 0;
  for ([[maybe_unused]] const auto& entry : fs::directory_iterator(cex)) ++count;
  CHECK(count == 2);
}

TEST_CASE("hardening: --json, --junit, --timeline and import -o write through a link to a device, never replace it") {
  const fs::path dir = fresh_dir("devices");
  const fs::path null = dir / "null";
  fs::create_symlink("/dev/null", null);
  const std::string scenario = "scenarios/corpus/head-to-head-sends.yaml";
  CHECK(lockstep({"check", scenario, "--json", null.string(), "--junit", null.string()}).code == cli::EXIT_BUG);
  CHECK(lockstep({"run", "scenarios/examples/3d-parallel.yaml", "--timeline", null.string()}).code == cli::EXIT_NO_BUG);
  CHECK(lockstep({"import", "pipeline-csv", "tests/import/pipeline/comms-fixed.csv", "-o", null.string(), "--quiet"}).code == 0);
  CHECK(fs::is_symlink(null));
  CHECK(fs::is_character_file(null));
  CHECK(fs::read_symlink(null) == "/dev/null");
}

TEST_CASE("hardening: a link planted at a report's old temporary name is not followed") {
  const fs::path dir = fresh_dir("planted");
  const fs::path victim = dir / "victim";
  std::ofstream(victim) << "keep";
  fs::create_symlink(victim, dir / "report.json.tmp");
  fs::create_symlink(victim, dir / "junit.xml.tmp");
  const Run run = lockstep({"check", "scenarios/corpus/head-to-head-sends.yaml", "--json", (dir / "report.json").string(),
                            "--junit", (dir / "junit.xml").string()});
  CHECK(run.code == cli::EXIT_BUG);
  CHECK(read_all(victim) == "keep");
  CHECK(nlohmann::json::parse(read_all(dir / "report.json"))["verdict"] == "deadlock");
}

TEST_CASE("hardening: a pickle dump whose values would take far more memory than its size is refused, naming the bound") {
  const fs::path dir = fresh_dir("pickle");
  const fs::path dump = dir / "nccl_trace_rank_0";
  std::string dicts = "\x80\x02";
  dicts.append(size_t{2} << 20, '}');  // a dict each: about 120 bytes of memory per byte
  dicts += '.';
  std::ofstream(dump, std::ios::binary) << dicts;
  const Run run = lockstep({"import", "flight-recorder", dump.string(), "-o", (dir / "out.jsonl").string()});
  CHECK(run.code == cli::EXIT_BAD_INPUT);
  CHECK(run.err.rfind(dump.string() + ": error: bad pickle: byte ", 0) == 0);  // where the reader got to
  CHECK(run.err.ends_with(": its values need more than 192 MiB of memory, the bound for a pickle of 2097155 bytes "
                          "(docs/import.md, \"Bounds\")\n"));
  CHECK_FALSE(fs::exists(dir / "out.jsonl"));
}

TEST_CASE("hardening: 40,000 unused params give 50 warnings and a count, each echo cut to a window") {
  std::string params;
  for (int i = 0; i < 40'000; ++i) params += (i ? ", p" : "p") + std::to_string(i) + ": 1";
  const fs::path dir = fresh_dir("params");
  const fs::path input = dir / "params.yaml";
  std::ofstream(input) << "scenario: params\nworld: 2\nparams: {" << params << "}\nprogram:\n  - barrier: world\n";
  const Run run = lockstep({"validate", input.string()});
  CHECK(run.code == cli::EXIT_NO_BUG);
  size_t warnings = 0;
  for (size_t at = run.err.find(": warning: "); at != std::string::npos; at = run.err.find(": warning: ", at + 1)) ++warnings;
  CHECK(warnings == 51);
  CHECK(run.err.find(input.string() + ": warning: 39950 more warnings not shown (40000 in all)\n") != std::string::npos);
  CHECK(run.err.size() < 20'000);
  const Run quiet = lockstep({"validate", input.string(), "--quiet"});
  CHECK(quiet.err.empty());
}

TEST_CASE("hardening: the saved loader fuzz inputs load or are refused, and every report of them is made") {
  size_t inputs = 0;
  for (const auto& entry : fs::directory_iterator("tests/fuzz/regressions")) {
    const std::string name = entry.path().filename().string();
    const bool yaml = name.rfind("yaml-", 0) == 0;
    if (!yaml && name.rfind("trace-", 0) != 0) continue;
    CAPTURE(name);
    const std::string text = read_all(entry.path());
    const sim::LoadResult loaded = yaml ? sim::load_scenario_text(text, "fuzz.yaml", {}) : sim::load_trace_text(text, "fuzz.jsonl", {});
    CHECK(fuzz::fuzz_reports(loaded, yaml ? "fuzz.yaml" : "fuzz.jsonl") == "");
    ++inputs;
  }
  CHECK(inputs >= 2);
}

}  // namespace lockstep

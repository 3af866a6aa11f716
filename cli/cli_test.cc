#include "cli/cli.h"

#include <doctest/doctest.h>

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

namespace lockstep::cli {

namespace {

struct Run {
  int code = 0;
  std::string out;
  std::string err;
};

Run lockstep(std::vector<std::string> args) {
  std::ostringstream out, err;
  Run run;
  run.code = run_cli(args, out, err);
  run.out = out.str();
  run.err = err.str();
  return run;
}

// This file's folder in the temporary directory (each test process has its own: tests/main.cc).
std::filesystem::path test_dir() {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "lockstep-cli-test";
  std::filesystem::create_directories(dir);
  return dir;
}

std::string temp_file(const std::string& name, const std::string& content) {
  const std::filesystem::path dir = test_dir();
  const std::string path = (dir / name).string();
  std::ofstream(path) << content;
  return path;
}

}  // namespace

TEST_CASE("check exits 1 on a bug and 0 on a fixed scenario") {
  CHECK(lockstep({"check", "scenarios/corpus/head-to-head-sends.yaml"}).code == EXIT_BUG);
  CHECK(lockstep({"check", "scenarios/corpus/head-to-head-sends-ordered.yaml"}).code == EXIT_NO_BUG);
}

TEST_CASE("check prints the verdict line and the explanation") {
  const Run run = lockstep({"check", "scenarios/corpus/uneven-batches.yaml"});
  CHECK(run.out ==
        "scenarios/corpus/uneven-batches.yaml: hang (expected hang) [1 execution, exhaustive]\n"
        "  ranks 0-2 wait in allreduce #3 on world (scenarios/corpus/uneven-batches.yaml:15:9); rank 3 never "
        "issued it: it finished\n");
}

TEST_CASE("check --json - prints the JSON report") {
  const Run run = lockstep({"check", "scenarios/corpus/head-to-head-sends.yaml", "--json", "-"});
  REQUIRE(run.code == EXIT_BUG);
  const nlohmann::json report = nlohmann::json::parse(run.out);
  CHECK(report["input"] == "scenarios/corpus/head-to-head-sends.yaml");
  CHECK(report["scenario"] == "head-to-head-sends");
  CHECK(report["verdict"] == "deadlock");
  CHECK(report["exhaustive"] == true);
  CHECK(report["expected"] == "deadlock");
  CHECK(report["matches_expected"] == true);
  CHECK(report["stats"]["executions"] == 1);
  CHECK(report["stats"]["strategy"] == "dpor");
  const nlohmann::json& bug = report["bugs"][0];
  CHECK(bug["kind"] == "deadlock");
  CHECK(bug["cycle"] == nlohmann::json::array({0, 1, 0}));
  const nlohmann::json& stuck = bug["stuck"][0];
  CHECK(stuck["rank"] == 0);
  CHECK(stuck["thread"] == "main");
  CHECK(stuck["stream"] == "comm:world");
  CHECK(stuck["op"]["kind"] == "send");
  CHECK(stuck["op"]["group"] == "world");
  CHECK(stuck["op"]["seq"] == 1);
  CHECK(stuck["op"]["index"] == 1);
  CHECK(stuck["op"]["source"] == "scenarios/corpus/head-to-head-sends.yaml:11:5");
  CHECK(stuck["waiting_for"] == nlohmann::json::array({1}));
  CHECK(report["version"] == "0.1.0");
}

TEST_CASE("several inputs give a JSON array and a summary line") {
  const Run run = lockstep({"check", "scenarios/corpus", "--quiet", "--json", "-"});
  const nlohmann::json report = nlohmann::json::parse(run.out);
  REQUIRE(report.is_array());
  size_t files = 0;  // one report per scenario file under the folder
  for (const auto& entry : std::filesystem::directory_iterator("scenarios/corpus")) files += entry.path().extension() == ".yaml";
  CHECK(files >= 8);
  CHECK(report.size() == files);
  CHECK(run.code == EXIT_BUG);
}

TEST_CASE("--check-expect exits 0 when every verdict matches expect") {
  const Run run = lockstep({"check", "scenarios", "--check-expect", "--quiet"});
  CHECK(run.err == "");
  CHECK(run.code == EXIT_NO_BUG);
  CHECK(run.out.find("not as expected") != std::string::npos);
}

TEST_CASE("a malformed scenario exits 2 with file:line:col") {
  const std::string path = temp_file("bad.yaml", "scenario: bad\nworld: 2\nprogram:\n  - allreduc: {size: 4}\n");
  const Run run = lockstep({"check", path});
  CHECK(run.code == EXIT_BAD_INPUT);
  CHECK(run.err.rfind(path + ":4:5: error: unknown operation 'allreduc'", 0) == 0);
}

TEST_CASE("a run-time error in the scenario exits 2 with its location") {
  const std::string path = temp_file("div.yaml", "scenario: div\nworld: 2\nprogram:\n  - compute: \"10ms / rank\"\n");
  const Run run = lockstep({"check", path});
  CHECK(run.code == EXIT_BAD_INPUT);
  CHECK(run.err.rfind(path + ":4:", 0) == 0);
  CHECK(run.err.find("division by zero (on rank 0)") != std::string::npos);
}

TEST_CASE("usage errors exit 2") {
  CHECK(lockstep({}).code == EXIT_BAD_INPUT);
  CHECK(lockstep({"frobnicate"}).err == "lockstep: error: unknown verb 'frobnicate'; verbs: check, explain, export, import, record, replay, run, "
                                            "sweep, validate\nrun 'lockstep --help' for usage\n");
  CHECK(lockstep({"check", "x.yaml", "--strategy", "bfs"}).code == EXIT_BAD_INPUT);
  CHECK(lockstep({"check", "x.yaml", "--max-executions", "many"}).code == EXIT_BAD_INPUT);
  CHECK(lockstep({"check", "--wat", "x.yaml"}).code == EXIT_BAD_INPUT);
  const Run missing = lockstep({"check", "does-not-exist.yaml"});
  CHECK(missing.code == EXIT_BAD_INPUT);
  CHECK(missing.err == "does-not-exist.yaml: error: cannot read file: No such file or directory\n");
}

TEST_CASE("--max-bugs 1 stops at the first bug: exit 1, not exhaustive, the bound named") {
  CHECK(lockstep({"check", "x.yaml", "--max-bugs", "0"}).code == EXIT_BAD_INPUT);
  const Run run = lockstep({"check", "scenarios/examples/wildcard-race.yaml", "--max-bugs", "1", "--json", "-"});
  CHECK(run.code == EXIT_BUG);
  const nlohmann::json report = nlohmann::json::parse(run.out);
  CHECK(report["verdict"] == "hang");
  CHECK(report["exhaustive"] == false);
  CHECK(report["bound_hit"] == "--max-bugs 1");
  CHECK(report["bugs"].size() == 1);
}

TEST_CASE("--symmetry explores once what renaming symmetric ranks repeats, and says which") {
  const std::string gather = "scenarios/examples/wildcard-gather.yaml";
  const Run plain = lockstep({"check", gather, "--json", "-"});
  const Run symmetric = lockstep({"check", gather, "--symmetry", "--json", "-"});
  CHECK(symmetric.code == EXIT_NO_BUG);
  const nlohmann::json a = nlohmann::json::parse(plain.out), b = nlohmann::json::parse(symmetric.out);
  CHECK(b["verdict"] == a["verdict"]);
  CHECK(b["exhaustive"] == true);
  CHECK(b["stats"]["symmetry"]["classes"] == nlohmann::json::array({"1-3"}));
  CHECK(b["stats"]["executions"] < a["stats"]["executions"]);
  CHECK_FALSE(a["stats"].contains("symmetry"));
  const Run text = lockstep({"check", gather, "--symmetry"});
  CHECK(text.out.find("  symmetric ranks: 1-3 (a bug shown on one rank of a class stands for the same on the others)\n") !=
        std::string::npos);
  const Run none = lockstep({"check", "scenarios/examples/wildcard-race.yaml", "--symmetry", "--json", "-"});
  CHECK(nlohmann::json::parse(none.out)["stats"]["symmetry"]["none_because"] ==
        "no two ranks' programs are equal up to their rank numbers");
}

TEST_CASE("-D overrides a parameter") {
  const Run fewer = lockstep({"check", "scenarios/corpus/uneven-batches.yaml", "-D", "batches=1", "--quiet"});
  // With one batch rank 3 issues no all-reduce at all; the others still wait in #1.
  CHECK(fewer.code == EXIT_BUG);
  const Run json = lockstep({"check", "scenarios/corpus/uneven-batches.yaml", "-Dbatches=1", "--json", "-"});
  CHECK(nlohmann::json::parse(json.out)["bugs"][0]["stuck"][0]["op"]["seq"] == 1);
}

TEST_CASE("--json FILE writes the whole report") {
  const std::string path = (test_dir() / "report.json").string();
  std::filesystem::remove(path);
  const Run run = lockstep({"check", "scenarios/corpus/uneven-batches-join.yaml", "--json", path});
  CHECK(run.code == EXIT_NO_BUG);
  std::ifstream file(path);
  const nlohmann::json report = nlohmann::json::parse(file);
  CHECK(report["verdict"] == "ok");
  CHECK_FALSE(std::filesystem::exists(path + ".tmp"));
}

TEST_CASE("validate and check warn of an exit before queued GPU work, exit codes unchanged") {
  const std::string path = temp_file("queued-work.yaml",
                                     "scenario: t\nworld: 2\nprogram:\n  - allreduce: {size: 1MiB}\n  - exit\n");
  const Run validated = lockstep({"validate", path});
  CHECK(validated.code == EXIT_NO_BUG);
  CHECK(validated.err.starts_with(path + ":5:5: warning: exit follows GPU work the host has not waited for "
                                         "(allreduce at " + path + ":4:5)"));
  const Run checked = lockstep({"check", path});
  CHECK(checked.code == EXIT_NO_BUG);
  CHECK(checked.err.find(path + ":5:5: warning: exit follows") != std::string::npos);
  CHECK(lockstep({"validate", path, "--quiet"}).err.empty());
}

TEST_CASE("validate accepts the corpus and rejects bad input") {
  CHECK(lockstep({"validate", "scenarios", "--quiet"}).code == EXIT_NO_BUG);
  CHECK(lockstep({"validate", "tests/bad"}).code == EXIT_BAD_INPUT);
}

TEST_CASE("run prints each rank's finish time and writes a timeline") {
  const std::string timeline = (test_dir() / "t.json").string();
  std::filesystem::create_directories(std::filesystem::path(timeline).parent_path());
  const Run run = lockstep({"run", "scenarios/corpus/uneven-batches-join.yaml", "--timeline", timeline});
  CHECK(run.code == EXIT_NO_BUG);
  CHECK(run.out.find("completed: step time") != std::string::npos);
  std::ifstream file(timeline);
  const nlohmann::json trace = nlohmann::json::parse(file);
  CHECK(trace["traceEvents"].is_array());
  const Run hang = lockstep({"run", "scenarios/corpus/uneven-batches.yaml"});
  CHECK(hang.code == EXIT_BUG);
  CHECK(hang.out.find("hang:\n  ranks 0-2 wait in allreduce #3 on world") != std::string::npos);
}

}  // namespace lockstep::cli

namespace lockstep::cli {

TEST_CASE("--cex-dir writes a counterexample that replay --sim confirms and explain explains") {
  const std::filesystem::path dir = test_dir() / "cex";
  std::filesystem::remove_all(dir);
  const Run check = lockstep({"check", "scenarios/examples/wildcard-race.yaml", "--cex-dir", dir.string()});
  REQUIRE(check.code == EXIT_BUG);
  const std::string cex = (dir / "wildcard-race-1.json").generic_string();
  CHECK(check.out.find("  replay: lockstep replay " + cex + " --sim\n") != std::string::npos);
  std::ifstream file(cex);
  const nlohmann::json json = nlohmann::json::parse(file);
  CHECK(json["schedule"] == "lockstep-schedule/2:M0.0.2");
  CHECK(json["bug"]["kind"] == "hang");
  CHECK(json["ranks"][0]["stuck_in"] == nlohmann::json::array({1}));
  CHECK(json["ranks"][0]["ops"][0]["matched"] == 2);

  const Run replay = lockstep({"replay", cex, "--sim"});
  CHECK(replay.code == EXIT_BUG);
  CHECK(replay.out.rfind("CONFIRMED (sim): hang\n", 0) == 0);
  // The replay explains the bug in the same words as the check.
  const std::string explanation = check.out.substr(check.out.find('\n') + 1);
  CHECK(replay.out.find(explanation.substr(0, explanation.find("  replay:"))) != std::string::npos);

  const std::string dot = (dir / "graph.dot").generic_string();
  const Run explain = lockstep({"explain", cex, "--dot", dot});
  CHECK(explain.code == EXIT_BUG);
  CHECK(explain.out.find("wait-for graph:\n  rank 0 -> rank 2: recv from rank 2 on world") != std::string::npos);
  std::ifstream graph(dot);
  std::string first_line;
  std::getline(graph, first_line);
  CHECK(first_line == "digraph G {");

  // Same input, same bytes.
  const std::filesystem::path again = dir / "again";
  lockstep({"check", "scenarios/examples/wildcard-race.yaml", "--cex-dir", again.string()});
  std::ifstream a(cex), b(again / "wildcard-race-1.json");
  CHECK(std::string(std::istreambuf_iterator<char>(a), {}) == std::string(std::istreambuf_iterator<char>(b), {}));
}

TEST_CASE("replay of a schedule that leads elsewhere is not a confirmation") {
  const std::filesystem::path dir = test_dir() / "cex-edit";
  std::filesystem::remove_all(dir);
  lockstep({"check", "scenarios/examples/wildcard-race.yaml", "--cex-dir", dir.string()});
  const std::string cex = (dir / "wildcard-race-1.json").generic_string();
  std::ifstream in(cex);
  nlohmann::json json = nlohmann::json::parse(in);
  json["schedule"] = "lockstep-schedule/2:M0.0.1";  // the wildcard takes rank 1: it completes
  std::ofstream(cex) << json.dump();
  const Run replay = lockstep({"replay", cex, "--sim"});
  CHECK(replay.code == EXIT_NO_BUG);
  CHECK(replay.out == "NOT REPRODUCED (sim): the execution completed\n");
  json["schedule"] = "not a schedule";
  std::ofstream(cex) << json.dump();
  CHECK(lockstep({"replay", cex, "--sim"}).code == EXIT_BAD_INPUT);
  CHECK(lockstep({"replay", "does-not-exist.json", "--sim"}).err ==
        "does-not-exist.json: error: cannot read file: No such file or directory\n");
}

}  // namespace lockstep::cli

namespace lockstep::cli {

TEST_CASE("--junit writes one testcase per input, failing where the exit code would") {
  const std::string path = (test_dir() / "junit.xml").string();
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  lockstep({"check", "scenarios/corpus/head-to-head-sends.yaml", "scenarios/corpus/head-to-head-sends-ordered.yaml",
            "--junit", path, "--quiet"});
  std::ifstream file(path);
  const std::string xml(std::istreambuf_iterator<char>(file), {});
  CHECK(xml.find("<testsuite name=\"lockstep\" tests=\"2\" failures=\"1\">") != std::string::npos);
  CHECK(xml.find("<testcase classname=\"scenarios/corpus/head-to-head-sends.yaml\" name=\"head-to-head-sends\">"
                 "<failure message=\"deadlock\">") != std::string::npos);
  CHECK(xml.find("name=\"head-to-head-sends-ordered\"></testcase>") != std::string::npos);
  // With --check-expect a bug that is expected passes.
  lockstep({"check", "scenarios/corpus/head-to-head-sends.yaml", "--junit", path, "--check-expect", "--quiet"});
  std::ifstream again(path);
  CHECK(std::string(std::istreambuf_iterator<char>(again), {}).find("failures=\"0\"") != std::string::npos);
}

TEST_CASE("GitHub Actions annotations point at the YAML line of each stuck op") {
  ::setenv("GITHUB_ACTIONS", "true", 1);
  const Run run = lockstep({"check", "scenarios/corpus/uneven-batches.yaml", "--quiet"});
  ::unsetenv("GITHUB_ACTIONS");
  CHECK(run.out.find("::error file=scenarios/corpus/uneven-batches.yaml,line=15,col=9,title=lockstep hang::ranks 0-2 "
                     "wait in allreduce #3 on world") != std::string::npos);
}

}  // namespace lockstep::cli

namespace lockstep::cli {

namespace {

// A recorded schedule of 64 ranks: four (compute, all-reduce) steps each, then ranks 2 and 5
// send to each other before they receive (the deadlock at lines 28 and 56); the others compute.
std::string recorded_deadlock_trace() {
  std::string text = R"({"lockstep_trace": 1, "scenario": "dp", "world": 64})" "\n";
  for (int r = 0; r < 64; ++r) {
    const std::string rank = "{\"rank\": " + std::to_string(r) + ", ";
    for (int i = 0; i < 4; ++i) {
      text += rank + R"("op": "compute", "duration_ns": 1000})" "\n";
      text += rank + R"("op": "allreduce", "size": 1024})" "\n";
    }
    if (r == 2 || r == 5) {
      const std::string peer = r == 2 ? "5" : "2";
      text += rank + R"("op": "send", "to": )" + peer + R"(, "size": 64})" "\n";
      text += rank + R"("op": "recv", "from": )" + peer + R"(, "size": 64})" "\n";
    } else {
      text += rank + R"("op": "compute", "duration_ns": 1000})" "\n";
    }
  }
  return text;
}

std::string read_all(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(file), {});
}

}  // namespace

TEST_CASE("check --minimize writes the minimized trace beside the counterexample, and it shows the same bug") {
  const std::string input = temp_file("dp.jsonl", recorded_deadlock_trace());
  const std::filesystem::path dir = test_dir() / "min";
  std::filesystem::remove_all(dir);
  const Run check = lockstep({"check", input, "--cex-dir", dir.string(), "--minimize"});
  REQUIRE(check.code == EXIT_BUG);
  const std::string trace = (dir / "dp-1.min.jsonl").generic_string();
  CHECK(check.out.find("  minimized: 2 ranks, 2 ops of 64 ranks, 578 ops (") != std::string::npos);
  CHECK(check.out.find(" re-checks): " + trace + "\n") != std::string::npos);

  // The counterexample says where each remaining op came from.
  const nlohmann::json cex = nlohmann::json::parse(read_all((dir / "dp-1.json").string()));
  CHECK(cex["minimized"]["trace"] == trace);
  CHECK(cex["minimized"]["ops"] == 2);
  CHECK(cex["minimized"]["of_ops"] == 578);
  CHECK(cex["minimized"]["budget_hit"] == false);
  CHECK(cex["minimized"]["sources"] == nlohmann::json::array({input + ":28:13", input + ":56:13"}));
  CHECK(lockstep({"replay", (dir / "dp-1.json").string(), "--sim"}).code == EXIT_BUG);

  // Checked on its own, the minimized trace deadlocks the same two ranks in the same sends.
  const Run again = lockstep({"check", trace, "--json", "-"});
  CHECK(again.code == EXIT_BUG);
  const nlohmann::json report = nlohmann::json::parse(again.out);
  CHECK(report["verdict"] == "deadlock");
  CHECK(report["matches_expected"] == true);
  CHECK(report["bugs"][0]["cycle"] == nlohmann::json::array({2, 5, 2}));
  CHECK(report["bugs"][0]["stuck"][0]["op"]["source"] == trace + ":2:13");
  CHECK(report["bugs"][0]["stuck"][1]["op"]["source"] == trace + ":3:13");

  // Same input, same bytes.
  const std::filesystem::path dir2 = dir / "again";
  lockstep({"check", input, "--cex-dir", dir2.string(), "--minimize"});
  CHECK(read_all(trace) == read_all((dir2 / "dp-1.min.jsonl").string()));
}

TEST_CASE("check --minimize-budget bounds the re-checks and the report says when it stopped there") {
  const std::string input = temp_file("dp.jsonl", recorded_deadlock_trace());
  const std::filesystem::path dir = test_dir() / "min-budget";
  std::filesystem::remove_all(dir);
  const Run check = lockstep({"check", input, "--cex-dir", dir.string(), "--minimize", "--minimize-budget", "2"});
  CHECK(check.code == EXIT_BUG);
  CHECK(check.out.find(" (2 re-checks); stopped at the budget of 2 re-checks (--minimize-budget): ") != std::string::npos);
  const nlohmann::json cex = nlohmann::json::parse(read_all((dir / "dp-1.json").string()));
  CHECK(cex["minimized"]["budget_hit"] == true);
  CHECK(cex["minimized"]["rechecks"] == 2);
  CHECK(lockstep({"check", (dir / "dp-1.min.jsonl").string(), "--quiet"}).code == EXIT_BUG);
}

TEST_CASE("check --minimize on a scripted scenario says it applies to recorded schedules only") {
  const std::filesystem::path dir = test_dir() / "min-scripted";
  std::filesystem::remove_all(dir);
  const Run check = lockstep({"check", "scenarios/examples/wildcard-race.yaml", "--cex-dir", dir.string(), "--minimize"});
  CHECK(check.code == EXIT_BUG);
  CHECK(check.out.find("  not minimized: --minimize applies to recorded schedules only, and "
                       "scenarios/examples/wildcard-race.yaml is not one") != std::string::npos);
  CHECK(!std::filesystem::exists(dir / "wildcard-race-1.min.jsonl"));
  CHECK(std::filesystem::exists(dir / "wildcard-race-1.json"));
}

TEST_CASE("--minimize needs --cex-dir, and --minimize-budget needs --minimize and at least 1") {
  const Run no_dir = lockstep({"check", "scenarios/corpus/head-to-head-sends.yaml", "--minimize"});
  CHECK(no_dir.code == EXIT_BAD_INPUT);
  CHECK(no_dir.err.rfind("lockstep: error: --minimize needs --cex-dir DIR (the minimized trace goes there)\n", 0) == 0);
  const Run no_minimize = lockstep({"check", "scenarios/corpus/head-to-head-sends.yaml", "--minimize-budget", "5"});
  CHECK(no_minimize.code == EXIT_BAD_INPUT);
  CHECK(no_minimize.err.rfind("lockstep: error: --minimize-budget needs --minimize\n", 0) == 0);
  const Run zero = lockstep({"check", "x.yaml", "--cex-dir", "d", "--minimize", "--minimize-budget", "0"});
  CHECK(zero.code == EXIT_BAD_INPUT);
  CHECK(zero.err.rfind("lockstep: error: --minimize-budget must be at least 1\n", 0) == 0);
}

}  // namespace lockstep::cli

namespace lockstep::cli {

namespace {

// replay --mpi runs mpirun and the worker beside the test binary; skip where either is missing.
// The watchdog is 3 s: 100 MiB ops on 4 ranks that share two cores with other tests can go a
// second without any request completing, which a 1 s watchdog takes for a hang.
// Quick replays (docs/replay.md): sizes compacted, so that a busy machine cannot hold a large
// transfer past the watchdog.
struct CompactSizes {
  CompactSizes() { ::setenv("LOCKSTEP_REPLAY_COMPACT", "1", 1); }
  ~CompactSizes() { ::unsetenv("LOCKSTEP_REPLAY_COMPACT"); }
};

bool mpi_replay_available() {
  if (std::system("command -v mpirun >/dev/null 2>&1") != 0) {
    MESSAGE("skipped: mpirun not found (scripts/setup installs openmpi-bin libopenmpi-dev)");
    return false;
  }
  if (!std::filesystem::exists(std::filesystem::path(LOCKSTEP_BINARY).parent_path() / "lockstep-mpi-replay")) {
    MESSAGE("skipped: lockstep-mpi-replay was not built (CMake found no MPI)");
    return false;
  }
  return true;
}

}  // namespace

TEST_CASE("replay --mpi: head-to-head sends deadlock where predicted, the grouped fix completes") {
  if (!mpi_replay_available()) return;
  const CompactSizes compact;
  const Run bug = lockstep({"replay", "scenarios/corpus/head-to-head-sends.yaml", "--mpi", "--timeout", "3", "--quiet"});
  CHECK_MESSAGE(bug.code == EXIT_BUG, bug.out);
  CHECK(bug.out.find("CONFIRMED (mpi): deadlock: rank 0 send to rank 1 #1 on world (op 1); rank 1 send to rank 0 #1 on "
                     "world (op 1) hung, matches prediction\n") != std::string::npos);
  const Run fixed = lockstep({"replay", "scenarios/corpus/head-to-head-sends-fixed.yaml", "--mpi", "--timeout", "3", "--quiet"});
  CHECK_MESSAGE(fixed.code == EXIT_NO_BUG, fixed.out);
  CHECK(fixed.out.find("NOT REPRODUCED (mpi): every rank completed, data correct\n") != std::string::npos);
}

TEST_CASE("replay --mpi: a size mismatch fails or hangs at the mismatched all-reduce") {
  if (!mpi_replay_available()) return;
  const CompactSizes compact;
  const Run run = lockstep({"replay", "scenarios/corpus/allreduce-size-differs.yaml", "--mpi", "--timeout", "3", "--quiet"});
  CHECK_MESSAGE(run.code == EXIT_BUG, run.out);
  CHECK(run.out.find("CONFIRMED (mpi): mismatch: ") != std::string::npos);
  CHECK(run.out.find("failed: rank 0 allreduce #1 on pp (op 2): MPI error: MPI_ERR_TRUNCATE") != std::string::npos);
}

TEST_CASE("replay --mpi: what MPI cannot express is undecided, with why") {
  // Decided before anything is launched: runs with or without MPI.
  const std::filesystem::path dir = test_dir() / "mpi-cannot";
  std::filesystem::remove_all(dir);
  REQUIRE(lockstep({"check", "scenarios/corpus/init-missing-process.yaml", "--cex-dir", dir.string()}).code == EXIT_BUG);
  const Run run = lockstep({"replay", (dir / "init-missing-process-1.json").string(), "--mpi"});
  CHECK(run.code == EXIT_INCONCLUSIVE);
  CHECK(run.out.find("UNDECIDED (mpi): cannot express: a broken launch: no process is started for rank 3") !=
        std::string::npos);
  CHECK(lockstep({"replay", "scenarios/corpus/uneven-batches.yaml", "--mpi", "--timeout", "0"}).code == EXIT_BAD_INPUT);
}

namespace {

// Text that one thread writes through an ostream while another reads it.
class SharedText : public std::streambuf {
 public:
  std::string text() const {
    const std::lock_guard<std::mutex> lock(mutex_);
    return text_;
  }

 protected:
  int_type overflow(int_type c) override {
    if (traits_type::eq_int_type(c, traits_type::eof())) return traits_type::not_eof(c);
    const std::lock_guard<std::mutex> lock(mutex_);
    text_.push_back(traits_type::to_char_type(c));
    return c;
  }
  std::streamsize xsputn(const char* s, std::streamsize n) override {
    const std::lock_guard<std::mutex> lock(mutex_);
    text_.append(s, static_cast<size_t>(n));
    return n;
  }

 private:
  mutable std::mutex mutex_;
  std::string text_;
};

struct Interrupted {
  int code = -1;
  std::string err;
};

// Runs `lockstep ARGS` on a thread of this process and sends the process SIGINT once `ready`
// appears on its stderr (or after 120 s), as a user's Ctrl-C would. run_cli holds the handlers
// from before it loads until it returns, so the signal meets lockstep's handler, not the test
// runner's.
Interrupted interrupted_run(const std::vector<std::string>& args, const std::string& ready) {
  SharedText err_text;
  std::ostream err(&err_text);
  std::ostringstream out;
  Interrupted result;
  std::atomic<bool> done{false};
  std::thread check([&] {
    result.code = run_cli(args, out, err);
    done = true;
  });
  const auto start = std::chrono::steady_clock::now();
  while (!done && err_text.text().find(ready) == std::string::npos &&
         std::chrono::steady_clock::now() - start < std::chrono::seconds(120)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (!done) ::kill(::getpid(), SIGINT);
  check.join();
  result.err = err_text.text();
  return result;
}

// A checkpoint thread sharing the main thread's current stream on 4 ranks, 3 steps: 614,656
// executions, minutes on a debug build. `hang`: rank 0 then issues an all-reduce no other
// rank issues (every execution is stuck).
std::string long_search(bool hang) {
  std::string text = R"Y(scenario: long
world: 4
groups: {ckpt: [0, 1, 2, 3]}
threads:
  main:
    - repeat: 3
      do: [{compute: 20ms}, {allreduce: {size: 128MiB}}]
)Y";
  if (hang) text += "    - if: \"rank == 0\"\n      then: [{allreduce: {size: 4}}]\n";
  text += R"Y(  ckpt:
    - sleep: 25ms
    - allgather: {group: ckpt, size: 16MiB, stream: ckpt_s, async: ag}
    - allreduce: {group: ckpt, size: 4B, stream: ckpt_s, async: bar}
    - sync: ckpt_s
)Y";
  return text;
}

}  // namespace

TEST_CASE("SIGINT stops check after the execution under way: partial report, interrupted, exit 3") {
  const std::string input = temp_file("long.yaml", long_search(false));
  const std::string json = (test_dir() / "interrupted.json").string();
  const std::string junit = (test_dir() / "interrupted.xml").string();
  const Interrupted run = interrupted_run({"check", input, "--progress", "--json", json, "--junit", junit}, "executions,");
  INFO(run.err);
  CHECK(run.code == EXIT_INCONCLUSIVE);
  REQUIRE(std::filesystem::exists(json));
  std::ifstream in(json);
  const nlohmann::json report = nlohmann::json::parse(in);
  CHECK(report["verdict"] == "inconclusive");
  CHECK(report["interrupted"] == true);
  CHECK(report["exhaustive"] == false);
  CHECK(report["stats"]["executions"].get<uint64_t>() > 0);
  CHECK(std::filesystem::exists(junit));
  for (const auto& entry : std::filesystem::directory_iterator(test_dir())) {
    CHECK(entry.path().extension() != ".tmp");
  }
}

TEST_CASE("SIGINT after a bug was found: the bug is reported, exit 1") {
  const std::string input = temp_file("long-hang.yaml", long_search(true));
  const std::string json = (test_dir() / "interrupted-hang.json").string();
  const std::string cex = (test_dir() / "interrupted-cex").string();
  const Interrupted run = interrupted_run({"check", input, "--progress", "--patience", "0", "--json", json, "--cex-dir", cex},
                                          "executions,");
  INFO(run.err);
  CHECK(run.code == EXIT_BUG);
  REQUIRE(std::filesystem::exists(json));
  std::ifstream in(json);
  const nlohmann::json report = nlohmann::json::parse(in);
  CHECK(report["verdict"] != "inconclusive");  // the extra all-reduce hangs or deadlocks, by the order
  CHECK(report["interrupted"] == true);
  REQUIRE(report["bugs"].size() >= 1);
  CHECK(std::filesystem::exists(report["bugs"][0]["counterexample"].get<std::string>()));
}

}  // namespace lockstep::cli

namespace lockstep::cli {

TEST_CASE("--time-budget: a search past it, or one execution past it, is inconclusive naming the bound") {
  const std::string search = temp_file("long-budget.yaml", long_search(false));
  const Run many = lockstep({"check", search, "--time-budget", "0.5", "--json", "-"});
  CHECK(many.code == EXIT_INCONCLUSIVE);
  const nlohmann::json report = nlohmann::json::parse(many.out);
  CHECK(report["verdict"] == "inconclusive");
  CHECK(report["exhaustive"] == false);
  CHECK(report["bound_hit"] == "--time-budget 0.5");
  // One execution of 10^8 all-reduces: the bound holds inside it.
  const std::string endless = temp_file(
      "endless.yaml", "scenario: endless\nworld: 2\nprogram:\n  - repeat: 100000000\n    do: [{allreduce: {size: 4}}]\n");
  const Run one = lockstep({"check", endless, "--time-budget", "0.3", "--max-ops", "1000000000000"});
  CHECK(one.code == EXIT_INCONCLUSIVE);
  CHECK(one.out.find("bound hit: the time budget ran out inside an execution") != std::string::npos);
  // The default bound, in the help.
  CHECK(lockstep({"--help"}).out.find("--time-budget S        bound on the search's wall time in seconds, per input (default 600") !=
        std::string::npos);
}

}  // namespace lockstep::cli

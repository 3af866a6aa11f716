// lockstep-mpi under mpirun: sweep --mpi and check --mpi print what one process prints. Skip
// without mpirun or lockstep-mpi (built where CMake finds MPI).
#include <sys/wait.h>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "cli/cli.h"
#include "tests/testing.h"

namespace lockstep::cli {
namespace {

bool lockstep_mpi_available() {
  const std::filesystem::path mpi = std::filesystem::path(LOCKSTEP_BINARY).parent_path() / "lockstep-mpi";
  if (std::system("command -v mpirun >/dev/null 2>&1") == 0 && std::filesystem::exists(mpi)) return true;
  MESSAGE("skipped: no mpirun or no lockstep-mpi (scripts/setup installs openmpi-bin libopenmpi-dev)");
  return false;
}

// `mpirun -np N [MPIRUN_FLAGS] [LAUNCHER] lockstep ARGS`: its exit code, stdout and stderr. A
// job that has not ended after 7 minutes is killed (code 124): a hang fails its test with what
// the ranks printed, not the whole run at ctest's limit.
testing::CliRun under_mpirun(int ranks, const std::vector<std::string>& args, const std::string& name,
                             const std::string& mpirun_flags = "", const std::string& launcher = "") {
  const std::filesystem::path dir = testing::fresh_temp_dir("mpi", name);
  std::string command = "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 "
                        "OMPI_MCA_btl_vader_single_copy_mechanism=none OMPI_MCA_mpi_yield_when_idle=1 "
                        "OMPI_MCA_orte_tmpdir_base=" + dir.string() + " ASAN_OPTIONS=detect_leaks=0 timeout -k 10 420 mpirun -np " +
                        std::to_string(ranks) + " " + mpirun_flags + " " + launcher + " " + LOCKSTEP_BINARY;
  for (const std::string& arg : args) command += " '" + arg + "'";
  command += " > " + (dir / "out.txt").string() + " 2> " + (dir / "err.txt").string();
  const int status = std::system(command.c_str());
  testing::CliRun ran;
  ran.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  ran.out = testing::file_bytes(dir / "out.txt");
  ran.err = testing::file_bytes(dir / "err.txt");
  return ran;
}

// A --json report without what differs from run to run or with the work's spread: the seconds
// and the parts (each line's trailing comma dropped: "parts" follows "strategy" in one of them).
std::string without_timing(const std::string& json) {
  std::string kept;
  std::istringstream lines(json);
  for (std::string line; std::getline(lines, line);) {
    if (line.find("\"seconds\"") != std::string::npos || line.find("\"parts\"") != std::string::npos) continue;
    if (!line.empty() && line.back() == ',') line.pop_back();
    kept += line + "\n";
  }
  return kept;
}

// `check ARGS --json DIR/alone.json` in this process, and the same with `--json DIR/spread.json
// --mpi` under mpirun.
testing::CliRun alone_with_json(std::vector<std::string> args, const std::filesystem::path& dir) {
  args.insert(args.end(), {"--json", (dir / "alone.json").string()});
  return testing::run_lockstep(args);
}

testing::CliRun spread_with_json(std::vector<std::string> args, const std::filesystem::path& dir, int ranks,
                                 const std::string& name) {
  args.insert(args.end(), {"--json", (dir / "spread.json").string(), "--mpi"});
  return under_mpirun(ranks, args, name);
}

// A launcher that runs a command, and for MPI rank `rank` does `action` to it (a shell command
// reading $pid) once the rank explores a piece: it then has at least 4 threads (MPI's two, the
// main one and the one a worker runs its piece on), looked at every 0.02 s. A process that ends
// first (state Z) is left as it ended. The launcher exits as the command did.
std::filesystem::path rank_launcher(const std::filesystem::path& path, int rank, const std::string& action) {
  std::ofstream(path) << "#!/bin/sh\n"
                         "[ \"$OMPI_COMM_WORLD_RANK\" = " << rank << " ] || exec \"$@\"\n"
                         "\"$@\" & pid=$!\n"
                         "while :; do\n"
                         "  set -- $(awk '/^State:/ {s = $2} /^Threads:/ {t = $2} END {print s, t}' /proc/$pid/status"
                         " 2> /dev/null) Z 0\n"
                         "  [ \"$1\" = Z ] || [ \"$2\" -ge 4 ] && break\n"
                         "  sleep 0.02\n"
                         "done\n"
                      << action << " 2> /dev/null\n"
                         "wait $pid\n";
  std::filesystem::permissions(path, std::filesystem::perms::owner_all);
  return path;
}

// The same, killing rank 2 (-9).
std::filesystem::path rank_2_killer(const std::filesystem::path& path) { return rank_launcher(path, 2, "kill -9 $pid"); }

// Rank 0's `receives` wildcard receives against a send from each other rank of `world`.
std::string gather_yaml(int world, int receives) {
  return "scenario: gather\nworld: " + std::to_string(world) + "\nprogram:\n  - if: \"rank == 0\"\n    then: [{repeat: " +
         std::to_string(receives) + ", do: [recv: {from: any, size: 1KiB}]}]\n    else: [send: {to: 0, size: 1KiB}]\n";
}

// A checkpoint thread's all-gather on the training job's communicator, `steps` training steps
// on each of `world` ranks: some orders of the two threads' collectives mismatch across ranks.
std::string ckpt_yaml(int world, int steps) {
  return "scenario: ckpt-same-comm\nworld: " + std::to_string(world) + "\nparams: {steps: " + std::to_string(steps) +
         "}\nthreads:\n  main: [{repeat: steps, do: [{compute: 20ms}, {allreduce: {size: 128MiB}}]}]\n"
         "  ckpt: [{sleep: 25ms}, {allgather: {size: 16MiB, stream: ckpt_s, async: ag}}, {wait: ag}]\n";
}

}  // namespace

TEST_CASE("sweep --mpi: four MPI ranks print the report of one process") {
  if (!lockstep_mpi_available()) return;
  const std::vector<std::string> sweep = {"sweep", "scenarios/examples/pipeline-interleaved-sweep.yaml", "-D", "pp=2..4",
                                          "-D", "chunks=2,3", "-D", "microbatches=2..9", "--where", "microbatches > pp"};
  const testing::CliRun alone = testing::run_lockstep(sweep);
  REQUIRE(alone.code == EXIT_BUG);
  std::vector<std::string> args = sweep;
  args.push_back("--mpi");
  const testing::CliRun spread = under_mpirun(4, args, "sweep");
  INFO(spread.err);
  CHECK(spread.code == EXIT_BUG);
  CHECK(spread.out == alone.out);
}

TEST_CASE("check --mpi: the inputs of a folder spread over three ranks, any strategy, report what one process does") {
  if (!lockstep_mpi_available()) return;
  // The corpus's checkpoint-thread and head-to-head scenarios (bugs and fixes, dpor), a wildcard
  // gather of a few thousand executions, and a file that does not load.
  const std::filesystem::path dir = testing::fresh_temp_dir("mpi", "inputs");
  for (const char* name : {"checkpoint-thread-same-group", "checkpoint-thread-same-group-fixed", "head-to-head-sends",
                           "head-to-head-sends-fixed"}) {
    std::filesystem::copy_file(std::string("scenarios/corpus/") + name + ".yaml", dir / (std::string(name) + ".yaml"));
  }
  std::ofstream(dir / "gather.yaml") << gather_yaml(11, 10);
  std::ofstream(dir / "bad.yaml") << "scenario: bad\nworld: 2\nprogram:\n  - allreduce: {size: }\n";
  const std::vector<std::string> check = {"check", dir.string(), "--cex-dir", (dir / "cex").string(), "--force"};
  const testing::CliRun alone = alone_with_json(check, dir);
  REQUIRE(alone.code == EXIT_BAD_INPUT);  // the bad file; the others have their verdicts
  std::map<std::string, std::string> counterexamples;
  for (const auto& file : std::filesystem::directory_iterator(dir / "cex")) {
    counterexamples[file.path().filename().string()] = testing::file_bytes(file.path());
  }
  CHECK(counterexamples.size() >= 2);
  const testing::CliRun spread = spread_with_json(check, dir, 3, "inputs-run");
  INFO(spread.err);
  CHECK(spread.code == alone.code);
  CHECK(spread.out == alone.out);
  CHECK(alone.out.find("gather.yaml: ok (no expectation) [4098 executions, exhaustive]") != std::string::npos);
  CHECK(spread.err.find(alone.err) != std::string::npos);  // mpirun adds its own lines
  const std::string mine = without_timing(testing::file_bytes(dir / "alone.json"));
  CHECK(mine.find("\"fingerprint\"") != std::string::npos);
  CHECK(without_timing(testing::file_bytes(dir / "spread.json")) == mine);
  for (const auto& [name, bytes] : counterexamples) CHECK(testing::file_bytes(dir / "cex" / name) == bytes);
}

TEST_CASE("check --mpi: a dfs search of 100,000 executions over four ranks reports what one process does") {
  if (!lockstep_mpi_available()) return;
  const std::filesystem::path dir = testing::fresh_temp_dir("mpi", "gather");
  // Rank 0's ten wildcard receives against nine senders: 9! = 362,880 matchings, cut at 100,000
  // executions (--patience 0: every one of them, though no new bug class comes after the
  // first), each a hang in the tenth receive.
  std::ofstream(dir / "gather.yaml") << gather_yaml(10, 10);
  const std::vector<std::string> check = {"check", (dir / "gather.yaml").string(), "--strategy", "dfs",
                                          "--max-executions", "100000", "--patience", "0"};
  const testing::CliRun alone = alone_with_json(check, dir);
  const testing::CliRun spread = spread_with_json(check, dir, 4, "check");
  INFO(spread.err);
  CHECK(spread.code == alone.code);
  CHECK(spread.out == alone.out);
  CHECK(alone.out.find("100000 executions") != std::string::npos);
  // The budget cuts into a part (8! = 40,320 executions each), which rank 0 explores again up to
  // the cut: the counts and the fingerprint are one process's too.
  const std::string mine = without_timing(testing::file_bytes(dir / "alone.json"));
  CHECK(mine.find("\"fingerprint\"") != std::string::npos);
  CHECK(without_timing(testing::file_bytes(dir / "spread.json")) == mine);

  // A rank killed while it explores a part (mpirun --enable-recovery keeps the others running):
  // rank 0 takes it as lost once it has said nothing for 2 s, its parts are explored again, and
  // the report is the same. (With recovery on, OpenMPI's mpirun exits 0 whatever the ranks'
  // codes.) Killed inside a part, past MPI_Init (a rank killed inside it leaves the others
  // waiting there for good), however fast the build runs the search.
  const std::filesystem::path killer = rank_2_killer(dir / "kill-rank-2.sh");
  std::vector<std::string> args = check;
  args.insert(args.end(), {"--json", (dir / "lossy.json").string(), "--mpi", "--mpi-timeout", "2"});
  const testing::CliRun lossy = under_mpirun(4, args, "lossy", "--enable-recovery", killer.string());
  INFO(lossy.err);
  CHECK(lossy.out == alone.out);
  CHECK(lossy.err.find("lockstep: warning: rank 2 said nothing for 2 s and is taken as lost") != std::string::npos);
  CHECK(without_timing(testing::file_bytes(dir / "lossy.json")) == mine);
}

TEST_CASE("check --mpi: a rank taken as lost that is only stopped is told the job is over") {
  if (!lockstep_mpi_available()) return;
  const std::filesystem::path dir = testing::fresh_temp_dir("mpi", "stopped");
  // Rank 1 stopped for 6 s once it runs a part of a dfs search of 40,320 executions: rank 0
  // takes it as lost after 1.5 s, explores its part again and ends the job without waiting for
  // it; rank 1, going on, finds the word that the job is over and ends too (mpirun waits for it;
  // with recovery on, it exits 0 whatever the ranks' codes).
  std::ofstream(dir / "gather.yaml") << gather_yaml(9, 8);
  const std::vector<std::string> check = {"check", (dir / "gather.yaml").string(), "--strategy", "dfs", "--patience", "0"};
  const testing::CliRun alone = testing::run_lockstep(check);
  REQUIRE(alone.code == EXIT_NO_BUG);
  const std::filesystem::path stopper =
      rank_launcher(dir / "stop-rank-1.sh", 1, "kill -STOP $pid; sleep 6; kill -CONT $pid");
  std::vector<std::string> args = check;
  args.insert(args.end(), {"--mpi", "--mpi-timeout", "1.5"});
  const testing::CliRun stopped = under_mpirun(3, args, "stopped-run", "--enable-recovery", stopper.string());
  INFO(stopped.err);
  CHECK(stopped.code == 0);
  CHECK(stopped.out == alone.out);
  CHECK(stopped.err.find("lockstep: warning: rank 1 said nothing for 1.5 s and is taken as lost; its work (piece") !=
        std::string::npos);
}

TEST_CASE("check --mpi: a search whose work sits in one part is shared out as ranks run dry") {
  if (!lockstep_mpi_available()) return;
  const std::filesystem::path dir = testing::fresh_temp_dir("mpi", "skewed");
  // Rank 0 decides six times whether to take its receives in order; only when it never does
  // are they wildcard receives from nine senders (9! = 362,880 orders): the top of the tree cuts
  // into 7 parts, one of which holds nearly every execution. Ranks that run out of parts take
  // the executions that part has yet to run. Cut at 100,000 executions, inside the parts given
  // away: the merge explores the one it cuts into again, up to the cut, within its bound.
  std::string program = "[{repeat: 9, do: [recv: {from: any, size: 1KiB}]}]";
  for (int i = 0; i < 6; ++i) {
    program = "[{choose: {in_order: [{repeat: 9, as: i, do: [recv: {from: \"i + 1\", size: 1KiB}]}], any_order: " + program + "}}]";
  }
  std::ofstream(dir / "skewed.yaml") << "scenario: skewed\nworld: 10\nprogram:\n"
                                        "  - if: \"rank == 0\"\n"
                                        "    then: " << program << "\n"
                                        "    else: [send: {to: 0, size: 1KiB}]\n";
  const std::vector<std::string> check = {"check", (dir / "skewed.yaml").string(), "--strategy", "dfs",
                                          "--max-executions", "100000"};
  const testing::CliRun alone = alone_with_json(check, dir);
  CHECK(alone.out.find("[100000 executions, bound hit: --max-executions 100000]") != std::string::npos);
  const testing::CliRun spread = spread_with_json(check, dir, 3, "skewed-run");
  INFO(spread.err);
  CHECK(spread.code == alone.code);
  CHECK(spread.out == alone.out);
  const std::string json = testing::file_bytes(dir / "spread.json");
  CHECK(without_timing(json) == without_timing(testing::file_bytes(dir / "alone.json")));
  const size_t at = json.find("\"parts\": ");
  REQUIRE(at != std::string::npos);
  CHECK(std::stoul(json.substr(at + 9)) > 7);  // parts were given away
}

TEST_CASE("check --mpi: a dpor search gives branches to the other ranks and finds what one process does") {
  if (!lockstep_mpi_available()) return;
  const std::filesystem::path dir = testing::fresh_temp_dir("mpi", "dpor");
  // 50,625 executions: past the first 1,000, the search gives branches to the ranks that wait
  // for work, as --jobs gives them to threads.
  std::ofstream(dir / "ckpt.yaml") << ckpt_yaml(4, 2);
  const std::vector<std::string> check = {"check", (dir / "ckpt.yaml").string(), "--patience", "0"};
  // The verdict and every bug's kind and summary, a line each, in one order, with its ranks
  // left out (a failed check prints both texts). Which bug of a class the text shows depends on
  // the order they were found in (the list is sorted only where a branch was given), and the
  // counts on the timing: the JSON's bugs are compared. Which execution shows a bug depends on
  // the timing too: whichever part reaches it first. The bug is the same (a mismatch's
  // signature is its ops' places and sequence number), its summary names the ranks of that
  // execution: rank 1's allreduce against rank 0's allgather in one run, rank 2's in another.
  const auto bugs_of = [](const std::filesystem::path& json) {
    const nlohmann::json report = nlohmann::json::parse(testing::file_bytes(json), nullptr, false);
    if (report.is_discarded() || !report.contains("bugs")) return std::string("no report in " + json.string());
    std::vector<std::string> bugs;
    const std::regex rank("rank [0-9]+");
    for (const nlohmann::json& bug : report.at("bugs")) {
      bugs.push_back(bug.value("kind", "") + ": " + std::regex_replace(bug.value("summary", ""), rank, "rank R"));
    }
    std::sort(bugs.begin(), bugs.end());
    std::string text = report.value("verdict", "") + "\n";
    for (const std::string& bug : bugs) text += bug + "\n";
    return text;
  };
  std::vector<std::string> jobs = check;
  jobs.insert(jobs.end(), {"--jobs", "2", "--json", (dir / "threads.json").string()});
  const testing::CliRun threads = testing::run_lockstep(jobs);
  REQUIRE(threads.code == EXIT_BUG);
  const std::string found = bugs_of(dir / "threads.json");
  REQUIRE(std::count(found.begin(), found.end(), '\n') == 5);  // mismatch, and its 4 variants
  const testing::CliRun spread = spread_with_json(check, dir, 3, "dpor-run");
  INFO(spread.err);
  CHECK(spread.code == EXIT_BUG);
  CHECK(bugs_of(dir / "spread.json") == found);
  CHECK(spread.out.find("mismatch, 4 variants") != std::string::npos);
  const std::string json = testing::file_bytes(dir / "spread.json");
  const size_t at = json.find("\"parts\": ");
  REQUIRE(at != std::string::npos);
  CHECK(std::stoul(json.substr(at + 9)) > 0);  // branches were given
  CHECK(spread.err.find("runs on rank 0 alone") == std::string::npos);

  // Rank 2 killed while it explores a branch: rank 0 takes it as lost after 2 s of silence and
  // its branch is explored again. The same bugs. (With recovery on, OpenMPI's mpirun exits 0
  // whatever the ranks' codes.)
  const std::filesystem::path killer = rank_2_killer(dir / "kill-rank-2-in-a-piece.sh");
  std::vector<std::string> args = check;
  args.insert(args.end(), {"--mpi", "--mpi-timeout", "2", "--json", (dir / "lossy.json").string()});
  const testing::CliRun lossy = under_mpirun(3, args, "dpor-lossy", "--enable-recovery", killer.string());
  INFO(lossy.err);
  CHECK(bugs_of(dir / "lossy.json") == found);
  CHECK(lossy.err.find("lockstep: warning: rank 2 said nothing for 2 s and is taken as lost") != std::string::npos);

  // Rank 1 stopped for 3 s while it explores a branch: taken as lost after 2 s, its branch
  // explored again. Heard from again while the search goes on (most runs), it gets no more work
  // and ends with the others; where the search ends first, it is told the job is over. Either
  // way the job ends with the same bugs.
  const std::filesystem::path stopper =
      rank_launcher(dir / "stop-rank-1-in-a-piece.sh", 1, "kill -STOP $pid; sleep 3; kill -CONT $pid");
  args = check;
  args.insert(args.end(), {"--mpi", "--mpi-timeout", "2", "--json", (dir / "slow.json").string()});
  const testing::CliRun slow = under_mpirun(3, args, "dpor-slow", "", stopper.string());
  INFO(slow.err);
  CHECK(slow.code == EXIT_BUG);
  CHECK(bugs_of(dir / "slow.json") == found);
  CHECK(slow.err.find("lockstep: warning: rank 1 said nothing for 2 s and is taken as lost") != std::string::npos);

  // Taken as lost after 0.3 s of silence, every worker is, between two beats a second apart,
  // and heard from again at the next: it ends its branch, if it holds one, and gets no more
  // work. Rank 0 explores the rest. Three ranks for 3 steps (21,952 executions), or more steps
  // where the build runs that in under 2 s alone, so that beats come while the search runs.
  const std::vector<std::string> check_3 = {"check", (dir / "ckpt-3.yaml").string(), "--patience", "0"};
  for (int steps = 3;; ++steps) {
    std::ofstream(dir / "ckpt-3.yaml") << ckpt_yaml(3, steps);
    const auto start = std::chrono::steady_clock::now();
    const testing::CliRun alone_3 = alone_with_json(check_3, dir);
    REQUIRE(alone_3.code == EXIT_BUG);
    if (std::chrono::steady_clock::now() - start >= std::chrono::seconds(2) || steps == 6) break;
  }
  args = check_3;
  args.insert(args.end(), {"--mpi", "--mpi-timeout", "0.3", "--json", (dir / "beats.json").string()});
  const testing::CliRun beats = under_mpirun(3, args, "dpor-beats");
  INFO(beats.err);
  CHECK(beats.code == EXIT_BUG);
  CHECK(bugs_of(dir / "beats.json") == bugs_of(dir / "alone.json"));
  CHECK(beats.err.find("lockstep: warning: rank 1 said nothing for 0.3 s and is taken as lost") != std::string::npos);
  CHECK(beats.err.find("lockstep: warning: rank 1 was heard from again; it gets no more work") != std::string::npos);
}

}  // namespace lockstep::cli

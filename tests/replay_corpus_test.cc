// The CI pass of `lockstep replay --mpi` (issue 7, docs/replay.md): every scenario in
// scenarios/ is replayed on MPI ranks. A scenario with a bug replays its first counterexample
// (`check --cex-dir`) and must be CONFIRMED at the predicted ops; a correct one (a fixed twin, a
// pipeline) replays its timed run and must complete with correct data; what MPI cannot express
// is UNDECIDED with its reason. The table below pins every scenario's outcome, so a new scenario
// (or a new "cannot express") shows up as a failure until it is added here.
//
// Every replay runs in the default granted issue order (docs/replay.md, "Issue order"): each
// must have issued every step of its plan ("issue order granted: N of N steps").
//
// The replays run as separate processes, several at once (a stuck rank sleeps, so hangs
// overlap well), each with a short watchdog. Skips, with a message, without mpirun or the worker.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

extern char** environ;

namespace lockstep::testing {

namespace {

namespace fs = std::filesystem;

// Every scenario's replay outcome: the start of the verdict line. A CONFIRMED line also says the
// ops matched the prediction; a correct scenario's line is exactly the NOT REPRODUCED one.
constexpr const char* CONFIRMED_DEADLOCK = "CONFIRMED (mpi): deadlock: ";
constexpr const char* CONFIRMED_HANG = "CONFIRMED (mpi): hang: ";
constexpr const char* CONFIRMED_MISMATCH = "CONFIRMED (mpi): mismatch: ";
constexpr const char* COMPLETED = "NOT REPRODUCED (mpi): every rank completed, data correct";

const std::map<std::string, std::string>& expected_outcomes() {
  static const std::map<std::string, std::string> table = {
      {"corpus/allreduce-size-differs", CONFIRMED_MISMATCH},
      {"corpus/allreduce-size-differs-fixed", COMPLETED},
      {"corpus/barrier-on-rank0-only", CONFIRMED_HANG},
      {"corpus/barrier-on-rank0-only-fixed", COMPLETED},
      {"corpus/checkpoint-thread-same-group", CONFIRMED_MISMATCH},
      {"corpus/checkpoint-thread-same-group-fixed", COMPLETED},
      {"corpus/comm-launch-order", CONFIRMED_DEADLOCK},
      {"corpus/comm-launch-order-fixed", COMPLETED},
      {"corpus/comm-launch-order-no-implicit", CONFIRMED_DEADLOCK},
      {"corpus/early-stop-one-rank", CONFIRMED_HANG},
      {"corpus/early-stop-one-rank-fixed", COMPLETED},
      {"corpus/fp16-overflow-per-stage", CONFIRMED_HANG},
      {"corpus/fp16-overflow-per-stage-fixed", COMPLETED},
      {"corpus/fsdp-order-differs", CONFIRMED_MISMATCH},
      {"corpus/fsdp-order-differs-fixed", COMPLETED},
      {"corpus/head-to-head-sends", CONFIRMED_DEADLOCK},
      {"corpus/head-to-head-sends-fixed", COMPLETED},
      {"corpus/head-to-head-sends-ordered", COMPLETED},
      {"corpus/init-duplicate-rank-fixed", COMPLETED},
      {"corpus/init-missing-process-fixed", COMPLETED},
      {"corpus/init-rank-outside-world-fixed", COMPLETED},
      {"corpus/init-world-size-mismatch-fixed", COMPLETED},
      {"corpus/logging-rank-dependent-keys", CONFIRMED_MISMATCH},
      {"corpus/logging-rank-dependent-keys-fixed", COMPLETED},
      {"corpus/moe-no-tokens-skips-all-to-all", CONFIRMED_MISMATCH},
      {"corpus/moe-no-tokens-skips-all-to-all-fixed", COMPLETED},
      {"corpus/moe-split-sizes-not-exchanged", CONFIRMED_MISMATCH},
      {"corpus/moe-split-sizes-not-exchanged-fixed", COMPLETED},
      {"corpus/new-group-fixed", COMPLETED},
      {"corpus/new-group-members-only", CONFIRMED_DEADLOCK},
      {"corpus/new-group-order", CONFIRMED_MISMATCH},
      {"corpus/p2p-fifo-wrong-order", CONFIRMED_MISMATCH},
      {"corpus/p2p-fifo-wrong-order-fixed", COMPLETED},
      {"corpus/pipeline-1f1b-pp2-mb4", COMPLETED},
      {"corpus/pipeline-1f1b-pp4-mb8", COMPLETED},
      {"corpus/pipeline-interleaved-pp3-v3-mb6", COMPLETED},
      {"corpus/pipeline-interleaved-pp4-v2-mb8", COMPLETED},
      {"corpus/rank-crash", CONFIRMED_HANG},
      {"corpus/rank-crash-fixed", COMPLETED},
      {"corpus/uneven-allgather-sizes-assumed", CONFIRMED_MISMATCH},
      {"corpus/uneven-allgather-sizes-assumed-fixed", COMPLETED},
      {"corpus/uneven-batches", CONFIRMED_HANG},
      {"corpus/uneven-batches-join", COMPLETED},
      {"corpus/zero3-3d-step", COMPLETED},
      {"corpus/zero3-forward-rank0-only", CONFIRMED_MISMATCH},
      {"corpus/zero3-forward-rank0-only-fixed", COMPLETED},
      {"corpus/zero3-generate-unsynced", CONFIRMED_MISMATCH},
      {"corpus/zero3-generate-unsynced-fixed", COMPLETED},
      {"examples/3d-parallel", COMPLETED},
      {"examples/recorded-dp-hang", CONFIRMED_HANG},
      {"examples/pipeline-interleaved-sweep", COMPLETED},
      {"examples/wildcard-gather", COMPLETED},
      {"examples/wildcard-race", CONFIRMED_HANG},
  };
  return table;
}

// Scenarios the MPI replay answers UNDECIDED ("cannot express: ..."), each with why: the rest
// of its verdict line (docs/replay.md, "What the replay cannot express").
const std::map<std::string, std::string>& cannot_express() {
  static const std::map<std::string, std::string> table = {
      {"corpus/init-duplicate-rank",
       "cannot express: a broken launch: two processes pass rank 0 (scenarios/corpus/init-duplicate-rank.yaml:14:7); "
       "the mpi replay starts exactly one process per rank, with its rank and the world size, and initialises them "
       "before the first op"},
      {"corpus/init-missing-process",
       "cannot express: a broken launch: no process is started for rank 3; the mpi replay starts exactly one process "
       "per rank, with its rank and the world size, and initialises them before the first op"},
      {"corpus/init-rank-outside-world",
       "cannot express: a broken launch: a process passes rank 4, outside the world of 4 "
       "(scenarios/corpus/init-rank-outside-world.yaml:12:7); the mpi replay starts exactly one process per rank, with "
       "its rank and the world size, and initialises them before the first op"},
      {"corpus/init-world-size-mismatch",
       "cannot express: a broken launch: a process passes world_size 6 in a world of 3 "
       "(scenarios/corpus/init-world-size-mismatch.yaml:12:7); the mpi replay starts exactly one process per rank, "
       "with its rank and the world size, and initialises them before the first op"},
  };
  return table;
}

constexpr double WATCHDOG_S = 2;  // short: on CPU a healthy rank completes a request far sooner
constexpr size_t JOBS = 4;         // replays at once: stuck ranks sleep, so hangs overlap well

struct Job {
  std::string name;   // "corpus/uneven-batches"
  std::string input;  // the counterexample or the scenario
  std::string out;    // where its output goes
  pid_t pid = -1;
  int code = -1;
  double seconds = 0;
  std::chrono::steady_clock::time_point start;
};

bool executable(const fs::path& path) { return ::access(path.c_str(), X_OK) == 0; }

pid_t spawn(const std::vector<std::string>& args, const std::string& out) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  std::vector<std::string> copy = args;
  std::vector<char*> argv;
  for (std::string& a : copy) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = -1;
  if (posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ) != 0) pid = -1;
  posix_spawn_file_actions_destroy(&actions);
  return pid;
}

int wait_for(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string line_of(const std::string& text, size_t n) {
  std::istringstream in(text);
  std::string line;
  for (size_t i = 0; i <= n; ++i) {
    if (!std::getline(in, line)) return "";
  }
  return line;
}

// Whether the replay's last line says the granted issue order got through every step.
bool every_step_issued(const std::string& text) {
  const std::string marker = ", issue order granted: ";
  const size_t at = text.rfind(marker);
  if (at == std::string::npos) return false;
  std::istringstream in(text.substr(at + marker.size()));
  uint64_t issued = 0, steps = 0;
  std::string of;
  return static_cast<bool>(in >> issued >> of >> steps) && of == "of" && issued == steps && steps > 0;
}

}  // namespace

TEST_CASE("replay --mpi over every scenario: bugs confirmed at the predicted ops, correct ones complete with correct data") {
  const fs::path bin = fs::path(LOCKSTEP_BINARY).parent_path();
  if (std::system("command -v mpirun >/dev/null 2>&1") != 0) {
    MESSAGE("skipped: mpirun not found (scripts/setup installs openmpi-bin libopenmpi-dev)");
    return;
  }
  if (!executable(bin / "lockstep-mpi-replay")) {
    MESSAGE("skipped: lockstep-mpi-replay was not built (CMake found no MPI)");
    return;
  }
  const auto begin = std::chrono::steady_clock::now();
  // Quick replays: sizes above 64 KiB compacted, every size relation kept (docs/replay.md).
  ::setenv("LOCKSTEP_REPLAY_COMPACT", "1", 1);
  // A folder of this run's own: several builds' test suites may run this at once.
  std::string made = (fs::temp_directory_path() / "lockstep-replay-corpus-XXXXXX").string();
  REQUIRE(::mkdtemp(made.data()) != nullptr);
  const fs::path dir = made;
  fs::create_directories(dir / "cex");
  fs::create_directories(dir / "out");

  // Every bug's counterexample.
  const pid_t check = spawn({LOCKSTEP_BINARY, "check", "scenarios", "--cex-dir", (dir / "cex").string(), "--quiet"},
                            (dir / "check.txt").string());
  REQUIRE(check > 0);
  const int check_code = wait_for(check);
  REQUIRE_MESSAGE(check_code == 1, read_text((dir / "check.txt").string()));

  // Every scenario: its first counterexample if it has a bug, else itself.
  std::vector<Job> jobs;
  for (const auto& entry : fs::recursive_directory_iterator("scenarios")) {
    const fs::path& p = entry.path();
    if (!entry.is_regular_file() || (p.extension() != ".yaml" && p.extension() != ".jsonl")) continue;
    Job job;
    job.name = (p.parent_path().filename() / p.stem()).generic_string();
    const fs::path cex = dir / "cex" / (p.stem().string() + "-1.json");
    job.input = fs::exists(cex) ? cex.string() : p.generic_string();
    job.out = (dir / "out" / (p.stem().string() + ".txt")).string();
    jobs.push_back(job);
  }
  std::sort(jobs.begin(), jobs.end(), [](const Job& a, const Job& b) { return a.name < b.name; });

  // Pinned: the scenarios are exactly those of the table.
  std::vector<std::string> found, pinned;
  for (const Job& job : jobs) found.push_back(job.name);
  for (const auto& [name, outcome] : expected_outcomes()) pinned.push_back(name);
  for (const auto& [name, why] : cannot_express()) pinned.push_back(name);
  std::sort(pinned.begin(), pinned.end());
  CHECK_MESSAGE(found == pinned, "scenarios/ and the pinned table differ: add the new scenario's expected replay outcome");

  // Run them, JOBS at a time.
  const std::string timeout = std::to_string(static_cast<int>(WATCHDOG_S));
  size_t next = 0, running = 0;
  while (next < jobs.size() || running > 0) {
    while (running < JOBS && next < jobs.size()) {
      Job& job = jobs[next++];
      job.start = std::chrono::steady_clock::now();
      job.pid = spawn({LOCKSTEP_BINARY, "replay", job.input, "--mpi", "--timeout", timeout}, job.out);
      REQUIRE(job.pid > 0);
      ++running;
    }
    int status = 0;
    const pid_t done = ::waitpid(-1, &status, 0);
    if (done < 0) break;
    for (Job& job : jobs) {
      if (job.pid != done) continue;
      job.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      job.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - job.start).count();
      job.pid = -1;
      --running;
    }
  }

  std::ostringstream table;
  for (const Job& job : jobs) {
    const std::string text = read_text(job.out);
    const std::string verdict = line_of(text, 1);
    table << job.name << " | " << job.seconds << " s | " << verdict.substr(0, 110) << "\n";
    INFO(job.name << " (" << job.input << "), exit " << job.code << ":\n" << text);
    if (const auto why = cannot_express().find(job.name); why != cannot_express().end()) {
      CHECK(job.code == 3);
      CHECK(verdict == "UNDECIDED (mpi): " + why->second);
      continue;
    }
    const auto want = expected_outcomes().find(job.name);
    if (want == expected_outcomes().end()) continue;  // reported above
    CHECK(every_step_issued(text));
    if (want->second == COMPLETED) {
      CHECK(job.code == 0);
      CHECK(verdict == COMPLETED);
    } else {
      CHECK(job.code == 1);
      CHECK(verdict.rfind(want->second, 0) == 0);
      const bool as_predicted = verdict.find(", matches prediction") != std::string::npos ||
                                verdict.find(" at the predicted op, as predicted (") != std::string::npos;
      CHECK(as_predicted);
    }
  }
  const double total = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  MESSAGE("replay --mpi over " << jobs.size() << " scenarios in " << total << " s (watchdog " << WATCHDOG_S << " s, " << JOBS
                               << " at once):\n"
                               << table.str());
  fs::remove_all(dir);
  ::unsetenv("LOCKSTEP_REPLAY_COMPACT");
}

}  // namespace lockstep::testing

// The launcher and the whole replay session against a FAKE worker: a shell script that writes
// the frontier files a hung, mismatched or completed run would, and then exits, waits for
// DIR/stop or ignores everything. No MPI, no GPU: this is the coordinator and watchdog logic
// that --nccl shares with --mpi.
#include "gpu_validation/worker_launcher.h"

#include <doctest/doctest.h>

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "checker/analysis.h"
#include "gpu_validation/replay_session.h"
#include "sim/engine.h"
#include "sim/loader.h"
#include "tests/testing.h"

namespace lockstep::gpu {

namespace {

namespace fs = std::filesystem;

// A fresh folder and a fake worker script in it. `body` is shell run with $RANK, $DIR and a
// function `frontier STATUS COMPLETED TOTAL [OP_LINE]` that writes this rank's file whole.
struct Fake {
  fs::path dir;
  std::string script;

  explicit Fake(const std::string& body, const std::string& shell = "/bin/sh") {
    std::string made = (fs::temp_directory_path() / "lockstep-fake-XXXXXX").string();
    REQUIRE(::mkdtemp(made.data()) != nullptr);
    dir = made;
    script = (dir / "fake-worker.sh").string();
    std::ofstream(script) << "#!" << shell << "\n"
                             "# fake-worker.sh PLAN DIR STALL (per rank: $LOCKSTEP_RANK)\n"
                             "RANK=${LOCKSTEP_RANK:-0}\nDIR=$2\n"
                             "frontier() {\n"
                             "  { printf 'lockstep-frontier 1\\nrank %s\\npid %s\\nstatus %s\\ncompleted %s %s\\n' "
                             "\"$RANK\" $$ \"$1\" \"$2\" \"$3\"; [ -n \"$4\" ] && printf '%s\\n' \"$4\"; } > \"$DIR/f.$RANK.tmp\"\n"
                             "  mv \"$DIR/f.$RANK.tmp\" \"$DIR/frontier.$RANK\"\n"
                             "}\n"
                          << body << "\n";
    ::chmod(script.c_str(), 0755);
  }
  ~Fake() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }

  LaunchSpec spec(int32_t world, double wall_s = 20, double grace_s = 0) const {
    LaunchSpec s;
    s.launcher.command = {script, "plan.txt", dir.string(), "1"};
    s.launcher.per_rank = true;
    s.dir = dir.string();
    s.world = world;
    s.wall_s = wall_s;
    s.grace_s = grace_s;
    return s;
  }
};

bool gone(int64_t pid) { return ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH; }

using Timed = testing::TimedRun;
using testing::timed_run;

// A backend whose launcher runs the fake once per rank, as --nccl runs its worker.
Backend fake_backend(const Fake& fake, double grace_s) {
  Backend b;
  b.name = "fake";
  b.grace_s = grace_s;
  b.make_launcher = [&fake](const std::string& plan, const std::string& dir, int32_t, double, std::string&) {
    Launcher l;
    l.command = {fake.script, plan, dir, "1"};
    l.per_rank = true;
    return std::optional<Launcher>(l);
  };
  return b;
}

}  // namespace

TEST_CASE("launcher: a completed run is read back, and every process ends by itself") {
  const Fake fake("frontier completed 3 3\nexit 0");
  const LaunchResult r = launch_workers(fake.spec(3));
  REQUIRE(r.error.empty());
  REQUIRE(r.frontiers.size() == 3);
  for (const std::optional<Frontier>& f : r.frontiers) {
    REQUIRE(f);
    CHECK(f->status == FrontierStatus::COMPLETED);
    CHECK(gone(f->pid));
  }
  CHECK(r.stopped_cleanly);
  CHECK_FALSE(r.wall_timeout);
  CHECK_FALSE(r.launcher_exited);
}

TEST_CASE("launcher: hung workers that ignore everything are killed and reaped once each reported") {
  const Fake fake("frontier stuck 1 2 'op 1 send world 1 1'\nexec sleep 1000");
  const LaunchResult r = launch_workers(fake.spec(2, 20, 0.5));
  REQUIRE(r.error.empty());
  for (const std::optional<Frontier>& f : r.frontiers) {
    REQUIRE(f);
    CHECK(f->status == FrontierStatus::STUCK);
    REQUIRE(f->ops.size() == 1);
    CHECK(f->ops[0].kind == "send");
    CHECK(gone(f->pid));  // killed and reaped: no zombie either
  }
  CHECK_FALSE(r.stopped_cleanly);
  CHECK(fs::exists(fake.dir / "stop"));  // they were asked first
  CHECK(r.seconds < 15);
}

TEST_CASE("launcher: stuck workers that honour DIR/stop end by themselves within the grace time") {
  const Fake fake("frontier stuck 0 1 'op 0 allreduce world 1 -1'\n"
                  "while [ ! -e \"$DIR/stop\" ]; do sleep 0.05; done\nexit 0");
  const LaunchResult r = launch_workers(fake.spec(2, 20, 10));
  REQUIRE(r.error.empty());
  CHECK(r.stopped_cleanly);
  for (const std::optional<Frontier>& f : r.frontiers) CHECK(gone(f->pid));
}

TEST_CASE("launcher: workers that die without reporting leave their exit status, and the wall clock bounds a silent run") {
  const Fake died("exit 3");
  const LaunchResult r = launch_workers(died.spec(2));
  CHECK(r.launcher_exited);
  CHECK(r.launcher_status == 3);
  CHECK_FALSE(r.frontiers[0]);

  const Fake silent("frontier running 0 4\nexec sleep 1000");
  const LaunchResult w = launch_workers(silent.spec(2, 1));
  CHECK(w.wall_timeout);
  REQUIRE(w.frontiers[1]);
  CHECK(w.frontiers[1]->status == FrontierStatus::RUNNING);
  CHECK(gone(w.frontiers[1]->pid));
}

TEST_CASE("launcher: workers whose launcher exits first are reaped here, never left as zombies of init") {
  // An mpirun that ends before its ranks: they are re-parented (to init, in a container one that
  // may never reap them, before this was a subreaper) and end later. It ends once both have
  // said who they are, however loaded the machine.
  const Fake fake("if [ -z \"$WORKER\" ]; then\n"
                  "  for r in 0 1; do WORKER=1 LOCKSTEP_RANK=$r \"$0\" \"$@\" & done\n"
                  "  while [ ! -f \"$DIR/pid.0\" ] || [ ! -f \"$DIR/pid.1\" ]; do sleep 0.01; done\n"
                  "  exit 0\n"
                  "fi\n"
                  "echo $$ > \"$DIR/pid.$RANK.new\" && mv \"$DIR/pid.$RANK.new\" \"$DIR/pid.$RANK\"\n"
                  "sleep 0.3\nfrontier completed 1 1\nexit 0");
  LaunchSpec spec = fake.spec(2);
  spec.launcher.per_rank = false;
  const LaunchResult r = launch_workers(spec);
  REQUIRE(r.error.empty());
  for (int rank = 0; rank < 2; ++rank) {
    std::ifstream in(fake.dir / ("pid." + std::to_string(rank)));
    int64_t pid = 0;
    REQUIRE(static_cast<bool>(in >> pid));
    CHECK(gone(pid));  // neither running nor a zombie
  }
}

TEST_CASE("launcher: LOCKSTEP_LAUNCHER is a command prefix with {world}") {
  ::setenv("LOCKSTEP_LAUNCHER", "srun -n {world} --kill-on-bad-exit", 1);
  const std::optional<std::vector<std::string>> prefix = user_launcher(8);
  ::unsetenv("LOCKSTEP_LAUNCHER");
  REQUIRE(prefix);
  CHECK(*prefix == std::vector<std::string>{"srun", "-n", "8", "--kill-on-bad-exit"});
  CHECK_FALSE(user_launcher(8));
}

TEST_CASE("replay session against a fake worker: a hang at the predicted ops is CONFIRMED, elsewhere UNDECIDED") {
  const Timed t = timed_run("scenarios/corpus/uneven-batches.yaml");
  ReplayOptions options;
  options.stall_s = 1;
  options.quiet = true;
  {
    const Fake fake("if [ \"$RANK\" = 3 ]; then frontier completed 4 4; exit 0; fi\n"
                    "frontier stuck 5 6 'op 5 allreduce world 3 -1'\nexec sleep 1000");
    const ReplayReport r = replay_on_hardware(t.scenario, t.result, {}, {}, checker::analyze(t.scenario, t.result), fake_backend(fake, 0.5), options);
    INFO(r.text);
    CHECK(r.verdict == ReplayVerdict::CONFIRMED);
    CHECK(r.text.find("CONFIRMED (fake): hang: rank 0 allreduce #3 on world (op 5); rank 1 allreduce #3 on world (op 5); "
                      "rank 2 allreduce #3 on world (op 5) hung, matches prediction\n") != std::string::npos);
  }
  {
    // Rank 1 stuck one all-reduce earlier: a frontier mismatch.
    const Fake fake("if [ \"$RANK\" = 3 ]; then frontier completed 4 4; exit 0; fi\n"
                    "if [ \"$RANK\" = 1 ]; then frontier stuck 3 6 'op 3 allreduce world 2 -1'; exec sleep 1000; fi\n"
                    "frontier stuck 5 6 'op 5 allreduce world 3 -1'\nexec sleep 1000");
    const ReplayReport r = replay_on_hardware(t.scenario, t.result, {}, {}, checker::analyze(t.scenario, t.result), fake_backend(fake, 0.5), options);
    INFO(r.text);
    CHECK(r.verdict == ReplayVerdict::UNDECIDED);
    CHECK(r.text.find("  predicted, not observed: rank 1 allreduce #3 on world (op 5)\n") != std::string::npos);
    CHECK(r.text.find("  observed, not predicted: rank 1 allreduce #2 on world (op 3)\n") != std::string::npos);
  }
}

TEST_CASE("replay session against a fake worker: a mismatch, a completed fix, a missing worker") {
  ReplayOptions options;
  options.stall_s = 1;
  options.quiet = true;
  const Timed mismatch = timed_run("scenarios/corpus/allreduce-size-differs.yaml");
  {
    const Fake fake("case $RANK in\n"
                    "  0) frontier failed 2 3 'op 2 allreduce pp 1 -1 NCCL error: invalid usage'; exit 0;;\n"
                    "  1) frontier stuck 2 3 'op 2 allreduce pp 1 -1'; exec sleep 1000;;\n"
                    "  *) frontier completed 3 3; exit 0;;\n"
                    "esac");
    const ReplayReport r = replay_on_hardware(mismatch.scenario, mismatch.result, {}, {}, checker::analyze(mismatch.scenario, mismatch.result), fake_backend(fake, 0.5), options);
    INFO(r.text);
    CHECK(r.verdict == ReplayVerdict::CONFIRMED);
    CHECK(r.text.find("CONFIRMED (fake): mismatch: rank 0 allreduce #1 on pp (op 2) failed (NCCL error: invalid usage) at "
                      "the predicted op, as predicted") != std::string::npos);
  }
  const Timed fixed = timed_run("scenarios/corpus/uneven-batches-join.yaml");
  {
    const Fake fake("frontier completed 6 6\nexit 0");
    const ReplayReport r = replay_on_hardware(fixed.scenario, fixed.result, {}, {}, checker::analyze(fixed.scenario, fixed.result), fake_backend(fake, 0.5), options);
    CHECK(r.verdict == ReplayVerdict::NOT_REPRODUCED);
    CHECK(r.text == "predicted: every rank completes\nNOT REPRODUCED (fake): every rank completed, data correct\n"
                    "  completed: ranks 0,1,2,3\n");
  }
  {
    ::setenv("LOCKSTEP_NCCL_WORKER", "/nonexistent/lockstep-nccl-replay", 1);
    const ReplayReport r = replay_on_hardware(fixed.scenario, fixed.result, {}, {}, checker::analyze(fixed.scenario, fixed.result), nccl_backend(), options);
    ::unsetenv("LOCKSTEP_NCCL_WORKER");
    CHECK(r.verdict == ReplayVerdict::UNDECIDED);
    CHECK(r.text.find("UNDECIDED (nccl): the NCCL worker /nonexistent/lockstep-nccl-replay is missing") != std::string::npos);
  }
}

TEST_CASE("replay session: --nccl runs its worker once per rank on this machine, rank by rank") {
  // The real nccl backend with a fake worker: each process sees its own LOCKSTEP_RANK.
  const Fake fake("[ \"$LOCKSTEP_WORLD\" = 4 ] && [ \"$LOCKSTEP_LOCAL_SIZE\" = 4 ] || exit 9\n"
                  "frontier completed 6 6\nexit 0");
  ::setenv("LOCKSTEP_NCCL_WORKER", fake.script.c_str(), 1);
  const Timed fixed = timed_run("scenarios/corpus/uneven-batches-join.yaml");
  ReplayOptions options;
  options.quiet = true;
  const ReplayReport r = replay_on_hardware(fixed.scenario, fixed.result, {}, {}, checker::analyze(fixed.scenario, fixed.result), nccl_backend(), options);
  ::unsetenv("LOCKSTEP_NCCL_WORKER");
  INFO(r.text);
  CHECK(r.verdict == ReplayVerdict::NOT_REPRODUCED);
  CHECK(r.text.find("NOT REPRODUCED (nccl): every rank completed, data correct\n") != std::string::npos);
}

}  // namespace lockstep::gpu

namespace lockstep::gpu {

namespace {

// A fake worker that speaks the grant protocol (bash: /dev/tcp): it connects to the address
// in DIR/grant-address, says hello with the token the launcher passed it, and issues its steps
// (from the plan's op lines) as they are granted. With STOP_RANK/STOP_AT set, that rank stops before its STOP_AT-th op, stuck in the
// op before it; a rank that gets no grant for 3 s reports that it waits for one.
constexpr const char* GRANTED_FAKE = R"(PLAN=$1
port=$(awk '$1=="127.0.0.1"{print $2}' "$DIR/grant-address")
exec 3<>/dev/tcp/127.0.0.1/$port || exit 7
echo "hello $RANK $LOCKSTEP_GRANT_TOKEN" >&3
end=0; n=0
for s in $(awk -v r="$RANK" '$1=="rank"{cur=$2} $1=="op" && cur==r {print $3}' "$PLAN"); do
  if [ "$RANK" = "$STOP_RANK" ] && [ "$n" = "$STOP_AT" ]; then
    frontier stuck $n 9 "op $((n-1)) allreduce world 1 -1"$'\n'"next $s 1 $n compute world 0 -1"
    exec sleep 1000
  fi
  while [ "$s" -ge "$end" ]; do
    if ! read -r -t 3 word end <&3; then
      frontier stuck $n 9 "next $s 0 $n allreduce world 2 -1"
      exec sleep 1000
    fi
  done
  echo "issued $s" >&3
  n=$((n+1))
done
frontier completed $n $n
exit 0)";

}  // namespace

TEST_CASE("replay session, granted order: fake workers issue every step as granted, or the verdict says where the order stopped") {
  if (::access("/bin/bash", X_OK) != 0) {
    MESSAGE("skipped: no /bin/bash for the fake worker's /dev/tcp");
    return;
  }
  const Timed fixed = timed_run("scenarios/corpus/uneven-batches-join.yaml");
  ReplayOptions options;
  options.stall_s = 1;
  const Fake fake(GRANTED_FAKE, "/bin/bash");
  {
    const ReplayReport r = replay_on_hardware(fixed.scenario, fixed.result, {}, {}, checker::analyze(fixed.scenario, fixed.result), fake_backend(fake, 0.5), options);
    INFO(r.text);
    CHECK(r.verdict == ReplayVerdict::NOT_REPRODUCED);
    CHECK(r.text.find("NOT REPRODUCED (fake): every rank completed, data correct\n") != std::string::npos);
    CHECK(r.text.find(", issue order granted: 23 of 23 steps in ") != std::string::npos);
  }
  {
    ::setenv("STOP_RANK", "1", 1);
    ::setenv("STOP_AT", "2", 1);
    const ReplayReport r = replay_on_hardware(fixed.scenario, fixed.result, {}, {}, checker::analyze(fixed.scenario, fixed.result), fake_backend(fake, 0.5), options);
    ::unsetenv("STOP_RANK");
    ::unsetenv("STOP_AT");
    INFO(r.text);
    CHECK(r.verdict == ReplayVerdict::UNDECIDED);
    CHECK(r.text.find("UNDECIDED (fake): hung elsewhere: rank 1 allreduce #1 on world (op 1); the issue order stopped at "
                      "step 8 of 23: rank 1, stuck in allreduce #1 on world (op 1), never issued op 2 (compute on world); "
                      "rank 2 waits for its grant of op 0 (allreduce #2 on world)") != std::string::npos);
    CHECK(r.text.find(", issue order granted: 8 of 23 steps in ") != std::string::npos);
  }
}

}  // namespace lockstep::gpu

namespace lockstep::gpu {

TEST_CASE("replay session in free order: the plan says so and no grant server is started") {
  const Fake fake("grep -qx 'order free' \"$1\" || exit 9\n[ ! -e \"$DIR/grant-address\" ] || exit 8\n"
                  "frontier completed 6 6\nexit 0");
  const Timed fixed = timed_run("scenarios/corpus/uneven-batches-join.yaml");
  ReplayOptions options;
  options.stall_s = 1;
  options.order = IssueOrder::FREE;
  const ReplayReport r = replay_on_hardware(fixed.scenario, fixed.result, {}, {}, checker::analyze(fixed.scenario, fixed.result), fake_backend(fake, 0.5), options);
  INFO(r.text);
  CHECK(r.verdict == ReplayVerdict::NOT_REPRODUCED);
  CHECK(r.text.find(", issue order free\n") != std::string::npos);
}

}  // namespace lockstep::gpu

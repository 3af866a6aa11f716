// `launch:` (initialisation: who starts, what each passes to init_process_group).
#include <doctest/doctest.h>

#include <string>

#include "sim/engine.h"
#include "tests/testing.h"

namespace lockstep::sim {
namespace {

const char* const PROGRAM = R"(program:
  - compute: 1ms
  - allreduce: {size: 1MiB}
)";

Scenario with_launch(const std::string& world_and_launch) {
  return testing::scenario_from("scenario: t\n" + world_and_launch + PROGRAM);
}

TEST_CASE("launch: the loader expands ranges and applies the section's defaults") {
  const Scenario s = with_launch(R"(world: 4
launch:
  backend: gloo
  init: tcp://10.0.0.1:29500
  processes:
    - {rank: "0-2"}
    - {rank: 3, world_size: 8, backend: nccl, init: env://}
)");
  REQUIRE(s.launch.given);
  REQUIRE(s.launch.processes.size() == 4);
  CHECK(s.launch.processes[1].rank == 1);
  CHECK(s.launch.processes[1].world_size == 4);
  CHECK(s.launch.processes[1].backend == "gloo");
  CHECK(s.launch.processes[1].init_method == "tcp://10.0.0.1:29500");
  CHECK(s.launch.processes[3].world_size == 8);
  CHECK(s.launch.processes[3].backend == "nccl");
  CHECK(s.launch.processes[3].stmt.op == OpKind::INIT);
  CHECK(s.launch.processes[3].stmt.loc.line == 8);
  // Without processes: one per rank.
  const Scenario d = with_launch("world: 3\nlaunch: {backend: nccl}\n");
  CHECK(d.launch.processes.size() == 3);
  CHECK(d.launch.processes[2].rank == 2);
}

TEST_CASE("launch: a correct launch runs the program as without one, with no op added") {
  const Scenario plain = with_launch("world: 4\n");
  const Scenario launched = with_launch("world: 4\nlaunch: {processes: [{rank: \"0-3\"}]}\n");
  const ExecutionResult a = testing::run_timed(plain);
  const ExecutionResult b = testing::run_timed(launched);
  CHECK(b.end == ExecutionEnd::COMPLETED);
  CHECK(a.events == b.events);
  CHECK(a.rank_end_ns == b.rank_end_ns);
  CHECK(b.ops[0].size() == a.ops[0].size());
}

TEST_CASE("launch: a rank no process starts as leaves the others stuck in init, waiting for it") {
  const Scenario scenario = with_launch("world: 3\nlaunch: {processes: [{rank: 0}, {rank: 2}]}\n");
  const ExecutionResult r = testing::run_timed(scenario);
  REQUIRE(r.end == ExecutionEnd::STUCK);
  CHECK(r.rank_status == std::vector<RankStatus>{RankStatus::BLOCKED, RankStatus::NOT_STARTED, RankStatus::BLOCKED});
  REQUIRE(r.stuck.size() == 2);
  CHECK(r.stuck[0].rank == 0);
  CHECK(r.stuck[0].op.op.kind == OpKind::INIT);
  CHECK(r.stuck[0].waiting_for == std::vector<int32_t>{1});
  CHECK(r.stuck[0].never_issued == std::vector<int32_t>{1});
  CHECK(r.stuck[1].op.op.stmt->loc.line == 3);  // its launch entry
  CHECK(r.ops[0].size() == 1);                   // init only: the programs never start
}

TEST_CASE("launch: a rank outside its own world size raises and its rank is never joined") {
  const Scenario scenario = with_launch("world: 2\nlaunch: {processes: [{rank: 0}, {rank: 2, world_size: 2}]}\n");
  const ExecutionResult r = testing::run_timed(scenario);
  REQUIRE(r.end == ExecutionEnd::STUCK);
  REQUIRE(r.stuck.size() == 1);
  CHECK(r.stuck[0].waiting_for == std::vector<int32_t>{1});
  CHECK(r.rank_status[1] == RankStatus::NOT_STARTED);
}

TEST_CASE("launch: a world size that disagrees with rank 0's is a mismatch of world_size") {
  const Scenario scenario =
      with_launch("world: 2\nlaunch: {processes: [{rank: 1, world_size: 4}, {rank: 0, world_size: 2}]}\n");
  const ExecutionResult r = testing::run_timed(scenario);
  REQUIRE(r.end == ExecutionEnd::MISMATCH);
  CHECK(r.mismatch->field == "world_size");
  CHECK(r.mismatch->rank_a == 0);
  CHECK(r.mismatch->rank_b == 1);
  CHECK(r.mismatch->op_a.op.kind == OpKind::INIT);
  CHECK(r.mismatch->op_b.op.stmt->loc.line == 3);
}

TEST_CASE("launch: two processes with one rank are a mismatch of rank, before the missing rank") {
  const Scenario scenario = with_launch("world: 3\nlaunch: {processes: [{rank: 0}, {rank: 1}, {rank: 1}]}\n");
  const ExecutionResult r = testing::run_timed(scenario);
  REQUIRE(r.end == ExecutionEnd::MISMATCH);
  CHECK(r.mismatch->field == "rank");
  CHECK(r.mismatch->rank_a == 1);
  CHECK(r.mismatch->rank_b == 1);
}

TEST_CASE("launch: a different backend or init method than rank 0's is a mismatch") {
  const Scenario gloo = with_launch("world: 2\nlaunch: {processes: [{rank: 0}, {rank: 1, backend: gloo}]}\n");
  CHECK(testing::run_timed(gloo).mismatch->field == "backend");
  const Scenario file = with_launch("world: 2\nlaunch: {processes: [{rank: 0}, {rank: 1, init: \"file:///tmp/x\"}]}\n");
  CHECK(testing::run_timed(file).mismatch->field == "init_method");
}

TEST_CASE("launch: processes that agree on a larger world wait for ranks that never start") {
  const Scenario scenario = with_launch("world: 2\nlaunch: {world_size: 4}\n");
  const ExecutionResult r = testing::run_timed(scenario);
  REQUIRE(r.end == ExecutionEnd::STUCK);
  CHECK(r.stuck.size() == 2);
  CHECK(r.stuck[0].waiting_for.empty());  // ranks 2 and 3 are outside the scenario's world
}

}  // namespace
}  // namespace lockstep::sim

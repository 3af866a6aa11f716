// The NCCL/PyTorch rules of docs/semantics.md, one by one: for each, a scenario that completes and one
// that hangs (or is found to hang by exploring its choices).
#include <doctest/doctest.h>

#include "checker/explore.h"
#include "sim/engine.h"
#include "tests/testing.h"

namespace lockstep::sim {

using testing::scenario_from;

namespace {

ExecutionResult timed_run(const Scenario& scenario) {
  Engine engine(scenario);
  TimedStrategy timed;
  return engine.run(timed);
}

Verdict verdict_of(const Scenario& scenario) { return checker::check_scenario(scenario, {}).verdict; }

}  // namespace

TEST_CASE("synchronous collectives on two groups serialize through main: opposite orders deadlock") {
  const char* text = R"Y(
scenario: two-groups
world: 2
groups: {a: [0, 1], b: [0, 1]}
program:
  - if: "rank == 0"
    then:
      - allreduce: {group: a, size: 1MiB ASYNC_A}
      - allreduce: {group: b, size: 1MiB}
    else:
      - allreduce: {group: b, size: 1MiB ASYNC_B}
      - allreduce: {group: a, size: 1MiB}
)Y";
  std::string sync = text;
  sync.replace(sync.find(" ASYNC_A"), 8, "");
  sync.replace(sync.find(" ASYNC_B"), 8, "");
  CHECK(timed_run(scenario_from(sync)).end == ExecutionEnd::STUCK);
  // async: main does not wait for the first op, so the second does not depend on it.
  std::string async = text;
  async.replace(async.find(" ASYNC_A"), 8, ", async: h");
  async.replace(async.find(" ASYNC_B"), 8, ", async: h");
  async += "  - wait: h\n";
  CHECK(timed_run(scenario_from(async)).end == ExecutionEnd::COMPLETED);
}

TEST_CASE("wait: H makes main wait for the async op - the host does not block") {
  const Scenario scenario = scenario_from(R"Y(
scenario: async-wait
world: 2
program:
  - allreduce: {size: 100MiB, async: grads}
  - compute: 1ms
  - wait: grads
  - compute: 2ms
)Y");
  const ExecutionResult result = timed_run(scenario);
  REQUIRE(result.end == ExecutionEnd::COMPLETED);
  const std::vector<OpRecord>& ops = result.ops[0];
  REQUIRE(ops.size() == 4);
  CHECK(ops[1].start_ns == 0);                 // compute overlaps the all-reduce
  CHECK(ops[3].start_ns == ops[0].end_ns);     // after wait: main follows the all-reduce
  CHECK(ops[3].issue_ns == 0);                 // the host never blocked
}

TEST_CASE("a thread's current stream: its compute runs there and its collectives chain with it, not with main") {
  const char* text = R"Y(
scenario: current-stream
world: 2
groups: {ckpt: [0, 1]}
threads:
  main:
    - compute: 20ms
    - allreduce: {size: 1MiB}
  ckpt:
    STREAM
      - compute: 1ms
      - allgather: {group: ckpt, size: 1MiB}
      - compute: 2ms
)Y";
  std::string own = text;
  own.replace(own.find("STREAM"), 6, "stream: ckpt_s\n    do:");
  const ExecutionResult result = timed_run(scenario_from(own));
  REQUIRE(result.end == ExecutionEnd::COMPLETED);
  // Rank 0's ops in issue order: the timed run steps the earliest thread first (ckpt's compute
  // at 0 ties with main's and loses to it by thread order), so find them by kind.
  auto find = [&](OpKind kind, const char* thread) -> const OpRecord& {
    for (const OpRecord& op : result.ops[0]) {
      if (op.op.kind == kind && op.thread == thread) return op;
    }
    FAIL("no such op");
    return result.ops[0][0];
  };
  const OpRecord& gather = find(OpKind::ALLGATHER, "ckpt");
  CHECK(find(OpKind::COMPUTE, "ckpt").stream == "ckpt_s");
  CHECK(gather.stream == "comm:ckpt");
  CHECK(gather.start_ns == 1'000'000);  // after ckpt_s's 1ms compute, not main's 20ms
  // The thread's second compute waits for the gather on its current stream.
  const OpRecord* second = nullptr;
  for (const OpRecord& op : result.ops[0]) {
    if (op.thread == "ckpt" && op.op.kind == OpKind::COMPUTE && op.op.duration_ns == 2'000'000) second = &op;
  }
  REQUIRE(second != nullptr);
  CHECK(second->stream == "ckpt_s");
  CHECK(second->start_ns == gather.end_ns);
  // Without a stream of its own the thread shares main: the gather waits for main's compute.
  std::string shared = text;
  shared.replace(shared.find("STREAM"), 6, "do:");  // {do: [...]}: no stream of its own
  const ExecutionResult on_main = timed_run(scenario_from(shared));
  REQUIRE(on_main.end == ExecutionEnd::COMPLETED);
  for (const OpRecord& op : on_main.ops[0]) {
    if (op.op.kind == OpKind::ALLGATHER) CHECK(op.start_ns >= 20'000'000);
  }
}

TEST_CASE("wait: H makes the waiting thread's current stream wait, not main") {
  const ExecutionResult result = timed_run(scenario_from(R"Y(
scenario: wait-current
world: 2
groups: {side: [0, 1]}
threads:
  main:
    - compute: 5ms
  bg:
    stream: bg_s
    do:
      - allreduce: {group: side, size: 1MiB, async: h}
      - wait: h
      - compute: 1ms
)Y"));
  REQUIRE(result.end == ExecutionEnd::COMPLETED);
  const OpRecord* reduce = nullptr;
  const OpRecord* after = nullptr;
  for (const OpRecord& op : result.ops[0]) {
    if (op.op.kind == OpKind::ALLREDUCE) reduce = &op;
    if (op.op.kind == OpKind::COMPUTE && op.thread == "bg") after = &op;
  }
  REQUIRE(reduce != nullptr);
  REQUIRE(after != nullptr);
  CHECK(reduce->start_ns == 0);               // not behind main's 5ms compute
  CHECK(after->stream == "bg_s");
  CHECK(after->start_ns == reduce->end_ns);  // bg_s waited for the all-reduce
}

TEST_CASE("sync blocks the host until the streams drain") {
  const char* text = R"Y(
scenario: sync
world: 2
groups: {side: [0, 1]}
program:
  - if: "rank == 0"
    then:
      - send: {to: 1, size: 1MiB, async: h}
      SYNC
      - send: {to: 1, size: 1MiB, group: side}
    else:
      - recv: {from: 0, size: 1MiB, group: side}
      - recv: {from: 0, size: 1MiB}
)Y";
  std::string without = text;
  without.replace(without.find("SYNC"), 4, "- compute: 1us");
  CHECK(timed_run(scenario_from(without)).end == ExecutionEnd::COMPLETED);
  std::string with = text;
  with.replace(with.find("SYNC"), 4, "- sync");
  const ExecutionResult stuck = timed_run(scenario_from(with));
  REQUIRE(stuck.end == ExecutionEnd::STUCK);
  CHECK(stuck.rank_status[0] == RankStatus::BLOCKED);
}

TEST_CASE("an NCCL group lets paired sends and receives progress together") {
  const Scenario grouped = scenario_from(R"Y(
scenario: grouped
world: 2
program:
  - group:
      - send: {to: "1 - rank", size: 64MiB}
      - recv: {from: "1 - rank", size: 64MiB}
)Y");
  const ExecutionResult result = timed_run(grouped);
  REQUIRE(result.end == ExecutionEnd::COMPLETED);
  CHECK(result.ops[0].size() == 2);
  CHECK(result.ops[0][0].end_ns == result.ops[0][1].end_ns);
}

TEST_CASE("comm_concurrency 1: different launch orders deadlock - equal orders only with launch_order_implicit") {
  const char* text = R"Y(
scenario: conc
world: 2
groups: {a: [0, 1], b: [0, 1]}
semantics: {comm_concurrency: 1, launch_order_implicit: IMPLICIT}
program:
  - if: "ORDER"
    then:
      - allreduce: {group: a, size: 1MiB, async: x}
      - allreduce: {group: b, size: 1MiB, async: y}
    else:
      - allreduce: {group: b, size: 1MiB, async: y}
      - allreduce: {group: a, size: 1MiB, async: x}
  - wait: x
  - wait: y
)Y";
  auto make = [&](const char* order, const char* implicit) {
    std::string s = text;
    s.replace(s.find("ORDER"), 5, order);
    s.replace(s.find("IMPLICIT"), 8, implicit);
    return scenario_from(s);
  };
  CHECK(verdict_of(make("rank == 0", "true")) == Verdict::DEADLOCK);   // different orders
  CHECK(verdict_of(make("rank == 0", "false")) == Verdict::DEADLOCK);
  CHECK(verdict_of(make("true", "true")) == Verdict::OK);              // same order, in order
  CHECK(verdict_of(make("true", "false")) == Verdict::DEADLOCK);       // same order, any start
  std::string unlimited = text;
  unlimited.replace(unlimited.find("comm_concurrency: 1"), 19, "comm_concurrency: 0");
  unlimited.replace(unlimited.find("IMPLICIT"), 8, "false");
  unlimited.replace(unlimited.find("ORDER"), 5, "rank == 0");
  CHECK(verdict_of(scenario_from(unlimited)) == Verdict::OK);
}

TEST_CASE("new_group: every world rank, in the same order") {
  const char* text = R"Y(
scenario: ng
world: 4
program:
  BODY
  - allreduce: {group: evens, size: 4KiB}
)Y";
  auto with_body = [&](const char* body) {
    std::string s = text;
    s.replace(s.find("BODY"), 4, body);
    return s;
  };
  // Every rank creates both groups in the same order: fine (ranks 1, 3 skip the all-reduce).
  const Scenario ok = scenario_from(with_body(
      "- new_group: {name: evens, ranks: [0, 2]}\n  - new_group: {name: odds, ranks: [1, 3]}\n  - if: \"rank % 2 == 1\"\n    then: [{exit}]"));
  CHECK(verdict_of(ok) == Verdict::OK);
  // Only the members call it: they wait for the others forever.
  const Scenario members_only = scenario_from(with_body(
      "- if: \"rank % 2 == 0\"\n    then: [{new_group: {name: evens, ranks: [0, 2]}}]\n    else: [{exit}]"));
  CHECK(verdict_of(members_only) == Verdict::HANG);
  // Different orders pair different groups: a mismatch.
  const Scenario orders = scenario_from(with_body(
      "- if: \"rank == 0\"\n    then:\n      - new_group: {name: odds, ranks: [1, 3]}\n      - new_group: {name: evens, ranks: [0, 2]}\n"
      "    else:\n      - new_group: {name: evens, ranks: [0, 2]}\n      - new_group: {name: odds, ranks: [1, 3]}\n  - if: \"rank % 2 == 1\"\n    then: [{exit}]"));
  CHECK(verdict_of(orders) == Verdict::MISMATCH);
}

TEST_CASE("a rank that crashes or exits leaves its peers hanging") {
  for (const char* how : {"crash", "exit"}) {
    // sync first: the first all-reduce completes, the second is never issued by rank 2.
    std::string text = R"Y(
scenario: dies
world: 3
program:
  - allreduce: {size: 1MiB}
  - if: "rank == 2"
    then: [sync, HOW]
  - allreduce: {size: 1MiB}
)Y";
    text.replace(text.find("HOW"), 3, how);
    const Scenario scenario = scenario_from(text);
    const ExecutionResult result = timed_run(scenario);
    REQUIRE(result.end == ExecutionEnd::STUCK);
    CHECK(result.rank_status[2] == (std::string(how) == "crash" ? RankStatus::CRASHED : RankStatus::EXITED));
    CHECK(result.stuck.size() == 2);
    CHECK(result.stuck[0].never_issued == std::vector<int32_t>{2});
    CHECK(verdict_of(scenario) == Verdict::HANG);
  }
}

TEST_CASE("a crash while a collective runs: the survivors never complete it") {
  const Scenario scenario = scenario_from(R"Y(
scenario: crash-inside
world: 2
program:
  - allreduce: {size: 1MiB, async: h}
  - if: "rank == 1"
    then: [crash]
  - wait: h
)Y");
  const ExecutionResult result = timed_run(scenario);
  REQUIRE(result.end == ExecutionEnd::STUCK);
  REQUIRE(result.stuck.size() == 1);
  CHECK(result.stuck[0].rank == 0);
  CHECK(result.stuck[0].waiting_for == std::vector<int32_t>{1});
}

TEST_CASE("two host threads on one group: their issue orders are explored") {
  const Scenario scenario = scenario_from(R"Y(
scenario: threads
world: 2
threads:
  main:
    - allreduce: {size: 4MiB, tag: grads}
  ckpt:
    - allreduce: {size: 4MiB, tag: ckpt}
)Y");
  const checker::CheckResult result = checker::check_scenario(scenario, {});
  CHECK(result.verdict == Verdict::MISMATCH);
  CHECK(result.exhaustive);
  const Scenario fixed = scenario_from(R"Y(
scenario: threads-fixed
world: 2
groups: {ckpt_pg: [0, 1]}
threads:
  main:
    - allreduce: {size: 4MiB, tag: grads}
  ckpt:
    - allreduce: {size: 4MiB, tag: ckpt, group: ckpt_pg, async: saved}
)Y");
  CHECK(checker::check_scenario(fixed, {}).verdict == Verdict::OK);
  // A separate group alone is not enough: both threads' synchronous ops (and a `wait`) chain
  // through the shared current stream, so opposite issue orders on two ranks deadlock.
  const Scenario chained = scenario_from(R"Y(
scenario: threads-chained
world: 2
groups: {ckpt_pg: [0, 1]}
threads:
  main:
    - allreduce: {size: 4MiB, tag: grads}
  ckpt:
    - allreduce: {size: 4MiB, tag: ckpt, group: ckpt_pg}
)Y");
  CHECK(checker::check_scenario(chained, {}).verdict == Verdict::DEADLOCK);
}

TEST_CASE("choose: per rank the branches are explored - agreed on a group they match") {
  const char* text = R"Y(
scenario: skip
world: 2
program:
  - choose:
      step: [{allreduce: {size: 1MiB}}]
      skip: []
    AGREED
)Y";
  std::string per_rank = text;
  per_rank.replace(per_rank.find("AGREED"), 6, "");
  const checker::CheckResult apart = checker::check_scenario(scenario_from(per_rank), {});
  CHECK(apart.verdict == Verdict::HANG);
  CHECK(apart.executions == 4);
  std::string agreed = text;
  agreed.replace(agreed.find("AGREED"), 6, "agreed: world");
  const checker::CheckResult together = checker::check_scenario(scenario_from(agreed), {});
  CHECK(together.verdict == Verdict::OK);
  CHECK(together.executions == 2);
}

TEST_CASE("mesh groups: each rank's tp and dp communicators") {
  const Scenario scenario = scenario_from(R"Y(
scenario: mesh
mesh: {tp: 2, dp: 2}
program:
  - allreduce: {group: tp, size: 1MiB}
  - allreduce: {group: dp, size: 1MiB}
  - if: "tp == 0"
    then: [{send: {to: "rank + 1", size: 1KiB, group: tp}}]
    else: [{recv: {from: "rank - 1", size: 1KiB, group: tp}}]
)Y");
  const ExecutionResult result = timed_run(scenario);
  REQUIRE(result.end == ExecutionEnd::COMPLETED);
  CHECK(result.ops[0][0].stream == "comm:tp");
  CHECK(result.ops[3][1].stream == "comm:dp");
}

TEST_CASE("runaway recursion through call stops at the call-depth bound") {
  const Scenario scenario = scenario_from(R"Y(
scenario: recurse
world: 1
define:
  forever:
    - compute: 1us
    - call: forever
program:
  - call: forever
)Y");
  const ExecutionResult result = timed_run(scenario);
  REQUIRE(result.end == ExecutionEnd::ERROR);
  CHECK(result.error->message ==
        "call of 'forever' exceeds the limit of 128 nested calls (on rank 0; raise it with --max-call-depth)");
}

TEST_CASE("p2p_comm pair: each peer pair has its own stream (isend/irecv)") {
  const char* text = R"Y(
scenario: pairs
world: 3
semantics: {p2p_comm: COMM}
program:
  - if: "rank == 0"
    then:
      - send: {to: 1, size: 1MiB, async: a}
      - send: {to: 2, size: 1MiB, async: b}
  - if: "rank == 1"
    then:
      - recv: {from: 2, size: 1MiB, async: a}
      - recv: {from: 0, size: 1MiB, async: b}
  - if: "rank == 2"
    then:
      - recv: {from: 0, size: 1MiB, async: a}
      - send: {to: 1, size: 1MiB, async: b}
  - wait: a
  - wait: b
)Y";
  std::string group = text;
  group.replace(group.find("COMM"), 4, "group");
  CHECK(timed_run(scenario_from(group)).end == ExecutionEnd::STUCK);
  std::string pair = text;
  pair.replace(pair.find("COMM"), 4, "pair");
  CHECK(timed_run(scenario_from(pair)).end == ExecutionEnd::COMPLETED);
}

}  // namespace lockstep::sim

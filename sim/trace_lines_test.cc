// The trace loader: NCCL groups (group_start / group_end).
#include "sim/trace_format.h"

#include <doctest/doctest.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "sim/engine.h"
#include "sim/loader.h"
#include "sim/strategy.h"
#include "sim/trace_testing.h"

namespace lockstep::sim {
namespace {

using namespace trace_testing;

// ---------------------------------------------------------------------------------------------
// NCCL groups: group_start / group_end.

constexpr std::string_view HEADER2 = R"({"lockstep_trace": 1, "scenario": "pair", "world": 2})";

// Two ranks that each send to the other, then receive: inside NCCL groups or not.
std::string send_send_pair(bool grouped) {
  std::string text(HEADER2);
  text += '\n';
  for (int rank = 0; rank < 2; ++rank) {
    const std::string r = std::to_string(rank), peer = std::to_string(1 - rank);
    if (grouped) text += R"({"rank": )" + r + R"(, "op": "group_start"})" "\n";
    text += R"({"rank": )" + r + R"(, "op": "send", "to": )" + peer + R"(, "size": 64})" "\n";
    text += R"({"rank": )" + r + R"(, "op": "recv", "from": )" + peer + R"(, "size": 64})" "\n";
    if (grouped) text += R"({"rank": )" + r + R"(, "op": "group_end"})" "\n";
  }
  return text;
}

ExecutionEnd run_once(const Scenario& s) {
  Engine engine(s);
  TimedStrategy timed;
  return engine.run(timed).end;
}

TEST_CASE("trace: group_start and group_end load as the NCCL group of the YAML language") {
  const Scenario s = loaded(send_send_pair(true));
  for (int32_t rank = 0; rank < 2; ++rank) {
    REQUIRE(body(s, rank).size() == 1);
    const Stmt& group = body(s, rank)[0];
    CHECK(group.kind == StmtKind::NCCL_GROUP);
    CHECK(group.loc.line == (rank == 0 ? 2u : 6u));
    CHECK(group.loc.col == 13);
    REQUIRE(group.body.size() == 2);
    CHECK(group.body[0].op == OpKind::SEND);
    CHECK(group.body[1].op == OpKind::RECV);
    CHECK(group.body[1].loc.line == (rank == 0 ? 4u : 8u));
  }
  // The same two ops in a YAML group give the same statements.
  LoadResult yaml = load_scenario_text(
      "scenario: pair\nworld: 2\nprogram:\n  - group:\n"
      "      - send: {to: \"1 - rank\", size: 64}\n"
      "      - recv: {from: \"1 - rank\", size: 64}\n",
      "pair.yaml", {});
  REQUIRE(yaml.ok());
  const Stmt& from_yaml = yaml.scenario->program_of(0).front().body().at(0);
  CHECK(from_yaml.kind == StmtKind::NCCL_GROUP);
  CHECK(from_yaml.body.size() == body(s, 0)[0].body.size());
}

TEST_CASE("trace: a grouped send/send pair completes, the same ungrouped deadlocks") {
  CHECK(run_once(loaded(send_send_pair(true))) == ExecutionEnd::COMPLETED);
  CHECK(run_once(loaded(send_send_pair(false))) == ExecutionEnd::STUCK);
}

TEST_CASE("trace: nested group_start counts once, as in NCCL, and threads keep their own group") {
  const Scenario s = loaded(trace4(
      R"({"rank": 0, "op": "group_start"})" "\n"
      R"({"rank": 0, "thread": "side", "op": "compute", "duration_ns": 5})" "\n"
      R"({"rank": 0, "op": "group_start"})" "\n"
      R"({"rank": 0, "op": "allreduce", "size": 8})" "\n"
      R"({"rank": 0, "op": "group_end"})" "\n"
      R"({"rank": 0, "op": "broadcast", "size": 8, "root": 0})" "\n"
      R"({"rank": 0, "op": "group_end"})" "\n"
      R"({"rank": 0, "op": "compute", "duration_ns": 5})" "\n"
      R"({"rank": 0, "op": "group_start"})" "\n"
      R"({"rank": 0, "op": "group_end"})"));
  const StmtList& main = body(s, 0, 0);
  REQUIRE(main.size() == 3);
  CHECK(main[0].kind == StmtKind::NCCL_GROUP);
  REQUIRE(main[0].body.size() == 2);
  CHECK(main[0].body[0].op == OpKind::ALLREDUCE);
  CHECK(main[0].body[1].op == OpKind::BROADCAST);
  CHECK(main[1].op == OpKind::COMPUTE);
  CHECK(main[2].kind == StmtKind::NCCL_GROUP);
  CHECK(main[2].body.empty());
  CHECK(body(s, 0, 1).size() == 1);  // the side thread's compute is outside the group
}

TEST_CASE("trace: a group used before its new_group inside an NCCL group is resolved at the end") {
  const Scenario s = loaded(trace4(
      R"({"rank": 0, "op": "group_start"})" "\n"
      R"({"rank": 0, "op": "allreduce", "group": "late", "size": 8})" "\n"
      R"({"rank": 0, "op": "group_end"})" "\n"
      R"({"rank": 0, "thread": "t", "op": "new_group", "name": "late", "ranks": [0, 1]})"));
  REQUIRE(body(s, 0).at(0).body.size() == 1);
  CHECK(s.groups[body(s, 0)[0].body[0].group].name == "late");
}

TEST_CASE("trace: NCCL group errors have their exact messages") {
  const std::vector<ErrorCase> cases = {
      {R"({"rank": 0, "op": "group_end"})",
       "t.jsonl:2:19: error: group_end without a group_start on rank 0\n"},
      {R"({"rank": 1, "thread": "io", "op": "group_start"})" "\n"
       R"({"rank": 1, "op": "group_end"})",
       "t.jsonl:2:35: error: group_start on rank 1, thread 'io' has no matching group_end\n"
       "t.jsonl:3:19: error: group_end without a group_start on rank 1\n"},
      {R"({"rank": 2, "op": "group_start"})" "\n"
       R"({"rank": 2, "op": "group_start"})" "\n"
       R"({"rank": 2, "op": "group_end"})",
       "t.jsonl:2:19: error: group_start on rank 2 has no matching group_end\n"},
      {R"({"rank": 0, "op": "group_start"})" "\n"
       R"({"rank": 0, "op": "compute", "duration_ns": 1})" "\n"
       R"({"rank": 0, "op": "wait", "handle": "h"})" "\n"
       R"({"rank": 0, "op": "group_end"})",
       "t.jsonl:3:19: error: only communication operations may appear in an NCCL group "
       "(group_start at line 2), got 'compute'\n"
       "t.jsonl:4:19: error: only communication operations may appear in an NCCL group "
       "(group_start at line 2), got 'wait'\n"},
      {R"({"rank": 0, "op": "group_start"})" "\n"
       R"({"rank": 0, "op": "send", "to": 1, "size": 64, "async": "s"})" "\n"
       R"({"rank": 0, "op": "group_end"})",
       "t.jsonl:3:57: error: 'async' is not allowed in an NCCL group (group_start at line 2): "
       "the main stream waits for the whole group\n"},
      {R"({"rank": 0, "op": "group_start", "size": 4})",
       "t.jsonl:2:34: error: 'group_start' takes no argument 'size'; valid arguments: none\n"},
      {R"({"rank": 0, "op": "group_end", "grup": "x"})",
       "t.jsonl:2:32: error: unknown argument 'grup' for 'group_end' (did you mean 'group'?); "
       "valid arguments: none\n"},
      {R"({"rank": 0, "op": "group_stat"})",
       "t.jsonl:2:19: error: unknown operation 'group_stat' (did you mean 'group_start'?); valid "
       "operations: all_to_all, all_to_all_single, allgather, allgather_v, allreduce, barrier, broadcast, compute, crash, exit, "
       "gather, group_end, group_start, new_group, recv, reduce, reduce_scatter, scatter, send, "
       "sleep, sync, wait\n"},
  };
  for (const ErrorCase& c : cases) {
    INFO(c.ops);
    CHECK(messages(trace4(c.ops)) == c.expected);
  }
}

TEST_CASE("trace: NCCL groups write back as group_start and group_end lines (round trip)") {
  const std::string text =
      R"({"lockstep_trace": 1, "scenario": "g", "world": 2})" "\n"
      R"({"rank": 0, "op": "group_start"})" "\n"
      R"({"rank": 0, "op": "send", "to": 1, "size": 64, "stream": "s"})" "\n"
      R"({"rank": 0, "op": "recv", "from": 1, "size": 64})" "\n"
      R"({"rank": 0, "op": "group_end"})" "\n"
      R"({"rank": 0, "op": "sync", "stream": "s"})" "\n"
      R"({"rank": 1, "thread": "comm", "op": "group_start"})" "\n"
      R"({"rank": 1, "thread": "comm", "op": "send", "to": 0, "size": 64})" "\n"
      R"({"rank": 1, "thread": "comm", "op": "recv", "from": 0, "size": 64})" "\n"
      R"({"rank": 1, "thread": "comm", "op": "group_end"})" "\n"
      R"({"rank": 1, "thread": "comm", "op": "group_start"})" "\n"
      R"({"rank": 1, "thread": "comm", "op": "group_end"})" "\n";
  const Scenario s = loaded(text);
  REQUIRE(trace_write_problem(s).empty());
  CHECK(write_trace(s) == text);
  // A YAML NCCL group writes the same way.
  LoadResult yaml = load_scenario_text(
      "scenario: g\nworld: 2\nprogram:\n  - group:\n"
      "      - send: {to: \"1 - rank\", size: 64}\n"
      "      - recv: {from: \"1 - rank\", size: 64}\n",
      "g.yaml", {});
  REQUIRE(yaml.ok());
  CHECK(trace_write_problem(*yaml.scenario) == "g.yaml:5:9: an expression that is not a constant");
  LoadResult flat = load_scenario_text(
      "scenario: pair\nworld: 2\nranks:\n  0:\n    - group:\n"
      "      - send: {to: 1, size: 64}\n"
      "      - recv: {from: 1, size: 64}\n"
      "  1:\n    - group:\n"
      "      - send: {to: 0, size: 64}\n"
      "      - recv: {from: 0, size: 64}\n",
      "pair.yaml", {});
  REQUIRE(flat.ok());
  REQUIRE(trace_write_problem(*flat.scenario).empty());
  CHECK(write_trace(*flat.scenario) == send_send_pair(true));
}

}  // namespace
}  // namespace lockstep::sim

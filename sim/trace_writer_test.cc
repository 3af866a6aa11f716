// The trace writer: canonical traces, round trips, what cannot be written.
#include "sim/trace_format.h"

#include <doctest/doctest.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "sim/loader.h"
#include "sim/trace_testing.h"

namespace lockstep::sim {
namespace {

using namespace trace_testing;

// ---------------------------------------------------------------------------------------------
// Writing.

constexpr std::string_view CANONICAL =
    R"({"lockstep_trace": 1, "scenario": "round \"trip\"", "description": "every op\n", "source": "x", "expect": "hang", "world": 4, "groups": {"evens": [0, 2]}, "semantics": {"p2p": "eager", "eager_limit": 4096, "p2p_comm": "pair", "comm_concurrency": 1, "launch_order_implicit": true, "timeout_ns": 99, "algorithm": "tree", "link": {"latency_ns": 7, "bandwidth_bytes_per_s": 1000000}}})"
    "\n"
    R"({"rank": 0, "op": "new_group", "name": "pair", "ranks": [0, 1]})"
    "\n"
    R"({"rank": 0, "op": "allreduce", "group": "evens", "size": 1024, "dtype": "fp32", "tag": "w\u0001", "stream": "s", "async": "h"})"
    "\n"
    R"({"rank": 0, "op": "wait", "handle": "h"})"
    "\n"
    R"({"rank": 0, "op": "broadcast", "root": 1, "size": 8})"
    "\n"
    R"({"rank": 0, "op": "send", "group": "pair", "to": 1, "size": 16})"
    "\n"
    R"({"rank": 0, "op": "barrier", "dtype": "int8"})"
    "\n"
    R"({"rank": 0, "op": "sync", "stream": "s"})"
    "\n"
    R"({"rank": 0, "thread": "bg", "op": "compute", "duration_ns": 1000})"
    "\n"
    R"({"rank": 0, "thread": "bg", "op": "sleep", "duration_ns": 0})"
    "\n"
    R"({"rank": 1, "op": "new_group", "name": "pair", "ranks": [0, 1]})"
    "\n"
    R"({"rank": 1, "op": "recv", "group": "pair", "from": "any", "size": 16})"
    "\n"
    R"({"rank": 1, "op": "recv", "from": 3, "size": 16})"
    "\n"
    R"({"rank": 1, "op": "sync"})"
    "\n"
    R"({"rank": 1, "op": "exit"})"
    "\n"
    R"({"rank": 3, "op": "crash"})"
    "\n";

TEST_CASE("trace: a canonical trace loads and writes back byte for byte") {
  const Scenario s = loaded(CANONICAL);
  CHECK(trace_write_problem(s).empty());
  CHECK(write_trace(s) == CANONICAL);
}

TEST_CASE("trace: write then load round-trips a trace in any key order and spacing") {
  const std::string text =
      "{\"world\":2,\"scenario\":\"x\",\"lockstep_trace\":1}\n"
      "{\"size\":5,\"op\":\"allreduce\",\"rank\":1,\"dtype\":\"half\"}\n"
      "{\"op\":\"allreduce\",\"rank\":0,\"size\":5,\"dtype\":\"float16\"}\n";
  const std::string written = write_trace(loaded(text));
  CHECK(written ==
        "{\"lockstep_trace\": 1, \"scenario\": \"x\", \"world\": 2}\n"
        "{\"rank\": 0, \"op\": \"allreduce\", \"size\": 5, \"dtype\": \"fp16\"}\n"
        "{\"rank\": 1, \"op\": \"allreduce\", \"size\": 5, \"dtype\": \"fp16\"}\n");
  CHECK(write_trace(loaded(written)) == written);
}

TEST_CASE("trace: a scenario built in memory (as import builds it) round-trips") {
  Scenario s;
  s.name = "imported";
  s.world = 2;
  s.groups.push_back(make_group("world", {}, {0, 1}, 2));
  GroupDef tp = make_group("tp", {}, {0, 1}, 2);
  tp.from_new_group = true;
  s.groups.push_back(tp);
  for (int32_t rank = 0; rank < 2; ++rank) {
    ThreadDef thread{"main", {}, {}};
    Stmt make;
    make.op = OpKind::NEW_GROUP;
    make.new_group = 1;
    thread.mutable_body().push_back(make);
    Stmt op;
    op.op = rank == 0 ? OpKind::SEND : OpKind::RECV;
    op.group = 1;
    op.has_peer = true;
    op.peer = Expr::constant(1 - rank);
    op.size = Expr::constant(64);
    thread.mutable_body().push_back(op);
    s.programs.push_back(RankProgram{thread});
    s.rank_program.push_back(static_cast<uint32_t>(rank));
  }
  REQUIRE(trace_write_problem(s).empty());
  const std::string written = write_trace(s);
  CHECK(written ==
        "{\"lockstep_trace\": 1, \"scenario\": \"imported\", \"world\": 2}\n"
        "{\"rank\": 0, \"op\": \"new_group\", \"name\": \"tp\", \"ranks\": [0, 1]}\n"
        "{\"rank\": 0, \"op\": \"send\", \"group\": \"tp\", \"to\": 1, \"size\": 64}\n"
        "{\"rank\": 1, \"op\": \"new_group\", \"name\": \"tp\", \"ranks\": [0, 1]}\n"
        "{\"rank\": 1, \"op\": \"recv\", \"group\": \"tp\", \"from\": 0, \"size\": 64}\n");
  const Scenario back = loaded(written);
  CHECK(body(back, 1)[1].op == OpKind::RECV);
  CHECK(body(back, 1)[1].peer.value == 0);
  CHECK(write_trace(back) == written);
}

TEST_CASE("trace: a YAML scenario of constant ops writes as a trace with the same ops") {
  LoadResult yaml = load_scenario_text(
      "scenario: flat\n"
      "world: 2\n"
      "groups: {both: [0, 1]}\n"
      "program:\n"
      "  - compute: 20us\n"
      "  - allreduce: {group: both, size: 1MiB, dtype: fp16, tag: b0}\n"
      "  - broadcast: {size: 4KiB, root: 1}\n",
      "flat.yaml", {});
  INFO(messages(yaml));
  REQUIRE(yaml.ok());
  REQUIRE(trace_write_problem(*yaml.scenario).empty());
  const std::string written = write_trace(*yaml.scenario);
  const Scenario trace = loaded(written);
  for (int32_t rank = 0; rank < 2; ++rank) {
    const StmtList& from_yaml = yaml.scenario->program_of(rank).front().body();
    const StmtList& from_trace = body(trace, rank);
    REQUIRE(from_yaml.size() == from_trace.size());
    for (size_t i = 0; i < from_yaml.size(); ++i) {
      CHECK(from_yaml[i].op == from_trace[i].op);
      CHECK(from_yaml[i].size.value == from_trace[i].size.value);
      CHECK(from_yaml[i].duration.value == from_trace[i].duration.value);
      CHECK(from_yaml[i].dtype == from_trace[i].dtype);
      CHECK(from_yaml[i].tag == from_trace[i].tag);
      CHECK(from_yaml[i].extra().root.value == from_trace[i].extra().root.value);
      CHECK(trace.groups[from_trace[i].group].name ==
            yaml.scenario->groups[from_yaml[i].group].name);
    }
  }
}

TEST_CASE("trace: scenarios with control flow or expressions cannot be written") {
  LoadResult yaml = load_scenario_text(
      "scenario: loop\nworld: 2\nprogram:\n  - repeat: 2\n    do:\n      - compute: 1ms\n",
      "loop.yaml", {});
  REQUIRE(yaml.ok());
  CHECK(trace_write_problem(*yaml.scenario) ==
        "loop.yaml:4:5: a statement other than an operation");
  LoadResult ranked = load_scenario_text(
      "scenario: r\nworld: 2\nprogram:\n  - allreduce: {size: \"rank * 4\"}\n", "r.yaml", {});
  REQUIRE(ranked.ok());
  CHECK(trace_write_problem(*ranked.scenario) ==
        "r.yaml:4:5: an expression that is not a constant");
  Scenario empty;
  CHECK(trace_write_problem(empty) == "the scenario has no ranks");
}

}  // namespace
}  // namespace lockstep::sim

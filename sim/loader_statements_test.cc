// The scenario loader: operations, statements, threads, recorded ranks, defines, handles.
#include "sim/loader.h"

#include <doctest/doctest.h>

#include <array>

#include "sim/loader_testing.h"

namespace lockstep::sim {
namespace {

using namespace loader_testing;

TEST_CASE("loader: ops take their arguments, defaults and dtype aliases") {
  const LoadResult result = load(with_program(
      R"y(  - broadcast: {group: evens, size: "2 * 4KiB", root: 2, dtype: half, tag: w.0}
  - reduce: {size: 8, root: 3, dtype: double}
  - send: {to: "(rank + 1) % world", size: 1MB, dtype: float}
  - recv: {from: any, size: 1MB, group: evens}
  - recv: {from: 0, size: 0}
  - barrier
  - barrier:
  - barrier: {dtype: fp32, tag: end}
  - sleep: 1.5s
  - all_to_all: {size: 1, dtype: fp8_e5m2}
)y",
      "groups: {evens: [0, 2]}\n"));
  const Scenario& s = loaded(result);
  const StmtList& body = s.programs.at(0).at(0).body();
  REQUIRE(body.size() == 10);
  CHECK(body[0].op == OpKind::BROADCAST);
  CHECK(body[0].group == 1);
  CHECK(value_of(body[0].size) == 8192);
  CHECK(body[0].has_root);
  CHECK(value_of(body[0].extra().root) == 2);
  CHECK(body[0].dtype == DType::FP16);
  CHECK(body[0].tag == "w.0");
  CHECK(body[1].dtype == DType::FP64);
  CHECK(body[1].group == 0);
  CHECK(body[2].op == OpKind::SEND);
  CHECK(body[2].has_peer);
  CHECK_FALSE(body[2].peer_any);
  const std::array<int64_t, 2> env = {3, 4};
  CHECK(eval_expr(body[2].peer, env) == 0);
  CHECK(value_of(body[2].size) == 1'000'000);
  CHECK(body[2].dtype == DType::FP32);
  CHECK(body[3].op == OpKind::RECV);
  CHECK(body[3].has_peer);
  CHECK(body[3].peer_any);
  CHECK(body[3].group == 1);
  CHECK(value_of(body[4].peer) == 0);
  CHECK(value_of(body[4].size) == 0);
  CHECK(body[5].op == OpKind::BARRIER);
  CHECK(body[5].group == 0);
  CHECK(value_of(body[5].size) == 2);
  CHECK(body[5].loc == SourceLoc{10, 5});
  CHECK(body[6].group == 0);
  CHECK(value_of(body[7].size) == 4);
  CHECK(body[7].tag == "end");
  CHECK(body[8].op == OpKind::SLEEP);
  CHECK(value_of(body[8].duration) == 1'500'000'000);
  CHECK(body[9].dtype == DType::FP8_E5M2);
}

TEST_CASE("loader: every dtype name and alias") {
  const std::vector<std::pair<std::string, DType>> names = {
      {"int8", DType::INT8},        {"uint8", DType::UINT8},   {"int32", DType::INT32},
      {"uint32", DType::UINT32},    {"int64", DType::INT64},   {"uint64", DType::UINT64},
      {"fp16", DType::FP16},        {"float16", DType::FP16},  {"half", DType::FP16},
      {"bf16", DType::BF16},        {"bfloat16", DType::BF16}, {"fp32", DType::FP32},
      {"float32", DType::FP32},     {"float", DType::FP32},    {"fp64", DType::FP64},
      {"float64", DType::FP64},     {"double", DType::FP64},   {"fp8_e4m3", DType::FP8_E4M3},
      {"fp8_e5m2", DType::FP8_E5M2}};
  for (const auto& [name, dtype] : names) {
    CAPTURE(name);
    const LoadResult result = load(with_program("  - allreduce: {size: 1, dtype: " + name + "}\n"));
    CHECK(loaded(result).programs.at(0).at(0).body().at(0).dtype == dtype);
  }
}

TEST_CASE("loader: if and repeat with loop variables get their own slots") {
  const LoadResult result = load(with_program(R"y(  - repeat: 2
    as: i
    do:
      - if: "i == 0 && rank < 2"
        then:
          - compute: "(i + 1) * 1ms"
        else:
          - sleep: 1us
  - repeat: 3
    as: i
    do:
      - repeat: n
        as: j
        do:
          - send: {to: "j % world", size: "i * 1KiB"}
)y",
                                              "params: {n: 2}\n"));
  const Scenario& s = loaded(result);
  CHECK(s.slot_names == std::vector<std::string>{"rank", "world", "n", "i", "i", "j"});
  const StmtList& body = s.programs.at(0).at(0).body();
  REQUIRE(body.size() == 2);
  CHECK(body[0].extra().var_slot == 3);
  CHECK(value_of(body[0].extra().count) == 2);
  const Stmt& branch = body[0].body.at(0);
  CHECK(branch.kind == StmtKind::IF);
  CHECK(branch.loc == SourceLoc{8, 9});
  const std::array<int64_t, 4> env = {1, 4, 2, 0};
  CHECK(eval_expr(branch.extra().cond, env) == 1);
  REQUIRE(branch.body.size() == 1);
  CHECK(eval_expr(branch.body[0].duration, env) == 1'000'000);
  REQUIRE(branch.extra().else_body.size() == 1);
  CHECK(branch.extra().else_body[0].op == OpKind::SLEEP);
  CHECK(body[1].extra().var_slot == 4);
  const Stmt& inner = body[1].body.at(0);
  CHECK(inner.extra().var_slot == 5);
  CHECK(inner.extra().count.op == ExprOp::VAR);
  CHECK(inner.extra().count.value == 2);
  const std::array<int64_t, 6> deep = {0, 4, 2, 0, 2, 5};
  CHECK(eval_expr(inner.body.at(0).peer, deep) == 1);
  CHECK(eval_expr(inner.body.at(0).size, deep) == 2048);
}

TEST_CASE("loader: statements report unknown and unsupported operations and arguments") {
  CHECK(
      problems(with_program(R"y(  - allreduc: {size: 1}
  - sync
  - allreduce: {size: 1, async: h}
  - allreduce: {sise: 1, root: 0}
  - allreduce: dp
  - send: {size: 1}
  - allreduce:
    size: 1
  - {compute: 1ms, sleep: 1ms}
  - compute:
  - compute: {time: 1ms}
  - repeat: 2
  - if: 1
    thne: []
)y")) ==
      std::vector<std::string>{
          "4:5: error: unknown operation 'allreduc' (did you mean 'allreduce'?); valid operations: "
          "all_to_all, all_to_all_single, allgather, allgather_v, allreduce, barrier, broadcast, call, choose, compute, crash, "
          "exit, gather, group, if, new_group, recv, reduce, reduce_scatter, repeat, scatter, "
          "send, sleep, sync, wait",
          "7:17: error: unknown argument 'sise' for 'allreduce' (did you mean 'size'?); valid "
          "arguments: async, dtype, group, size, stream, tag",
          "7:26: error: 'allreduce' takes no argument 'root'; valid arguments: async, dtype, "
          "group, size, stream, tag",
          "8:5: error: 'allreduce' requires argument 'size'",
          "8:16: error: unknown group 'dp'; groups: world",
          "9:5: error: 'send' requires argument 'to'",
          "10:5: error: 'allreduce' requires argument 'size'",
          "11:5: error: unexpected key 'size' next to 'allreduce'; arguments go under the "
          "operation",
          "12:20: error: one statement per list item: 'sleep' needs its own '- ' (after 'compute')",
          "13:5: error: 'compute' requires a duration",
          "14:15: error: unknown argument 'time' for 'compute'; valid arguments: duration, stream",
          "15:5: error: 'repeat' requires 'do'",
          "16:5: error: 'if' requires 'then'",
          "17:5: error: unknown key 'thne' in 'if' (did you mean 'then'?); valid keys: else, if, "
          "then"});
}

TEST_CASE("loader: loop variables may not shadow names in scope") {
  CHECK(problems(with_program(R"y(  - repeat: 1
    as: n
    do:
      - repeat: 1
        as: i
        do:
          - repeat: 1
            as: i
            do: []
  - repeat: 1
    as: world
    do: []
  - repeat: 1
    as: "true"
    do: []
  - repeat: -1
    do: []
)y",
                              "params: {n: 1}\n")) ==
        std::vector<std::string>{
            "6:9: error: loop variable 'n' shadows the parameter 'n'",
            "12:17: error: loop variable 'i' shadows the enclosing loop variable 'i'",
            "15:9: error: loop variable 'world' shadows the built-in 'world'",
            "18:9: error: 'true' is reserved and cannot name a loop variable",
            "20:13: error: repeat count must not be negative, got -1"});
}

TEST_CASE("loader: negative constant sizes and durations are errors") {
  CHECK(problems(with_program("  - allreduce: {size: \"1 - 2\"}\n  - compute: -1ms\n")) ==
        std::vector<std::string>{"4:23: error: size must not be negative, got -1",
                                 "5:14: error: duration must not be negative, got -1000000"});
}

TEST_CASE("loader: threads give one program of several host threads") {
  const Scenario s = loaded(load(R"y(scenario: t
world: 2
threads:
  main:
    - allreduce: {size: 1MiB}
  bg:
    - compute: {duration: 1ms, stream: side}
    - sync: side
    - sync
)y"));
  REQUIRE(s.programs.size() == 1);
  REQUIRE(s.programs[0].size() == 2);
  CHECK(s.programs[0][0].name == "main");
  CHECK(s.programs[0][0].loc == SourceLoc{4, 3});
  CHECK(s.programs[0][1].name == "bg");
  const StmtList& bg = s.programs[0][1].body();
  REQUIRE(bg.size() == 3);
  CHECK(bg[0].op == OpKind::COMPUTE);
  CHECK(bg[0].stream == "side");
  CHECK(value_of(bg[0].duration) == 1'000'000);
  CHECK(bg[1].op == OpKind::SYNC);
  CHECK(bg[1].stream == "side");
  CHECK(bg[2].op == OpKind::SYNC);
  CHECK(bg[2].stream.empty());
  CHECK(s.rank_program == std::vector<uint32_t>{0, 0});
}

TEST_CASE("loader: recorded ranks with ranges and lists map every rank to its program") {
  const Scenario s = loaded(load(R"y(scenario: t
world: 7
ranks:
  0:
    - allreduce: {size: 4MiB}
    - group:
        - send: {to: 1, size: 1KiB}
  "1-3": [allreduce: {size: 4MiB}, exit]
  "4,6": [crash]
  5: []
)y"));
  REQUIRE(s.programs.size() == 4);
  CHECK(s.rank_program == std::vector<uint32_t>{0, 1, 1, 1, 2, 3, 2});
  CHECK(s.programs[0].at(0).name == "main");
  CHECK(s.programs[0].at(0).loc == SourceLoc{4, 3});
  const StmtList& first = s.programs[0][0].body();
  REQUIRE(first.size() == 2);
  CHECK(first[1].kind == StmtKind::NCCL_GROUP);
  CHECK(first[1].body.at(0).op == OpKind::SEND);
  CHECK(s.programs[1][0].body().at(1).op == OpKind::EXIT);
  CHECK(s.programs[2][0].body().at(0).op == OpKind::CRASH);
  CHECK(s.programs[3][0].body().empty());
  CHECK(&s.program_of(6) == &s.programs[2]);
}

TEST_CASE("loader: choose keeps its branches in order - agreed names a group") {
  const Scenario s = loaded(load(R"y(scenario: t
mesh: {dp: 2}
program:
  - choose:
      skip: []
      step: [allreduce: {size: 1MiB, group: dp}]
      stop: [exit]
  - choose: {a: [barrier], b: [barrier: dp]}
    agreed: dp
)y"));
  const StmtList& body = s.program_of(0).at(0).body();
  REQUIRE(body.size() == 2);
  CHECK(body[0].kind == StmtKind::CHOOSE);
  CHECK_FALSE(body[0].agreed);
  REQUIRE(body[0].branches.size() == 3);
  CHECK(body[0].branches[0].label == "skip");
  CHECK(body[0].branches[0].loc == SourceLoc{5, 7});
  CHECK(body[0].branches[0].body.empty());
  CHECK(body[0].branches[1].label == "step");
  CHECK(body[0].branches[1].body.at(0).group == 1);
  CHECK(body[0].branches[2].body.at(0).op == OpKind::EXIT);
  CHECK(body[1].agreed);
  CHECK(body[1].group == 1);
  CHECK(body[1].branches.at(1).body.at(0).group == 1);
}

TEST_CASE("loader: define and call: parameters get slots, arguments follow the define's order") {
  const LoadResult result = load(R"y(scenario: t
world: 4
params: {mb: 2}
define:
  forward:
    params: [chunk, peer]
    do:
      - compute: "chunk * 1ms"
      - repeat: 2
        as: i
        do: [send: {to: peer, size: "i * chunk"}]
  again: [call: again]
  plain: [barrier]
program:
  - repeat: mb
    as: m
    do:
      - call: forward
        with: {peer: "(rank + 1) % world", chunk: "m + 1"}
  - call: plain
)y");
  const Scenario& s = loaded(result);
  CHECK(problems(result) == std::vector<std::string>{});  // `again` calls itself: called
  REQUIRE(s.defines.size() == 3);
  const Define& forward = s.defines[0];
  CHECK(forward.name == "forward");
  CHECK(forward.loc == SourceLoc{5, 3});
  CHECK(forward.params == std::vector<std::string>{"chunk", "peer"});
  CHECK(forward.param_slots == std::vector<int32_t>{3, 4});
  CHECK(s.slot_names == std::vector<std::string>{"rank", "world", "mb", "chunk", "peer", "i", "m"});
  REQUIRE(forward.body.size() == 2);
  CHECK(forward.body[1].extra().var_slot == 5);
  CHECK(s.defines[1].body.at(0).kind == StmtKind::CALL);
  CHECK(s.defines[1].body.at(0).extra().callee == 1);
  const StmtList& body = s.program_of(0).at(0).body();
  const Stmt& call = body.at(0).body.at(0);
  CHECK(call.kind == StmtKind::CALL);
  CHECK(call.extra().callee == 0);
  REQUIRE(call.extra().args.size() == 2);
  const std::array<int64_t, 7> env = {3, 4, 2, 0, 0, 0, 1};
  CHECK(eval_expr(call.extra().args[0], env) == 2);  // chunk = m + 1
  CHECK(eval_expr(call.extra().args[1], env) == 0);  // peer
  CHECK(body.at(1).extra().callee == 2);
  CHECK(body.at(1).extra().args.empty());
}

TEST_CASE("loader: define errors and warnings") {
  CHECK(problems(with_program("  - call: f\n    with: {x: 1}\n  - call: g\n",
                              "define:\n  f: [barrier]\n  unused: [barrier]\n")) ==
        std::vector<std::string>{
            "8:12: error: unknown argument 'x' for 'f'; 'f' takes no arguments",
            "9:11: error: unknown define 'g' (did you mean 'f'?); defines: f, unused"});
  CHECK(problems(with_program("  - call: f\n", "define:\n  f: [barrier]\n  unused: [barrier]\n")) ==
        std::vector<std::string>{"5:3: warning: define 'unused' is never called"});
  CHECK(problems(with_program("  - call: f\n")) ==
        std::vector<std::string>{"4:11: error: unknown define 'f'; the scenario has no 'define'"});
}

TEST_CASE("loader: NCCL groups hold communication operations only") {
  const Scenario s = loaded(load(with_program(R"y(  - group:
      - send: {to: "(rank + 1) % world", size: 1MiB}
      - recv: {from: "(rank + 3) % world", size: 1MiB}
      - allreduce: {size: 1KiB}
)y")));
  const Stmt& group = s.program_of(0).at(0).body().at(0);
  CHECK(group.kind == StmtKind::NCCL_GROUP);
  CHECK(group.loc == SourceLoc{4, 5});
  REQUIRE(group.body.size() == 3);
  CHECK(group.body[2].op == OpKind::ALLREDUCE);
  CHECK(problems(with_program("  - group:\n      - sleep: 1ms\n      - wait: h\n")) ==
        std::vector<std::string>{
            "5:9: error: only communication operations may appear in an NCCL group ('group:'), "
            "got 'sleep'",
            "6:9: error: only communication operations may appear in an NCCL group ('group:'), "
            "got 'wait'"});
}

TEST_CASE("loader: async handles, wait, streams, exit and crash") {
  const LoadResult result = load(with_program(R"y(  - allreduce: {size: 1MiB, async: grads, stream: side}
  - send: {to: 1, size: 1KiB, async: s}
  - barrier: {async: b}
  - compute: 2ms
  - wait: grads
  - wait: s
  - exit
  - crash:
)y"));
  const Scenario& s = loaded(result);
  CHECK(problems(result) ==
        std::vector<std::string>{"6:22: warning: handle 'b' is never waited for (no 'wait: b')",
                                 "10:5: warning: exit follows GPU work the host has not waited for (compute at "
                                 "s.yaml:7:5 and 1 more): the rank ends without waiting, and what has not run "
                                 "never runs; add 'sync' before it, or write 'exit: {queued_work: abort}' if that "
                                 "is meant"});
  const StmtList& body = s.program_of(0).at(0).body();
  REQUIRE(body.size() == 8);
  CHECK(body[0].handle == "grads");
  CHECK(body[0].stream == "side");
  CHECK(body[1].handle == "s");
  CHECK(body[1].stream.empty());
  CHECK(body[4].op == OpKind::WAIT);
  CHECK(body[4].handle == "grads");
  CHECK(body[6].op == OpKind::EXIT);
  CHECK(body[7].op == OpKind::CRASH);
}

TEST_CASE("loader: handles are per program - a define's handles are shared") {
  CHECK(problems(R"y(scenario: t
world: 2
ranks:
  0: [allreduce: {size: 1, async: h}, wait: h]
  1: [allreduce: {size: 1}, wait: h]
)y") == std::vector<std::string>{"5:35: error: unknown handle 'h'; no operation has 'async'"});
  CHECK(problems(R"y(scenario: t
world: 2
define:
  start: [allreduce: {size: 1, async: h}]
program:
  - call: start
  - wait: h
)y") == std::vector<std::string>{});
}

}  // namespace
}  // namespace lockstep::sim

namespace lockstep::sim {

TEST_CASE("loader: a dtype that starts like bfloat16 suggests bf16 and others the closest spelling") {
  const std::vector<std::string> got = loader_testing::problems(
      "scenario: s\nworld: 2\nprogram:\n  - allreduce: {size: 1, dtype: bfloat}\n  - allreduce: {size: 1, dtype: flaot}\n");
  REQUIRE(got.size() == 2);
  CHECK(got[0].starts_with("4:33: error: invalid value 'bfloat' for 'dtype' (did you mean 'bf16'?); valid values: bf16, "));
  CHECK(got[1].starts_with("5:33: error: invalid value 'flaot' for 'dtype' (did you mean 'float'?); valid values: "));
}

}  // namespace lockstep::sim

#include "sim/loader.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "sim/expr.h"

namespace doctest {
template <>
struct StringMaker<std::vector<std::string>> {
  static String convert(const std::vector<std::string>& lines) {
    std::string out = "\n";
    for (const std::string& line : lines) out += "    " + line + "\n";
    return out.c_str();
  }
};
template <>
struct StringMaker<lockstep::sim::SourceLoc> {
  static String convert(const lockstep::sim::SourceLoc& loc) {
    return (std::to_string(loc.line) + ":" + std::to_string(loc.col)).c_str();
  }
};
}  // namespace doctest

namespace lockstep::sim {
namespace {

LoadResult load(std::string_view text, std::vector<ParamOverride> overrides = {},
                const LoadLimits& limits = {}) {
  return load_scenario_text(text, "s.yaml", overrides, limits);
}

// Every diagnostic as "line:col: severity: message".
std::vector<std::string> problems(const LoadResult& result) {
  std::vector<std::string> out;
  for (const Diagnostic& d : result.diagnostics) {
    CHECK(d.file == "s.yaml");
    const char* severity = d.severity == Severity::ERROR     ? "error"
                           : d.severity == Severity::WARNING ? "warning"
                                                             : "note";
    out.push_back(std::to_string(d.loc.line) + ":" + std::to_string(d.loc.col) + ": " + severity +
                  ": " + d.message);
  }
  return out;
}

std::vector<std::string> problems(std::string_view text, std::vector<ParamOverride> overrides = {},
                                  const LoadLimits& limits = {}) {
  const LoadResult result = load(text, std::move(overrides), limits);
  CHECK(result.ok() ==
        std::none_of(result.diagnostics.begin(), result.diagnostics.end(),
                     [](const Diagnostic& d) { return d.severity == Severity::ERROR; }));
  return problems(result);
}

// A scenario of `world` ranks whose program is `program` (indented by the caller as a list).
std::string with_program(std::string_view program, std::string_view extra = "", int world = 4) {
  return "scenario: t\nworld: " + std::to_string(world) + "\n" + std::string(extra) + "program:\n" +
         std::string(program);
}

const Scenario& loaded(const LoadResult& result) {
  if (!result.ok()) {
    for (const Diagnostic& d : result.diagnostics) MESSAGE(format_diagnostic(d, result.text));
  }
  REQUIRE(result.ok());
  return *result.scenario;
}

int64_t value_of(const Expr& expr) {
  REQUIRE(expr.is_constant());
  return expr.value;
}

constexpr std::string_view LANGUAGE_EXAMPLE = R"y(scenario: uneven-batches
description: One rank gets one batch fewer; the rest wait in the last all-reduce.
source: https://example.org/issue/1
expect: deadlock
world: 4
params: {batches: 3}
groups: {evens: [2, 0]}
semantics: {p2p: rendezvous}
program:
  - repeat: "batches - (rank == 3)"
    do:
      - compute: 20ms
      - allreduce: {group: world, size: 100MiB}
  - barrier: evens
)y";

TEST_CASE("loader: the language reference's example loads into the model") {
  const LoadResult result = load(LANGUAGE_EXAMPLE);
  const Scenario& s = loaded(result);
  CHECK(result.diagnostics.empty());
  CHECK(s.path == "s.yaml");
  CHECK(s.text == LANGUAGE_EXAMPLE);
  CHECK(result.text.empty());  // without diagnostics the text is the scenario's alone
  CHECK(s.name == "uneven-batches");
  CHECK(s.description == "One rank gets one batch fewer; the rest wait in the last all-reduce.");
  CHECK(s.source_url == "https://example.org/issue/1");
  REQUIRE(s.expect.has_value());
  CHECK(*s.expect == Verdict::DEADLOCK);
  CHECK(s.expect_loc == SourceLoc{4, 9});
  CHECK(s.world == 4);
  REQUIRE(s.params.size() == 1);
  CHECK(s.params[0].name == "batches");
  CHECK(s.params[0].value == 3);
  CHECK(s.params[0].loc == SourceLoc{6, 10});
  CHECK_FALSE(s.params[0].overridden);
  REQUIRE(s.groups.size() == 2);
  CHECK(s.groups[0].name == "world");
  CHECK(s.groups[0].comms.at(0) == std::vector<int32_t>{0, 1, 2, 3});
  CHECK(s.groups[1].name == "evens");
  CHECK(s.groups[1].loc == SourceLoc{7, 10});
  CHECK(s.groups[1].comms.at(0) == std::vector<int32_t>{0, 2});
  CHECK(s.semantics.p2p == P2pMode::RENDEZVOUS);
  CHECK(s.slot_names == std::vector<std::string>{"rank", "world", "batches"});

  REQUIRE(s.programs.at(0).size() == 1);
  CHECK(s.programs.at(0)[0].name == "main");
  CHECK(s.programs.at(0)[0].loc == SourceLoc{9, 1});
  const StmtList& body = s.programs.at(0)[0].body();
  REQUIRE(body.size() == 2);
  const Stmt& repeat = body[0];
  CHECK(repeat.kind == StmtKind::REPEAT);
  CHECK(repeat.loc == SourceLoc{10, 5});
  CHECK(repeat.extra().var_slot == -1);
  const std::array<int64_t, 3> rank3 = {3, 4, 3};
  const std::array<int64_t, 3> rank0 = {0, 4, 3};
  CHECK(eval_expr(repeat.extra().count, rank3) == 2);
  CHECK(eval_expr(repeat.extra().count, rank0) == 3);
  CHECK(repeat.extra().count.loc == SourceLoc{10, 22});  // the '-' inside the quoted string
  REQUIRE(repeat.body.size() == 2);
  CHECK(repeat.body[0].kind == StmtKind::OP);
  CHECK(repeat.body[0].op == OpKind::COMPUTE);
  CHECK(value_of(repeat.body[0].duration) == 20'000'000);
  const Stmt& allreduce = repeat.body[1];
  CHECK(allreduce.op == OpKind::ALLREDUCE);
  CHECK(allreduce.loc == SourceLoc{13, 9});
  CHECK(allreduce.group == 0);
  CHECK(value_of(allreduce.size) == 100LL << 20);
  CHECK(allreduce.dtype == DType::BF16);
  CHECK_FALSE(allreduce.has_root);
  CHECK(allreduce.tag.empty());
  const Stmt& barrier = body[1];
  CHECK(barrier.op == OpKind::BARRIER);
  CHECK(barrier.group == 1);
  CHECK(value_of(barrier.size) == 2);
}

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

TEST_CASE("loader: semantics settings") {
  const LoadResult result = load(with_program(
      "  - barrier\n",
      "semantics:\n  p2p: eager\n  eager_limit: 64KiB\n  p2p_comm: pair\n  comm_concurrency: 1\n"
      "  launch_order_implicit: true\n  timeout: 30s\n"));
  const Semantics& semantics = loaded(result).semantics;
  CHECK(semantics.p2p == P2pMode::EAGER);
  CHECK(semantics.eager_limit_bytes == 65536);
  CHECK(semantics.p2p_comm == P2pComm::PAIR);
  CHECK(semantics.comm_concurrency == 1);
  CHECK(semantics.launch_order_implicit);
  CHECK(semantics.timeout_ns == 30'000'000'000);

  const Semantics defaults = loaded(load(with_program("  - barrier\n"))).semantics;
  CHECK(defaults.p2p == P2pMode::RENDEZVOUS);
  CHECK(defaults.timeout_ns == 600'000'000'000);
  CHECK(defaults.comm_concurrency == 0);
}

TEST_CASE("loader: semantics errors") {
  CHECK(
      problems(
          with_program("  - barrier\n",
                       "semantics: {p2p: rendevous, p2p_comm: lazy, timeout: 0, eager_limt: 1, "
                       "launch_order_implicit: yes, comm_concurrency: -1, link: {}}\n")) ==
      std::vector<std::string>{
          "3:18: error: invalid value 'rendevous' for 'p2p' (did you mean 'rendezvous'?); valid "
          "values: eager, rendezvous",
          "3:39: error: invalid value 'lazy' for 'p2p_comm'; valid values: group, pair",
          "3:54: error: timeout must be positive, got 0",
          "3:57: error: unknown key 'eager_limt' in semantics (did you mean 'eager_limit'?); valid "
          "keys: algorithm, comm_concurrency, eager_limit, launch_order_implicit, p2p, p2p_comm, "
          "timeout",
          "3:95: error: invalid value 'yes' for 'launch_order_implicit'; valid values: false, true",
          "3:118: error: comm_concurrency must not be negative, got -1",
          "3:122: error: 'link' is a top-level key, not a semantics setting"});
}

TEST_CASE("loader: params accept sizes and durations - -D overrides them") {
  const std::string text = with_program("  - compute: t\n  - allreduce: {size: \"n * chunk\"}\n",
                                        "params: {n: 2, chunk: 4MiB, t: 1.5ms}\n");
  const Scenario s = loaded(load(text));
  REQUIRE(s.params.size() == 3);
  CHECK(s.params[1].value == 4LL << 20);
  CHECK(s.params[2].value == 1'500'000);

  const LoadResult overridden = load(text, {{"n", "2 * 5"}, {"chunk", "1KiB"}});
  const Scenario& o = loaded(overridden);
  CHECK(o.params[0].value == 10);
  CHECK(o.params[0].overridden);
  CHECK(o.params[1].value == 1024);
  CHECK(o.params[1].overridden);
  CHECK_FALSE(o.params[2].overridden);
  CHECK(o.params[0].loc == SourceLoc{3, 10});
}

TEST_CASE("loader: bad -D overrides have no position") {
  const std::string text =
      with_program("  - repeat: \"a + b\"\n    do: []\n", "params: {a: 1, b: 2}\n");
  CHECK(problems(text, {{"foo", "3"}, {"a", "x"}, {"b", "1 +"}}) ==
        std::vector<std::string>{
            "0:0: error: unknown parameter 'foo' in -D foo=3; parameters: a, b",
            "0:0: error: in -D a=x: unknown name 'x'; only constants are allowed here",
            "0:0: error: in -D b=1 +: expected an expression, got end of expression"});
  CHECK(problems(with_program("  - barrier\n"), {{"bb", "1"}}) ==
        std::vector<std::string>{
            "0:0: error: unknown parameter 'bb' in -D bb=1; the scenario has no parameters"});
  CHECK(problems(text, {{"aa", "1"}}) ==
        std::vector<std::string>{
            "0:0: error: unknown parameter 'aa' in -D aa=1 (did you mean 'a'?); parameters: a, b"});
}

TEST_CASE("loader: parameter names") {
  CHECK(problems(with_program("  - barrier\n", "params: {rank: 1, 2x: 1, min: 3, ok: [1]}\n")) ==
        std::vector<std::string>{
            "3:10: error: parameter 'rank' clashes with the built-in name 'rank'",
            "3:19: error: invalid parameter name '2x'; a name is a letter or '_' followed by "
            "letters, "
            "digits or '_'",
            "3:26: error: 'min' is reserved and cannot name a parameter",
            "3:38: error: expected an integer, size or duration, got a list"});
}

TEST_CASE("loader: groups are checked and stored sorted") {
  CHECK(
      problems(with_program("  - barrier: a\n  - barrier: b\n",
                            "groups: {a: [3, 1, 1, 4, -1], b: [], world: [0], c: 5}\n")) ==
      std::vector<std::string>{"3:20: error: rank 1 appears twice in group 'a'",
                               "3:23: error: rank 4 is outside the world (ranks 0-3)",
                               "3:26: error: rank -1 is outside the world (ranks 0-3)",
                               "3:34: error: group 'b' has no ranks",
                               "3:38: error: group 'world' is predefined and may not be redefined",
                               "3:53: error: expected a list of ranks, got a scalar"});
  const Scenario s =
      loaded(load(with_program("  - barrier: g\n", "groups: {g: [3, \"1 + 1\", 0]}\n")));
  CHECK(s.groups.at(1).comms.at(0) == std::vector<int32_t>{0, 2, 3});
}

TEST_CASE("loader: constant peers and roots must be members of their group") {
  CHECK(problems(with_program(R"y(  - send: {to: 5, size: 1, group: evens}
  - recv: {from: 1, size: 1, group: evens}
  - gather: {root: 4, size: 1, group: big}
  - scatter: {root: "rank", size: 1, group: evens}
)y",
                              "groups: {evens: [0, 2], big: [0, 1, 2, 3, 5, 6, 7]}\n", 8)) ==
        std::vector<std::string>{
            "5:16: error: rank 5 is not a member of group 'evens' (ranks 0, 2)",
            "6:18: error: rank 1 is not a member of group 'evens' (ranks 0, 2)",
            "7:20: error: rank 4 is not a member of group 'big' (ranks 0-3, 5-7)"});
}

TEST_CASE("loader: world must be a positive constant within the limit") {
  CHECK(
      problems("scenario: t\nworld: 1000000000\nprogram: []\n") ==
      std::vector<std::string>{"2:8: error: world 1000000000 exceeds the limit of 1048576 ranks "
                               "(raise it with --max-world)"});
  CHECK(problems("scenario: t\nworld: 0\nprogram: []\n") ==
        std::vector<std::string>{"2:8: error: world must be positive, got 0"});
  CHECK(problems("scenario: t\nworld: n\nprogram: []\n") ==
        std::vector<std::string>{"2:8: error: unknown name 'n'; only constants are allowed here"});
  LoadLimits small;
  small.max_world = 8;
  CHECK(problems("scenario: t\nworld: \"2 * 8\"\nprogram: []\n", {}, small) ==
        std::vector<std::string>{
            "2:8: error: world 16 exceeds the limit of 8 ranks (raise it with --max-world)"});
  CHECK(loaded(load("scenario: t\nworld: \"2 * 4\"\nprogram: []\n", {}, small)).world == 8);
}

TEST_CASE("loader: unknown top-level keys, missing required keys") {
  const std::string valid =
      "valid keys: define, description, expect, groups, launch, link, mesh, params, program, ranks, "
      "scenario, semantics, source, threads, world";
  CHECK(problems("progam: []\nwrld: 2\n") ==
        std::vector<std::string>{
            "1:1: error: unknown key 'progam' (did you mean 'program'?); " + valid,
            "1:1: error: missing required key 'scenario'",
            "1:1: error: missing required key 'world'",
            "1:1: error: missing required key 'program' (or 'threads' or 'ranks')",
            "2:1: error: unknown key 'wrld' (did you mean 'world'?); " + valid});
}

TEST_CASE("loader: duplicate keys are errors at every level") {
  CHECK(problems(
            "scenario: a\nworld: 2\nscenario: b\nprogram:\n  - allreduce: {size: 1, size: 2}\n") ==
        std::vector<std::string>{"3:1: error: duplicate key 'scenario' (first given at line 1)",
                                 "5:26: error: duplicate key 'size' (first given at line 5)"});
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
          "all_to_all, allgather, allreduce, barrier, broadcast, call, choose, compute, crash, "
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

TEST_CASE("loader: columns inside quoted and plain scalars are exact") {
  CHECK(
      problems(with_program("  - repeat: \"batchs\"\n    do: []\n")) ==
      std::vector<std::string>{"4:14: error: unknown name 'batchs'; names in scope: rank, world"});
  CHECK(problems(with_program("  - repeat: '1 + x'\n    do: []\n")) ==
        std::vector<std::string>{"4:18: error: unknown name 'x'; names in scope: rank, world"});
  CHECK(problems(with_program("  - repeat: 1 + x\n    do: []\n")) ==
        std::vector<std::string>{"4:17: error: unknown name 'x'; names in scope: rank, world"});
  // An escape shifts the characters: every problem is reported at the start of the string.
  CHECK(problems(with_program("  - repeat: \"\\x31 + x\"\n    do: []\n")) ==
        std::vector<std::string>{"4:14: error: unknown name 'x'; names in scope: rank, world"});
}

TEST_CASE("loader: type errors name what was expected") {
  CHECK(problems("scenario: [a]\nworld: {}\ndescription: {}\nexpect: deadlok\nprogram: {a: 1}\n") ==
        std::vector<std::string>{"1:11: error: expected a string, got a list",
                                 "2:8: error: expected an integer, got a map",
                                 "3:14: error: expected a string, got a map",
                                 "4:9: error: invalid value 'deadlok' for 'expect' (did you mean "
                                 "'deadlock'?); valid values: "
                                 "deadlock, hang, inconclusive, mismatch, ok, timeout",
                                 "5:10: error: expected a list of statements, got a map"});
  CHECK(problems("- a\n") ==
        std::vector<std::string>{"1:1: error: expected a map of scenario keys, got a list"});
  CHECK(problems(with_program("  - ~\n  - [compute]\n  - {}\n")) ==
        std::vector<std::string>{"4:5: error: expected a statement, got null",
                                 "5:5: error: expected a statement, got a list",
                                 "6:5: error: expected a statement, got an empty map"});
}

TEST_CASE("loader: yaml syntax errors become one diagnostic") {
  CHECK(problems("scenario: t\nworld: [1, 2\n") ==
        std::vector<std::string>{"3:1: error: end of sequence flow not found"});
  CHECK(problems("scenario: t\n  world: 2\n") ==
        std::vector<std::string>{"2:8: error: illegal map value"});
}

TEST_CASE("loader: empty files and extra documents") {
  CHECK(problems("") == std::vector<std::string>{"0:0: error: empty scenario file"});
  CHECK(problems("# only a comment\n") ==
        std::vector<std::string>{"0:0: error: empty scenario file"});
  CHECK(problems("---\n") == std::vector<std::string>{"0:0: error: empty scenario file"});
  CHECK(problems("scenario: a\n---\nscenario: b\n") ==
        std::vector<std::string>{
            "2:1: error: a scenario file holds one yaml document; this is a second one"});
}

TEST_CASE("loader: aliases are shared, self references and alias bombs are errors") {
  const LoadResult result =
      load(with_program("  - allreduce: &ar {size: 1MiB}\n  - allreduce: *ar\n"));
  const Scenario& s = loaded(result);
  REQUIRE(s.programs.at(0).at(0).body().size() == 2);
  CHECK(value_of(s.programs.at(0)[0].body()[1].size) == 1LL << 20);

  CHECK(problems("a: &a [*a]\n") ==
        std::vector<std::string>{"1:8: error: an alias may not refer to a node that contains it"});
  std::string bomb = "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n";
  for (int i = 1; i < 9; ++i) {  // each level: ten aliases of the previous one
    const std::string name = std::to_string(i);
    const std::string previous = std::to_string(i - 1);
    bomb.append("a").append(name).append(": &a").append(name).append(" [*a").append(previous);
    for (int j = 1; j < 10; ++j) bomb.append(", *a").append(previous);
    bomb.append("]\n");
  }
  CHECK(problems(bomb) ==
        std::vector<std::string>{
            "5:5: error: aliases expand the document beyond the limit of 1048576 nodes"});
  CHECK(problems(with_program("  - allreduce: {<<: {size: 1}}\n")) ==
        std::vector<std::string>{"4:5: error: 'allreduce' requires argument 'size'",
                                 "4:17: error: yaml merge keys ('<<') are not supported"});
}

TEST_CASE("loader: odd keys, tags and non-string keys do not crash") {
  CHECK(problems("? [a]\n: 1\n1: 2\n~: 3\n") ==
        std::vector<std::string>{
            "1:1: error: missing required key 'scenario'",
            "1:1: error: missing required key 'world'",
            "1:1: error: missing required key 'program' (or 'threads' or 'ranks')",
            "1:3: error: expected a string key, got a list",
            "3:1: error: unknown key '1'; valid keys: define, description, expect, groups, launch, link, "
            "mesh, params, program, ranks, scenario, semantics, source, threads, world",
            "4:1: error: expected a string key, got null"});
  CHECK(loaded(load("scenario: !!str t\nworld: !custom 2\nprogram: !!seq [barrier]\n")).world == 2);
}

TEST_CASE("loader: nesting deeper than the limit is an error") {
  LoadLimits limits;
  limits.max_nesting = 2;
  CHECK(problems(with_program(R"y(  - repeat: 1
    do:
      - if: 1
        then:
          - repeat: 1
            do: []
)y"),
                 {}, limits) ==
        std::vector<std::string>{"8:13: error: blocks are nested deeper than the limit of 2 "
                                 "(raise it with --max-nesting)"});
}

TEST_CASE("loader: unused parameters and groups are warnings that do not stop loading") {
  const LoadResult result =
      load(with_program("  - send: {to: 1, size: n, group: used}\n",
                        "params: {n: 1, spare: 2}\ngroups: {used: [0, 1], idle: [2]}\n"));
  CHECK(result.ok());
  CHECK(problems(result) ==
        std::vector<std::string>{"3:16: warning: parameter 'spare' is never used",
                                 "4:24: warning: group 'idle' is never used"});
}

TEST_CASE("loader: all errors are collected and sorted by position") {
  const std::vector<std::string> found =
      problems("program:\n  - compute: 1\nworld: -2\nscenario: t\nexpect: nope\n");
  CHECK(found == std::vector<std::string>{
                     "2:14: error: duration needs a unit (e.g. 20ms)",
                     "3:8: error: world must be positive, got -2",
                     "5:9: error: invalid value 'nope' for 'expect'; valid values: deadlock, hang, "
                     "inconclusive, mismatch, ok, timeout"});
}

TEST_CASE("loader: a scenario loaded with warnings keeps its text in the result for them") {
  const std::string text = "scenario: w\nworld: 2\nparams: {unused: 1}\nprogram:\n  - barrier\n";
  const LoadResult result = load(text);
  REQUIRE(result.ok());
  REQUIRE(result.diagnostics.size() == 1);
  CHECK(result.text == text);
  CHECK(result.scenario->text == text);
  CHECK(format_diagnostic(result.diagnostics[0], result.text).find("params: {unused: 1}") != std::string::npos);
}

TEST_CASE("loader: files that cannot be read or are too large") {
  const LoadResult missing = load_scenario_file("no/such/file.yaml", {});
  CHECK_FALSE(missing.ok());
  REQUIRE(missing.diagnostics.size() == 1);
  CHECK(format_diagnostic(missing.diagnostics[0], missing.text) ==
        "no/such/file.yaml: error: cannot read file: No such file or directory\n");

  const std::string path =
      (std::filesystem::temp_directory_path() / "lockstep_loader_test.yaml").string();
  {
    std::ofstream out(path, std::ios::binary);
    out << LANGUAGE_EXAMPLE;
  }
  const LoadResult read = load_scenario_file(path, {});
  CHECK(read.ok());
  CHECK(read.scenario->text == LANGUAGE_EXAMPLE);  // the file mapped, kept by the scenario
  CHECK(read.text.empty());
  LoadLimits tiny;
  tiny.max_file_bytes = 100;
  const LoadResult big = load_scenario_file(path, {}, tiny);
  CHECK_FALSE(big.ok());
  REQUIRE(big.diagnostics.size() == 1);
  CHECK(format_diagnostic(big.diagnostics[0], big.text) ==
        path + ": error: file exceeds the limit of 100 bytes (raise it with --max-file-bytes)\n");
  std::remove(path.c_str());

  CHECK(problems(LANGUAGE_EXAMPLE, {}, tiny) ==
        std::vector<std::string>{
            "0:0: error: file exceeds the limit of 100 bytes (raise it with --max-file-bytes)"});
}

TEST_CASE("loader: never throws on mangled input") {
  // Deterministic mutations of a valid scenario: deleted, duplicated and replaced bytes.
  const std::string base(LANGUAGE_EXAMPLE);
  const std::string alphabet = "{}[]:-,&*!|>'\"#?% \n\tab0";
  uint64_t state = 0x9E3779B97F4A7C15ULL;
  const auto next = [&state](uint64_t bound) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (state >> 33) % bound;
  };
  for (int round = 0; round < 2000; ++round) {
    std::string text = base;
    const uint64_t edits = 1 + next(4);
    for (uint64_t e = 0; e < edits && !text.empty(); ++e) {
      const size_t at = next(text.size());
      switch (next(3)) {
        case 0: text.erase(at, 1 + next(8)); break;
        case 1: text.insert(at, text.substr(next(text.size()), next(12))); break;
        default: text[at] = alphabet[next(alphabet.size())]; break;
      }
    }
    CAPTURE(text);
    LoadResult result;
    CHECK_NOTHROW(result = load(text));
    for (const Diagnostic& d : result.diagnostics)
      CHECK_FALSE(format_diagnostic(d, result.text).empty());
  }
}

// ---------------------------------------------------------------------------------------------
// The full language: mesh, threads, recorded ranks, choose, define/call, NCCL groups, handles,
// streams, new_group, exit/crash, link.

TEST_CASE("loader: a mesh defines its groups (Megatron order), coordinates and sizes") {
  const LoadResult result = load(R"y(scenario: t
params: {n: 1}
mesh: {tp: 2, pp: 2, dp: 2}
program:
  - allreduce: {group: tp, size: "n * tp_size * 1KiB"}
  - send: {group: pp, to: "rank + pp_size", size: "tp + pp + dp + dp_size"}
  - barrier: dp
)y");
  const Scenario& s = loaded(result);
  CHECK(s.world == 8);
  CHECK(s.slot_names == std::vector<std::string>{"rank", "world", "n", "tp", "tp_size", "pp",
                                                 "pp_size", "dp", "dp_size"});
  REQUIRE(s.mesh.size() == 3);
  const std::array<std::string, 3> names = {"tp", "pp", "dp"};
  for (size_t d = 0; d < 3; ++d) {
    CHECK(s.mesh[d].name == names[d]);
    CHECK(s.mesh[d].size == 2);
    CHECK(s.mesh[d].coord_slot == static_cast<int32_t>(3 + 2 * d));
    CHECK(s.mesh[d].size_slot == static_cast<int32_t>(4 + 2 * d));
    CHECK(s.mesh[d].group == d + 1);
    CHECK(s.groups.at(d + 1).name == names[d]);
    CHECK(s.groups.at(d + 1).mesh_dim == static_cast<int32_t>(d));
  }
  CHECK(s.mesh[0].loc == SourceLoc{3, 8});
  using Comms = std::vector<std::vector<int32_t>>;
  CHECK(s.groups[1].comms == Comms{{0, 1}, {2, 3}, {4, 5}, {6, 7}});
  CHECK(s.groups[2].comms == Comms{{0, 2}, {1, 3}, {4, 6}, {5, 7}});
  CHECK(s.groups[3].comms == Comms{{0, 4}, {1, 5}, {2, 6}, {3, 7}});
  CHECK(s.groups[1].comm_of_rank == std::vector<int32_t>{0, 0, 1, 1, 2, 2, 3, 3});
  CHECK(s.groups[2].comm_of_rank == std::vector<int32_t>{0, 1, 0, 1, 2, 3, 2, 3});
  CHECK(s.groups[3].comm_of_rank == std::vector<int32_t>{0, 1, 2, 3, 0, 1, 2, 3});
  CHECK(*s.groups[2].comm_for(5) == std::vector<int32_t>{5, 7});
  const StmtList& body = s.program_of(0).at(0).body();
  REQUIRE(body.size() == 3);
  CHECK(body[0].group == 1);
  const std::array<int64_t, 9> env = {5, 8, 3, 1, 2, 0, 2, 1, 2};
  CHECK(eval_expr(body[0].size, env) == 3 * 2 * 1024);
  CHECK(body[1].group == 2);
  CHECK(eval_expr(body[1].peer, env) == 7);
  CHECK(eval_expr(body[1].size, env) == 4);
  CHECK(body[2].group == 3);
  CHECK(s.rank_program == std::vector<uint32_t>(8, 0));
}

TEST_CASE("loader: a mesh with an explicit world - one dimension - sizes of one") {
  const Scenario s = loaded(load("scenario: t\nworld: 6\nmesh: {tp: 3, dp: 2, ep: 1}\n"
                                  "program:\n  - barrier: dp\n  - barrier: ep\n  - barrier: tp\n"));
  using Comms = std::vector<std::vector<int32_t>>;
  CHECK(s.groups.at(1).comms == Comms{{0, 1, 2}, {3, 4, 5}});
  CHECK(s.groups.at(2).comms == Comms{{0, 3}, {1, 4}, {2, 5}});
  CHECK(s.groups.at(3).comms == Comms{{0}, {1}, {2}, {3}, {4}, {5}});
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
        std::vector<std::string>{"6:22: warning: handle 'b' is never waited for (no 'wait: b')"});
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

TEST_CASE("loader: new_group creates a group at load time, usable by later ops") {
  const LoadResult result = load(with_program(R"y(  - if: "rank < 2"
    then: [barrier: pairs]
  - new_group: {name: pairs, ranks: [1, 0]}
  - allreduce: {group: pairs, size: 1KiB}
)y"));
  const Scenario& s = loaded(result);
  REQUIRE(s.groups.size() == 2);
  CHECK(s.groups[1].name == "pairs");
  CHECK(s.groups[1].from_new_group);
  CHECK(s.groups[1].comms.at(0) == std::vector<int32_t>{0, 1});
  CHECK(s.groups[1].comm_of_rank == std::vector<int32_t>{0, 0, -1, -1});
  CHECK(s.groups[1].loc == SourceLoc{6, 5});
  const StmtList& body = s.program_of(0).at(0).body();
  CHECK(body.at(0).body.at(0).group == 1);
  CHECK(body.at(1).op == OpKind::NEW_GROUP);
  CHECK(body.at(1).new_group == 1);
  CHECK(body.at(1).group == 0);
  CHECK(body.at(2).group == 1);
  // Recorded programs each record the same communicator creation.
  const Scenario r = loaded(load(R"y(scenario: t
world: 2
ranks:
  0: [new_group: {name: g, ranks: [0, 1]}, barrier: g]
  1: [new_group: {name: g, ranks: [0, 1]}, barrier: g]
)y"));
  REQUIRE(r.groups.size() == 2);
  CHECK(r.programs.at(0).at(0).body().at(0).new_group == 1);
  CHECK(r.programs.at(1).at(0).body().at(0).new_group == 1);
}

TEST_CASE("loader: link settings per scenario and per group - the allreduce algorithm") {
  const Scenario s = loaded(load(R"y(scenario: t
mesh: {tp: 2, dp: 2}
link:
  latency: 2us
  bandwidth: 50GB/s
  tp: {bandwidth: 400Gbps}
  dp: {latency: 10us, bandwidth: 1.5 GiB/s}
semantics: {algorithm: tree}
program:
  - barrier
)y"));
  CHECK(s.link.latency_ns == 2'000);
  CHECK(s.link.bandwidth_bytes_per_s == 50e9);
  REQUIRE(s.group_link.size() == 3);
  CHECK_FALSE(s.group_link[0].has_value());
  REQUIRE(s.group_link[1].has_value());
  CHECK(s.group_link[1]->latency_ns == 2'000);
  CHECK(s.group_link[1]->bandwidth_bytes_per_s == 50e9);
  REQUIRE(s.group_link[2].has_value());
  CHECK(s.group_link[2]->latency_ns == 10'000);
  CHECK(s.group_link[2]->bandwidth_bytes_per_s == 1.5 * 1024 * 1024 * 1024);
  CHECK(s.semantics.allreduce_algorithm == Algorithm::TREE);
  const Scenario d = loaded(load(with_program("  - barrier\n")));
  CHECK(d.group_link.size() == 1);
  CHECK(d.link.latency_ns == 5'000);
  CHECK(d.semantics.allreduce_algorithm == Algorithm::RING);
}

TEST_CASE("loader: bounds name themselves and how to raise them") {
  LoadLimits limits;
  limits.max_repeat = 10;
  CHECK(problems(with_program("  - repeat: 11\n    do: []\n  - repeat: 10\n    do: []\n"), {},
                 limits) ==
        std::vector<std::string>{
            "4:13: error: repeat count 11 exceeds the limit of 10 (raise it with --max-repeat)"});
  limits.max_ops = 2;
  CHECK(problems("scenario: t\nworld: 2\nranks:\n  0: [barrier]\n  1: [barrier, barrier]\n", {},
                 limits) ==
        std::vector<std::string>{"3:1: error: the recorded schedule has 3 operations, over the "
                                 "limit of 2 (raise it with --max-ops)"});
  limits.max_world = 4;
  CHECK(problems("scenario: t\nmesh: {a: 2, b: 4}\nprogram: []\n", {}, limits) ==
        std::vector<std::string>{
            "2:17: error: the mesh has more ranks than the limit of 4 (raise it with --max-world)"});
}

}  // namespace
}  // namespace lockstep::sim

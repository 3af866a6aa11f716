// The scenario loader: the top level, YAML errors, files, bounds, diagnostics.
#include "sim/loader.h"

#include <doctest/doctest.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "sim/loader_testing.h"

namespace lockstep::sim {
namespace {

using namespace loader_testing;

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
                                 "2:8: error: expected an integer or an expression over the parameters, got a map",
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
        std::vector<std::string>{"3:1: error: a `[...]` is not closed: add its `]`, or quote a value that holds `,`, "
                                 "`:`, `{` or `[` (yaml-cpp: end of sequence flow not found)"});
  CHECK(problems("scenario: t\n  world: 2\n") ==
        std::vector<std::string>{"2:8: error: a `key: value` where none can be: indent it as its siblings, or quote a "
                                 "value that holds `: ` (yaml-cpp: illegal map value)"});
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

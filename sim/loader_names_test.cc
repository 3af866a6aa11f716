// The scenario loader: the mesh, world, params and -D overrides, groups, new_group.
#include "sim/loader.h"

#include <doctest/doctest.h>

#include <array>

#include "sim/loader_testing.h"

namespace lockstep::sim {
namespace {

using namespace loader_testing;

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

TEST_CASE("loader: a group's ranks may be expressions over the parameters and world, -D included") {
  const char* text = R"y(scenario: t
params: {dp: 2, stages: 3}
world: "dp * stages"
groups: {first: [0, "stages"], last: ["stages - 1", "world - 1"]}
program:
  - if: "rank % stages == 0"
    then: [allreduce: {group: first, size: 4}]
  - if: "rank % stages == stages - 1"
    then: [allreduce: {group: last, size: 4}]
)y";
  const Scenario s = loaded(load(text));
  CHECK(s.groups.at(1).comms.at(0) == std::vector<int32_t>{0, 3});
  CHECK(s.groups.at(2).comms.at(0) == std::vector<int32_t>{2, 5});
  CHECK(problems(text).empty());  // stages and dp are used (by the groups and the world)
  const Scenario wider = loaded(load(text, {{"stages", "4"}}));
  CHECK(wider.groups.at(1).comms.at(0) == std::vector<int32_t>{0, 4});
  CHECK(wider.groups.at(2).comms.at(0) == std::vector<int32_t>{3, 7});
  CHECK(problems(text, {{"dp", "1"}}) == std::vector<std::string>{"4:21: error: rank 3 is outside the world (ranks 0-2)",
                                                                  "4:53: error: rank 2 appears twice in group 'last'"});
  CHECK(problems("scenario: t\nparams: {n: 2}\nworld: 4\ngroups: {g: [1, \"m\"], h: [2, \"1 / (n - 2)\"]}\nprogram: [barrier]\n") ==
        std::vector<std::string>{"4:18: error: unknown name 'm' (did you mean 'n'?); names in scope: n, world",
                                 "4:33: error: division by zero"});
}

TEST_CASE("loader: a group's ranks may be ranges FIRST..LAST of expressions") {
  const char* text = R"y(scenario: t
params: {dp: 2}
world: "dp * 2"
groups: {ckpt: ["0..world - 1"], tail: [0, "dp .. world - 1"]}
program:
  - allreduce: {group: ckpt, size: 4}
  - if: "rank == 0 || rank >= dp"
    then: [allreduce: {group: tail, size: 4}]
)y";
  const Scenario s = loaded(load(text));
  CHECK(s.groups.at(1).comms.at(0) == std::vector<int32_t>{0, 1, 2, 3});
  CHECK(s.groups.at(2).comms.at(0) == std::vector<int32_t>{0, 2, 3});
  const Scenario wider = loaded(load(text, {{"dp", "3"}}));
  CHECK(wider.groups.at(1).comms.at(0) == std::vector<int32_t>{0, 1, 2, 3, 4, 5});
  CHECK(wider.groups.at(2).comms.at(0) == std::vector<int32_t>{0, 3, 4, 5});
  // Each end checked where it stands; an empty range and a rank twice are errors.
  CHECK(problems(with_program("  - barrier: a\n  - barrier: b\n  - barrier: c\n",
                              "groups: {a: [\"3..1\"], b: [\"0..world\"], c: [1, \"0..2\"]}\n")) ==
        std::vector<std::string>{"3:14: error: empty rank range '3..1' in group 'a' (3 > 1)",
                                 "3:31: error: rank 4 is outside the world (ranks 0-3)",
                                 "3:47: error: rank 1 appears twice in group 'c'"});
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

TEST_CASE("loader: the world and mesh sizes may be expressions over the parameters, -D included") {
  const char* text = R"y(scenario: t
params: {pp: 2, dp: 3, layers: 4}
mesh: {dp: dp, pp: pp}
program:
  - repeat: layers
    do: [allreduce: {group: dp, size: "pp_size * 1KiB"}]
)y";
  const LoadResult result = load(text);
  const Scenario& s = loaded(result);
  CHECK(s.world == 6);
  CHECK(s.mesh[0].size == 3);
  CHECK(s.mesh[1].size == 2);
  // The parameters a dimension of their name sizes are its size: the name is the coordinate.
  CHECK(s.slot_names == std::vector<std::string>{"rank", "world", "pp (the size of mesh dimension pp)",
                                                 "dp (the size of mesh dimension dp)", "layers", "dp", "dp_size",
                                                 "pp", "pp_size"});
  CHECK(problems(text).empty());  // pp and dp are used (by the mesh)
  const LoadResult wider = load(text, {{"pp", "8"}, {"dp", "4"}});
  CHECK(loaded(wider).world == 32);
  CHECK(loaded(wider).groups[1].comms.size() == 8);  // dp groups: one per pp coordinate

  CHECK(loaded(load("scenario: t\nparams: {n: 3}\nworld: \"n * 2\"\nprogram: []\n", {{"n", "5"}})).world == 10);
  CHECK(problems("scenario: t\nparams: {n: 3}\nworld: \"n - 3\"\nprogram: []\n") ==
        std::vector<std::string>{"3:8: error: world must be positive, got 0"});
  LoadLimits small;
  small.max_world = 8;
  CHECK(problems("scenario: t\nparams: {n: 3}\nmesh: {a: n, b: 3}\nprogram: []\n", {}, small) ==
        std::vector<std::string>{"3:17: error: the mesh has more ranks than the limit of 8 (raise it with --max-world)"});
}

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

}  // namespace
}  // namespace lockstep::sim

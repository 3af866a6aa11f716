// Symmetric ranks (EngineOptions::symmetry): which ranks the engine finds interchangeable.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "sim/engine.h"
#include "tests/testing.h"

namespace lockstep::sim {

namespace {

struct SymmetryFound {
  std::vector<std::vector<uint32_t>> classes;
  std::string note;
};

SymmetryFound symmetry_of(std::string_view text) {
  const Scenario scenario = testing::scenario_from(text);
  EngineOptions options;
  options.track_state = true;
  options.symmetry = true;
  const Engine engine(scenario, options);
  return {engine.rank_classes(), engine.symmetry_note()};
}

}  // namespace

TEST_CASE("symmetry: senders that run one text are one class, the receiver apart") {
  const SymmetryFound found = symmetry_of(R"Y(
scenario: gather
world: 5
program:
  - if: "rank == 0"
    then:
      - repeat: "world - 1"
        do: [{recv: {from: any, size: 4}}]
    else:
      - send: {to: 0, size: 4}
)Y");
  CHECK(found.classes == std::vector<std::vector<uint32_t>>{{1, 2, 3, 4}});
  CHECK(found.note.empty());
}

TEST_CASE("symmetry: a rank with an op of its own, or named by another, stays apart") {
  const SymmetryFound found = symmetry_of(R"Y(
scenario: apart
world: 6
program:
  - if: "rank == 0"
    then: [{recv: {from: any, size: 4}}, {recv: {from: any, size: 4}}, {send: {to: 5, size: 4}}]
    else: [{send: {to: 0, size: 4}}]
  - if: "rank == 1"
    then: [{compute: 1us}]
  - if: "rank == 5"
    then: [{recv: {from: 0, size: 4}}]
)Y");
  // Rank 1 computes more; rank 5 is the one rank 0 sends to (its receive names rank 0, which
  // the others' programs do not): ranks 2-4 remain.
  CHECK(found.classes == std::vector<std::vector<uint32_t>>{{2, 3, 4}});
}

TEST_CASE("symmetry: a ring is symmetric under rotation only, which swaps do not give") {
  const SymmetryFound found = symmetry_of(R"Y(
scenario: ring
world: 4
program:
  - send: {to: "(rank + 1) % world", size: 4}
  - recv: {from: "(rank + world - 1) % world", size: 4}
)Y");
  CHECK(found.classes.empty());
  CHECK(found.note == "no two ranks' programs are equal up to their rank numbers");
}

TEST_CASE("symmetry: pairs that exchange are classes only where a swap maps every program") {
  // Ranks 0 and 1 exchange with each other, as do 2 and 3: swapping 0 and 1 maps 0's ops
  // (send to 1) onto 1's (send to 0). Swapping 0 and 2 would need 1 and 3 swapped too.
  const SymmetryFound found = symmetry_of(R"Y(
scenario: pairs
world: 4
program:
  - send: {to: "rank + 1 - 2 * (rank % 2)", size: 4}
  - recv: {from: "rank + 1 - 2 * (rank % 2)", size: 4}
)Y");
  CHECK(found.classes == std::vector<std::vector<uint32_t>>{{0, 1}, {2, 3}});
}

TEST_CASE("symmetry: ranks in different communicators of a group in use are not swapped") {
  const char* mesh = R"Y(
scenario: mesh
world: 4
mesh: {dp: 2, pp: 2}
program:
  - allreduce: {group: dp, size: 4}
  - OTHER
)Y";
  // The dp communicators are {0, 1} and {2, 3}, the pp ones {0, 2} and {1, 3}. With dp alone
  // in use, each dp pair is a class; with both, no swap keeps both.
  std::string dp_only = mesh;
  dp_only.replace(dp_only.find("OTHER"), 5, "compute: 1us");
  CHECK(symmetry_of(dp_only).classes == std::vector<std::vector<uint32_t>>{{0, 1}, {2, 3}});
  std::string both = mesh;
  both.replace(both.find("OTHER"), 5, "allreduce: {group: pp, size: 4}");
  CHECK(symmetry_of(both).classes.empty());
}

TEST_CASE("symmetry: none where a program chooses, and none asked without a state cache") {
  const char* choosing = R"Y(
scenario: choosing
world: 2
program:
  - choose: {a: [{allreduce: {size: 4}}], b: [{compute: 1us}]}
)Y";
  const SymmetryFound found = symmetry_of(choosing);
  CHECK(found.classes.empty());
  CHECK(found.note == "the scenario has `choose`");
  EngineOptions options;
  options.symmetry = true;  // track_state off
  const Engine engine(testing::scenario_from(choosing), options);
  CHECK(engine.rank_classes().empty());
  CHECK(engine.symmetry_note() == "the strategy keeps no state cache: --symmetry applies to dpor");
}

}  // namespace lockstep::sim

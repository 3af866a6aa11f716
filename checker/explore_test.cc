#include "checker/explore.h"
#include "checker/sampling.h"

#include <doctest/doctest.h>

#include "tests/testing.h"

namespace lockstep::checker {

using testing::scenario_from;

TEST_CASE("a deterministic schedule costs exactly one execution") {
  const sim::Scenario scenario = scenario_from(R"Y(
scenario: ring
world: 64
program:
  - send: {to: "(rank + 1) % world", size: 1MiB}
  - recv: {from: "(rank + world - 1) % world", size: 1MiB}
)Y");
  const CheckResult result = check_scenario(scenario, {});
  CHECK(result.executions == 1);
  CHECK(result.exhaustive);
  CHECK(result.verdict == sim::Verdict::DEADLOCK);
  REQUIRE(result.bugs.size() == 1);
  CHECK(result.bugs[0].cycle.size() == 65);
  CHECK(result.bugs[0].cycle.front() == 0);
  CHECK(result.bugs[0].cycle[1] == 1);
}

TEST_CASE("wildcard receives: every arrival order is explored") {
  const sim::Scenario scenario = scenario_from(R"Y(
scenario: gather
world: 4
program:
  - if: "rank == 0"
    then:
      - repeat: "world - 1"
        do: [{recv: {from: any, size: 4KiB}}]
    else:
      - send: {to: 0, size: 4KiB}
)Y");
  const CheckResult result = check_scenario(scenario, {});
  CHECK(result.verdict == sim::Verdict::OK);
  CHECK(result.exhaustive);
  CHECK(result.executions == 6);  // 3! orders of three senders
  CHECK(result.bugs.empty());
}

TEST_CASE("a bug on one schedule of several is found, with the schedule that leads to it") {
  const sim::Scenario scenario = testing::scenario_file("scenarios/examples/wildcard-race.yaml");
  const CheckResult result = check_scenario(scenario, {});
  CHECK(result.executions == 2);
  CHECK(result.verdict == sim::Verdict::HANG);
  REQUIRE(result.bugs.size() == 1);
  CHECK(result.bugs[0].schedule == std::vector<uint32_t>{1});
  CHECK(result.bugs[0].execution == 2);
  CHECK(result.bugs[0].cycle.empty());
}

TEST_CASE("--max-executions makes an unfinished search inconclusive") {
  const sim::Scenario scenario = scenario_from(R"Y(
scenario: gather
world: 5
program:
  - if: "rank == 0"
    then:
      - repeat: "world - 1"
        do: [{recv: {from: any, size: 4KiB}}]
    else:
      - send: {to: 0, size: 4KiB}
)Y");
  CheckOptions options;
  options.max_executions = 5;
  const CheckResult result = check_scenario(scenario, options);
  CHECK(result.executions == 5);
  CHECK_FALSE(result.exhaustive);
  CHECK(result.verdict == sim::Verdict::INCONCLUSIVE);
  CHECK(result.bound_hit == "--max-executions 5");
}

TEST_CASE("two runs of the same check agree on every number but the wall time") {
  const sim::Scenario scenario = scenario_from(R"Y(
scenario: race
world: 4
program:
  - if: "rank == 0"
    then:
      - repeat: 3
        do: [{recv: {from: any, size: 1MiB}}]
    else:
      - compute: "rank * 1ms"
      - send: {to: 0, size: 1MiB}
)Y");
  const CheckResult a = check_scenario(scenario, {});
  const CheckResult b = check_scenario(scenario, {});
  CHECK(a.executions == b.executions);
  CHECK(a.events == b.events);
  CHECK(a.fingerprint == b.fingerprint);
}

}  // namespace lockstep::checker

namespace lockstep::checker {

TEST_CASE("random and pct sample seeded executions and find a schedule-dependent bug") {
  const sim::Scenario scenario = testing::scenario_file("scenarios/examples/wildcard-race.yaml");
  for (const char* strategy : {"random", "pct"}) {
    CheckOptions options;
    options.strategy = strategy;
    options.seed = 7;
    options.max_executions = 50;
    const CheckResult a = check_scenario(scenario, options);
    CHECK(a.executions == 50);
    CHECK_FALSE(a.exhaustive);
    CHECK(a.bound_hit.empty());
    CHECK(a.verdict == sim::Verdict::HANG);
    const CheckResult b = check_scenario(scenario, options);
    CHECK(a.fingerprint == b.fingerprint);  // same seed, same runs
  }
}

TEST_CASE("a sampled scenario without any choice point is covered by one execution") {
  const sim::Scenario scenario = testing::scenario_from(R"Y(
scenario: det
world: 4
program:
  - allreduce: {size: 1MiB}
)Y");
  CheckOptions options;
  options.strategy = "random";
  const CheckResult result = check_scenario(scenario, options);
  CHECK(result.executions == 1);
  CHECK(result.exhaustive);
  CHECK(result.verdict == sim::Verdict::OK);
}

TEST_CASE("the random generator is a fixed algorithm") {
  Rng rng(42);
  const uint64_t first = rng.next();
  Rng again(42);
  CHECK(again.next() == first);
  CHECK(first == 0xbdd732262feb6e95ULL);  // splitmix64(42): pinned so no platform drifts
  for (int i = 0; i < 1000; ++i) CHECK(rng.below(7) < 7);
}

}  // namespace lockstep::checker

namespace lockstep::checker {

TEST_CASE("--jobs: the same verdicts, bugs, counts and fingerprint as one thread") {
  const char* texts[] = {R"Y(
scenario: gather
world: 6
program:
  - if: "rank == 0"
    then:
      - repeat: "world - 1"
        do: [{recv: {from: any, size: 4KiB}}]
      - recv: {from: 3, size: 4KiB}
    else:
      - send: {to: 0, size: 4KiB}
)Y",
                         R"Y(
scenario: threads
world: 2
groups: {g: [0, 1]}
threads:
  main: [{allreduce: {size: 4, tag: a}}, {allreduce: {group: g, size: 4}}]
  bg: [{allreduce: {size: 4, tag: b}}, {choose: {x: [{barrier: world}], y: []}}]
)Y"};
  for (const char* text : texts) {
    const sim::Scenario scenario = testing::scenario_from(text);
    for (const char* strategy : {"dfs", "dpor"}) {
      CheckOptions one;
      one.strategy = strategy;
      CheckOptions two = one;
      two.jobs = 2;
      const CheckResult a = check_scenario(scenario, one);
      const CheckResult b = check_scenario(scenario, two);
      INFO(scenario.name << " " << strategy);
      CHECK(a.verdict == b.verdict);
      CHECK(a.executions == b.executions);
      CHECK(a.events == b.events);
      CHECK(a.fingerprint == b.fingerprint);
      CHECK(a.exhaustive == b.exhaustive);
      REQUIRE(a.bugs.size() == b.bugs.size());
      for (size_t i = 0; i < a.bugs.size(); ++i) {
        CHECK(a.bugs[i].signature == b.bugs[i].signature);
        CHECK(a.bugs[i].execution == b.bugs[i].execution);
        CHECK(a.bugs[i].schedule == b.bugs[i].schedule);
      }
      // A bound cuts both at the same execution.
      one.max_executions = 7;
      two.max_executions = 7;
      const CheckResult c = check_scenario(scenario, one);
      const CheckResult d = check_scenario(scenario, two);
      CHECK(c.executions == d.executions);
      CHECK(c.fingerprint == d.fingerprint);
      CHECK(c.verdict == d.verdict);
    }
  }
}

}  // namespace lockstep::checker

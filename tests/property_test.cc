// Property: on many small generated scenarios with threads, choices, wildcards, groups and
// comm_concurrency, the reduced search (dpor) and the plain exhaustive one (dfs) reach the same
// verdict and the same set of terminal states, and the reduced one never runs more executions.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdlib>
#include <string>

#include <fmt/format.h>

#include "checker/explore.h"
#include "checker/sampling.h"
#include "sim/loader.h"
#include "tests/generated_scenarios.h"

namespace lockstep {

TEST_CASE("property: dpor and dfs agree on verdicts and terminal states - dpor never explores more") {
  // LOCKSTEP_PROPERTY_RUNS=N runs a bigger sample by hand (the default is sized for CI).
  const char* runs_env = std::getenv("LOCKSTEP_PROPERTY_RUNS");
  const int runs = runs_env ? std::max(1, std::atoi(runs_env)) : 2200;
  checker::Rng rng(20261202);
  int compared = 0;
  int skipped = 0;
  uint64_t dfs_total = 0;
  uint64_t dpor_total = 0;
  for (int i = 0; i < runs; ++i) {
    const std::string text = testing::generate_scenario(rng);
    sim::LoadResult loaded = sim::load_scenario_text(text, "generated.yaml", {});
    INFO(text);
    REQUIRE(loaded.ok());
    checker::CheckOptions options;
    options.collect_terminal_states = true;
    options.max_executions = 1'000;
    options.strategy = "dfs";
    const checker::CheckResult dfs = checker::check_scenario(*loaded.scenario, options);
    REQUIRE_FALSE(dfs.error);
    if (!dfs.exhaustive) {
      ++skipped;  // too big for the oracle
      continue;
    }
    options.strategy = "dpor";
    const checker::CheckResult dpor = checker::check_scenario(*loaded.scenario, options);
    REQUIRE(dpor.exhaustive);
    CHECK(dpor.verdict == dfs.verdict);
    CHECK(dpor.terminal_states == dfs.terminal_states);
    CHECK(dpor.executions <= dfs.executions);
    dfs_total += dfs.executions;
    dpor_total += dpor.executions;
    ++compared;
  }
  MESSAGE("compared ", compared, " scenarios (", skipped, " too big for dfs): dfs ", dfs_total, " executions, dpor ",
          dpor_total);
  CHECK(compared >= runs * 9 / 10);
  if (!runs_env) CHECK(compared >= 2000);
}

}  // namespace lockstep

// `lockstep check --minimize`: delta debugging over the ops of a recorded schedule, keeping a
// removal only while a check of what is left still finds the same bug (docs/counterexamples.md).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "checker/analysis.h"
#include "checker/explore.h"
#include "sim/loader.h"
#include "sim/scenario.h"

namespace lockstep::checker {

constexpr uint64_t DEFAULT_MINIMIZE_BUDGET = 500;  // re-checks per bug

struct MinimizeOptions {
  CheckOptions check;         // how every re-check explores (the options of the check that found the bug)
  sim::LoadLimits limits;     // each candidate is written as a trace and loaded again with these
  uint64_t budget = DEFAULT_MINIMIZE_BUDGET;  // at most this many re-checks
  std::string path;           // the minimized trace's path (its diagnostics and locations)
};

struct MinimizeResult {
  std::string refused;        // why the bug was not minimized ("" when it was)
  std::string trace;          // the minimized schedule as a JSON Lines trace
  uint64_t ranks_before = 0;  // ranks with at least one op
  uint64_t ops_before = 0;
  uint64_t ranks_after = 0;
  uint64_t ops_after = 0;
  uint64_t rechecks = 0;      // candidates checked (each a write, a load and a check)
  bool budget_hit = false;    // stopped by the budget: smaller may exist
  std::vector<std::string> sources;  // per op line of `trace` (from line 2): the op's source in the scenario
};

// Minimizes the ops of `scenario`, a recorded schedule (sim::trace_write_problem() is ""; any
// other scenario is refused), for `bug`, one of the bugs check_scenario(scenario, options.check)
// found. The bug stays the same: its kind and its stuck ops (the mismatched ops of a mismatch),
// each the same op of the scenario on the same rank. Deterministic.
MinimizeResult minimize_bug(const sim::Scenario& scenario, const Bug& bug, const MinimizeOptions& options);

// "minimized: 3 ranks, 7 ops of 1,024 ranks, 5,120 ops (41 re-checks)", plus the budget when hit.
std::string minimize_summary(const MinimizeResult& result, uint64_t budget);

}  // namespace lockstep::checker

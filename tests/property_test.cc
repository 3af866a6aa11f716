// Property: on many small generated scenarios with threads, choices, wildcards, groups and
// comm_concurrency, the reduced search (dpor) and the plain exhaustive one (dfs) reach the same
// verdict and the same set of terminal states, and the reduced one never runs more executions.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <string>

#include <fmt/format.h>

#include "checker/explore.h"
#include "checker/replay.h"
#include "checker/sampling.h"
#include "sim/loader.h"
#include "sim/trace_format.h"
#include "tests/generated_scenarios.h"
#include "tests/remote_branches.h"

namespace lockstep {

namespace {

// `runs` generated scenarios (LOCKSTEP_PROPERTY_RUNS=N runs N by hand; the default is sized for
// CI), each checked by dfs (the oracle) and, when dfs covers it, by dpor (and every third by
// odpor).
enum class Shape { SMALL, THREE_THREADED, THREADS };

// `stateful`: the oracle is dfs with the state cache (every interleaving, equal states merged),
// for spaces too big for plain dfs; dpor's counts are then not compared with it.
// Every `parallel_every`-th scenario compared is also checked with dpor on two threads (--jobs
// 2: branches given to the second thread as the search finds them, one state cache between
// them): the same outcomes; and, where the oracle is plain dfs, with dfs on two threads (parts,
// shared out further as a thread runs dry): the oracle's report.
void compare_dpor_with_dfs(int default_runs, uint64_t seed, Shape shape, uint64_t max_executions,
                           int percent_compared, bool stateful, int parallel_every) {
  const char* runs_env = std::getenv("LOCKSTEP_PROPERTY_RUNS");
  const int runs = runs_env ? std::max(1, std::atoi(runs_env)) : default_runs;
  checker::Rng rng(seed);
  int compared = 0;
  int skipped = 0;
  uint64_t dfs_total = 0;
  uint64_t dpor_total = 0;
  uint64_t dpor_pruned = 0;
  uint64_t fixed_total = 0;
  uint64_t fixed_blocked = 0;
  uint64_t parallel_total = 0;
  uint64_t parallel_parts = 0;
  uint64_t dfs_parts = 0;  // parts of dfs on two threads, the parts given away included
  int parallel = 0;
  uint64_t optimal_total = 0;  // odpor's executions, and dpor's on the same scenarios
  uint64_t optimal_dpor_total = 0;
  int optimal = 0;
  uint64_t remote_branches = 0;  // explored by a host, as under --mpi
  uint64_t lost_branches = 0;
  for (int i = 0; i < runs; ++i) {
    const std::string text = shape == Shape::THREADS ? testing::generate_threaded_scenario(rng, true)
                                                     : testing::generate_scenario(rng, shape == Shape::THREE_THREADED);
    sim::LoadResult loaded = sim::load_scenario_text(text, "generated.yaml", {});
    INFO(text);
    REQUIRE(loaded.ok());
    checker::CheckOptions options;
    options.collect_terminal_states = true;
    options.max_executions = max_executions;
    options.strategy = "dfs";
    options.checkpoints = false;  // the oracle replays every prefix from the initial state
    options.dfs_state_cache = stateful;
    const checker::CheckResult dfs = checker::check_scenario(*loaded.scenario, options);
    options.checkpoints = true;
    options.dfs_state_cache = false;
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
    if (!stateful) CHECK(dpor.executions <= dfs.executions);
    // The same without the state cache: the same outcomes; its count is reported to show
    // what the cache saves.
    options.state_cache = false;
    const checker::CheckResult fixed = checker::check_scenario(*loaded.scenario, options);
    options.state_cache = true;
    CHECK(fixed.verdict == dfs.verdict);
    CHECK(fixed.terminal_states == dfs.terminal_states);
    if (!stateful) CHECK(fixed.executions <= dfs.executions);
    dfs_total += dfs.executions;
    dpor_total += dpor.executions;
    dpor_pruned += dpor.pruned;
    fixed_total += fixed.executions;
    fixed_blocked += fixed.sleep_blocked;
    if (compared % 3 == 0) {
      // odpor (each race's whole reversal in the wakeup tree): the same outcomes.
      options.strategy = "odpor";
      const checker::CheckResult whole = checker::check_scenario(*loaded.scenario, options);
      options.strategy = "dpor";
      CHECK(whole.exhaustive);
      CHECK(whole.verdict == dfs.verdict);
      CHECK(whole.terminal_states == dfs.terminal_states);
      if (!stateful) CHECK(whole.executions <= dfs.executions);
      optimal_total += whole.executions;
      optimal_dpor_total += dpor.executions;
      ++optimal;
    }
    if (compared % parallel_every == 0) {
      options.jobs = 2;
      options.jobs_after = 0;  // cut into parts however small
      const checker::CheckResult two = checker::check_scenario(*loaded.scenario, options);
      options.jobs = 1;
      CHECK(two.exhaustive);
      CHECK(two.terminal_states == dfs.terminal_states);
      std::set<std::string> one_bugs, two_bugs;
      for (const checker::Bug& bug : dpor.bugs) one_bugs.insert(bug.signature);
      for (const checker::Bug& bug : two.bugs) two_bugs.insert(bug.signature);
      CHECK(two_bugs == one_bugs);
      parallel_total += two.executions;
      parallel_parts += two.parts;
      ++parallel;
      // As under check --mpi: the branches explored by a host with its own numbering of objects
      // and its own state cache, sent there and back as text; every third one dropped as from
      // a rank that died, and explored again. The same outcomes.
      const checker::CheckOptions host_options = options;
      testing::RemoteBranchCounts counts;
      options.run_branches = testing::remote_branches(*loaded.scenario, host_options, counts, 3);
      const checker::CheckResult remote = checker::check_scenario(*loaded.scenario, options);
      options.run_branches = nullptr;
      CHECK(remote.exhaustive);
      CHECK(remote.terminal_states == dfs.terminal_states);
      std::set<std::string> remote_bugs;
      for (const checker::Bug& bug : remote.bugs) remote_bugs.insert(bug.signature);
      CHECK(remote_bugs == one_bugs);
      remote_branches += counts.explored;
      lost_branches += counts.lost;
      if (!stateful) {
        // dfs on two threads, its parts shared out as a thread runs dry: the oracle's report.
        options.strategy = "dfs";
        options.jobs = 2;
        const checker::CheckResult dfs_two = checker::check_scenario(*loaded.scenario, options);
        options.jobs = 1;
        options.strategy = "dpor";
        CHECK(dfs_two.executions == dfs.executions);
        CHECK(dfs_two.events == dfs.events);
        CHECK(dfs_two.fingerprint == dfs.fingerprint);
        CHECK(dfs_two.terminal_states == dfs.terminal_states);
        REQUIRE(dfs_two.bugs.size() == dfs.bugs.size());
        for (size_t b = 0; b < dfs.bugs.size(); ++b) CHECK(dfs_two.bugs[b].execution == dfs.bugs[b].execution);
        dfs_parts += dfs_two.parts;
      }
    }
    ++compared;
  }
  MESSAGE("compared ", compared, " scenarios (", skipped, " too big for dfs): dfs ", dfs_total, " executions, dpor ",
          dpor_total, " of which ", dpor_pruned, " pruned (", fixed_total, " without the state cache, ", fixed_blocked,
          " of them sleep-blocked); odpor on ", optimal, " of them: ", optimal_total, " executions (dpor ",
          optimal_dpor_total, "); ", parallel, " of them on two threads too: ", parallel_total, " executions, ",
          parallel_parts, " branches given to the second thread; as under --mpi: ", remote_branches,
          " branches explored by another host, ", lost_branches, " lost and explored again; dfs on two threads: ",
          dfs_parts, " parts");
  CHECK(compared >= runs * percent_compared / 100);
  CHECK(parallel_parts > 0);  // the second thread had work to do
  // A branch reaches the host only where the search has not taken it back first (it runs queued
  // branches while it waits): on a loaded machine the small shape's tiny branches rarely do.
  if (shape != Shape::SMALL) CHECK(remote_branches > 0);
  // Without the cache, every pruned execution is sleep-blocked: options explored where another
  // that excludes them was (a choose's branches, a wildcard's senders, an exit's rank) whose
  // executions turn out to be covered already. A few, not a share that grows.
  CHECK(fixed_blocked * 50 <= fixed_total);
}

// dfs and dpor with and without engine checkpoints (sim::EngineOptions::checkpoints): the same
// executions, in the same order, with the same ends (the report's fingerprint), the same counts and
// the same bugs, found by the same schedules. Returns the executions compared.
uint64_t same_with_and_without_checkpoints(const sim::Scenario& scenario, uint64_t max_executions) {
  uint64_t executions = 0;
  for (const char* strategy : {"dfs", "dpor"}) {
    INFO(strategy);
    checker::CheckOptions options;
    options.collect_terminal_states = true;
    options.max_executions = max_executions;
    options.strategy = strategy;
    options.checkpoints = false;
    const checker::CheckResult replayed = checker::check_scenario(scenario, options);
    options.checkpoints = true;
    const checker::CheckResult resumed = checker::check_scenario(scenario, options);
    CHECK(resumed.verdict == replayed.verdict);
    CHECK(resumed.exhaustive == replayed.exhaustive);
    CHECK(resumed.executions == replayed.executions);
    CHECK(resumed.pruned == replayed.pruned);
    CHECK(resumed.states == replayed.states);
    CHECK(resumed.events == replayed.events);
    CHECK(resumed.fingerprint == replayed.fingerprint);
    CHECK(resumed.terminal_states == replayed.terminal_states);
    CHECK(resumed.bound_hit == replayed.bound_hit);
    CHECK(resumed.error.has_value() == replayed.error.has_value());
    REQUIRE(resumed.bugs.size() == replayed.bugs.size());
    for (size_t b = 0; b < resumed.bugs.size(); ++b) {
      CHECK(resumed.bugs[b].explanation == replayed.bugs[b].explanation);
      CHECK(resumed.bugs[b].schedule == replayed.bugs[b].schedule);
      CHECK(checker::schedule_string(resumed.bugs[b].choices) == checker::schedule_string(replayed.bugs[b].choices));
      CHECK(resumed.bugs[b].execution == replayed.bugs[b].execution);
    }
    executions += replayed.executions;
  }
  return executions;
}

void compare_checkpoints(int runs, uint64_t seed, bool threaded) {
  checker::Rng rng(seed);
  uint64_t executions = 0;
  for (int i = 0; i < runs; ++i) {
    const std::string text = testing::generate_scenario(rng, threaded);
    sim::LoadResult loaded = sim::load_scenario_text(text, "generated.yaml", {});
    INFO(text);
    REQUIRE(loaded.ok());
    executions += same_with_and_without_checkpoints(*loaded.scenario, 1'000);
  }
  MESSAGE("checkpoints: ", runs, " generated scenarios, ", executions, " executions, the same with and without");
}

}  // namespace

TEST_CASE("property: engine checkpoints change nothing a search reports") {
  compare_checkpoints(300, 20261203, false);
  compare_checkpoints(60, 20261205, true);
}

// What the generator does not write: loop and call variables live in the program's environment, not
// on its stack, so a resumed program must get them back (a restore that forgot them sends the wrong
// sizes: a mismatch); recursion, agreed choices, NCCL groups, named streams and async handles,
// comm_concurrency, exits and crashes, the watchdog.
TEST_CASE(
    "engine checkpoints: variables, calls, choices, groups, streams and "
    "ends resume as they were") {
  const char* const scenarios[] = {
      R"Y(scenario: loop-and-call-variables
world: 3
define:
  pad:
    params: [n]
    do:
      - repeat: 9
        do: [{compute: "(n + 1) * 1us"}]
  level:
    params: [n]
    do:
      - if: "n > 0"
        then:
          - if: "rank == 0"
            then: [{recv: {from: any, size: "n"}}, {recv: {from: any, size: "n"}}]
            else: [{send: {to: 0, size: "n"}}]
          - barrier
          - sync
          - call: pad
            with: {n: n}
          - call: level
            with: {n: "n - 1"}
          - call: pad
            with: {n: n}
          - allreduce: {size: "100 + n"}
program:
  - repeat: 2
    as: i
    do:
      - if: "rank == 0"
        then: [{recv: {from: any, size: "16 + i"}}, {recv: {from: any, size: "16 + i"}}]
        else: [{send: {to: 0, size: "16 + i"}}]
      - barrier
      - sync
      - call: pad
        with: {n: i}
      - call: level
        with: {n: 2}
      - allreduce: {size: "8 + i"}
)Y",
      R"Y(scenario: choices
world: 3
program:
  - repeat: 2
    as: step
    do:
      - choose:
          left: [{compute: 1us}]
          right: [{compute: "2us * (step + 1)"}]
      - choose:
          skip: []
          sync: [{allreduce: {size: 4}}]
        agreed: world
      - if: "rank == 0"
        then: [{recv: {from: any, size: 4}}, {recv: {from: any, size: 4}}]
        else: [{send: {to: 0, size: 4}}]
)Y",
      R"Y(scenario: threads-groups-streams
world: 2
semantics: {comm_concurrency: 1}
threads:
  main:
    - group:
        - send: {to: "1 - rank", size: 1KiB}
        - recv: {from: "1 - rank", size: 1KiB}
    - allreduce: {size: 4, async: h}
    - compute: {duration: 3us, stream: side}
    - wait: h
    - allreduce: {size: 8}
  helper:
    - broadcast: {size: 4, root: 0}
    - if: "rank == 1"
      then: [exit]
)Y",
      R"Y(scenario: crash-and-timeout
world: 3
semantics: {timeout: 50us}
threads:
  main:
    - repeat: 2
      do:
        - if: "rank == 0"
          then: [{recv: {from: any, size: 4}}]
          else: [{send: {to: 0, size: 4}}]
    - allreduce: {size: 4}
  watcher:
    - sleep: 10us
    - if: "rank == 2"
      then: [crash]
)Y",
  };
  uint64_t executions = 0;
  for (const char* text : scenarios) {
    sim::LoadResult loaded = sim::load_scenario_text(text, "checkpoints.yaml", {});
    std::string diagnostics;
    for (const sim::Diagnostic& d : loaded.diagnostics) diagnostics += sim::format_diagnostic(d, loaded.text);
    INFO(std::string(text) << diagnostics);
    REQUIRE(loaded.ok());
    const uint64_t ran = same_with_and_without_checkpoints(*loaded.scenario, 20'000);
    CHECK(ran > 10);  // each has choices to come back to
    executions += ran;
  }
  MESSAGE("checkpoints: the crafted scenarios, ", executions, " executions, the same with and without");
}

// Every bundled scenario and trace (at most 2,000 executions of each).
TEST_CASE(
    "engine checkpoints: the bundled scenarios report the same with and "
    "without") {
  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(LOCKSTEP_SOURCE_DIR "/scenarios")) {
    if (entry.path().extension() == ".yaml" || entry.path().extension() == ".jsonl")
      files.push_back(entry.path().string());
  }
  std::sort(files.begin(), files.end());
  uint64_t executions = 0;
  for (const std::string& path : files) {
    INFO(path);
    sim::LoadResult loaded =
        path.ends_with(".jsonl") ? sim::load_trace_file(path, {}) : sim::load_scenario_file(path, {});
    REQUIRE(loaded.ok());
    executions += same_with_and_without_checkpoints(*loaded.scenario, 2'000);
  }
  MESSAGE("checkpoints: ", files.size(), " bundled inputs, ", executions, " executions, the same with and without");
  CHECK(files.size() >= 50);
}

TEST_CASE(
    "property: dpor and dfs agree on verdicts and terminal states - dpor "
    "never explores more") {
  compare_dpor_with_dfs(2250, 20261202, Shape::SMALL, 1'000, 90, false, 4);  // at least 2,000 compared
}

TEST_CASE("property: the same with threads on shared and own streams, communicators and handles") {
  // Two or three ranks of two threads each: what per-object dependence must get right.
  compare_dpor_with_dfs(800, 20261205, Shape::THREADS, 3'000, 90, true, 2);
}

TEST_CASE("property: the same with three ranks of two threads and host-blocking ops (a stateful oracle)") {
  // Spaces grow fast with three two-threaded ranks: the oracle merges equal states.
  compare_dpor_with_dfs(200, 20261204, Shape::THREE_THREADED, 20'000, 60, true, 2);
}

namespace {

// A terminal state (a bug's signature or "completed") with each rank of a stuck op replaced by
// its class's first rank, the stuck ops then sorted (a mismatch's two ops sorted): what
// renaming symmetric ranks keeps.
std::string class_terminal(const std::string& state, const std::vector<int32_t>& first_of) {
  const size_t colon = state.find(':');
  if (colon == std::string::npos) return state;
  if (state.starts_with("mismatch:")) {
    // mismatch:FIELD:FILE:LINE:COL:FILE:LINE:COL:SEQ, the two ops in rank order: renaming the
    // ranks may swap them.
    std::vector<std::string> parts;
    for (size_t at = 0, end = 0; end != std::string::npos; at = end + 1) {
      end = state.find(':', at);
      parts.push_back(state.substr(at, end == std::string::npos ? end : end - at));
    }
    if (parts.size() != 9) return state;
    std::string a = parts[2] + ":" + parts[3] + ":" + parts[4], b = parts[5] + ":" + parts[6] + ":" + parts[7];
    if (b < a) std::swap(a, b);
    return "mismatch:" + parts[1] + ":" + a + ":" + b + ":" + parts[8];
  }
  std::vector<std::string> entries;
  size_t at = colon + 1;
  while (at < state.size()) {
    const size_t end = state.find(';', at);
    std::string entry = state.substr(at, end - at);
    const size_t rank_end = entry.find(':');
    const int rank = std::stoi(entry.substr(0, rank_end));
    entries.push_back(std::to_string(first_of[static_cast<size_t>(rank)]) + entry.substr(rank_end));
    at = end == std::string::npos ? state.size() : end + 1;
  }
  std::sort(entries.begin(), entries.end());
  std::string out = state.substr(0, colon + 1);
  for (const std::string& e : entries) out += e + ";";
  return out;
}

}  // namespace

// --symmetry: the ranks found symmetric are explored once per renaming. Against dfs (which
// merges equal states, not renamed ones): the same verdict and bug kinds, terminal states that
// dfs reaches too, and every terminal state of dfs reached up to renaming symmetric ranks.
TEST_CASE("property: dpor with symmetric ranks finds what dfs does, up to renaming them") {
  const char* runs_env = std::getenv("LOCKSTEP_PROPERTY_RUNS");
  const int runs = runs_env ? std::max(1, std::atoi(runs_env)) : 120;
  checker::Rng rng(20261205);
  int compared = 0, with_classes = 0;
  uint64_t dfs_total = 0, plain_total = 0, symmetric_total = 0;
  for (int i = 0; i < runs; ++i) {
    const std::string text = testing::generate_symmetric_scenario(rng);
    sim::LoadResult loaded = sim::load_scenario_text(text, "generated.yaml", {});
    INFO(text);
    REQUIRE(loaded.ok());
    checker::CheckOptions options;
    options.collect_terminal_states = true;
    options.max_executions = 5'000;
    options.strategy = "dfs";
    options.dfs_state_cache = true;
    const checker::CheckResult dfs = checker::check_scenario(*loaded.scenario, options);
    REQUIRE_FALSE(dfs.error);
    if (!dfs.exhaustive) continue;
    options.dfs_state_cache = false;
    options.strategy = "dpor";
    const checker::CheckResult plain = checker::check_scenario(*loaded.scenario, options);
    options.engine.symmetry = true;
    const checker::CheckResult symmetric = checker::check_scenario(*loaded.scenario, options);
    if (!symmetric.exhaustive || !plain.exhaustive) continue;  // dpor may need more than dfs merging states
    CHECK(plain.verdict == dfs.verdict);
    CHECK(plain.terminal_states == dfs.terminal_states);
    CHECK(symmetric.verdict == dfs.verdict);
    std::set<sim::Verdict> dfs_kinds, symmetric_kinds;
    for (const checker::Bug& bug : dfs.bugs) dfs_kinds.insert(bug.kind);
    for (const checker::Bug& bug : symmetric.bugs) symmetric_kinds.insert(bug.kind);
    CHECK(symmetric_kinds == dfs_kinds);
    for (const std::string& state : symmetric.terminal_states) CHECK(dfs.terminal_states.count(state) == 1);
    std::vector<int32_t> first_of(static_cast<size_t>(loaded.scenario->world));
    for (size_t r = 0; r < first_of.size(); ++r) first_of[r] = static_cast<int32_t>(r);
    for (const std::vector<int32_t>& c : symmetric.rank_classes) {
      for (const int32_t r : c) first_of[static_cast<size_t>(r)] = c.front();
    }
    std::set<std::string> dfs_classes, symmetric_classes;
    for (const std::string& state : dfs.terminal_states) dfs_classes.insert(class_terminal(state, first_of));
    for (const std::string& state : symmetric.terminal_states) symmetric_classes.insert(class_terminal(state, first_of));
    CHECK(symmetric_classes == dfs_classes);
    if (compared % 4 == 0) {
      // On two threads (branches given away as found, one state cache): the same outcomes (its
      // verdict is the first kind found in the order deadlock, hang, mismatch, timeout).
      options.jobs = 2;
      options.jobs_after = 0;
      const checker::CheckResult two = checker::check_scenario(*loaded.scenario, options);
      options.jobs = 1;
      CHECK(two.exhaustive);
      std::set<std::string> two_classes;
      for (const std::string& state : two.terminal_states) two_classes.insert(class_terminal(state, first_of));
      CHECK(two_classes == dfs_classes);
    }
    ++compared;
    with_classes += symmetric.rank_classes.empty() ? 0 : 1;
    dfs_total += dfs.executions;
    plain_total += plain.executions;
    symmetric_total += symmetric.executions;
  }
  MESSAGE("symmetry: compared ", compared, " scenarios, ", with_classes, " with symmetric ranks: dfs (merging equal states) ",
          dfs_total, " executions, dpor ", plain_total, ", dpor --symmetry ", symmetric_total);
  CHECK(compared >= runs / 2);
  CHECK(with_classes >= compared / 2);
  CHECK(symmetric_total < plain_total);
}

}  // namespace lockstep

// How `check` explores a scenario: a search is a sim::Strategy that the checker runs execution
// after execution until it says the space is covered (or a bound stops it). Each strategy is one
// class behind this interface and one line in the registry (checker/strategies.cc).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "sim/engine.h"
#include "sim/strategy.h"

namespace lockstep::checker {

class StateCache;
class WorkPool;
struct Donation;

struct SearchStats {
  uint64_t pruned = 0;         // executions ended at a state whose future was explored
  uint64_t sleep_blocked = 0;  // executions ended because every option was asleep
  uint64_t states = 0;         // distinct states remembered
  bool state_cache_full = false;
};

class Search : public sim::Strategy {
 public:
  // Before each execution; `n` executions ran before it.
  virtual void begin(uint64_t n) { (void)n; }
  // After an execution: whether there is another to run. An exhaustive search returns false
  // once every execution it must run has run; a sampling one, when one execution is the
  // whole space (no choice point).
  virtual bool next(const sim::ExecutionResult& result) = 0;
  // The choices of the execution that just ran, one index per choice point.
  virtual std::vector<uint32_t> schedule() const = 0;
  virtual SearchStats stats() const { return {}; }
  // --jobs with a search that gives branches away (StrategyInfo::make_branch): waits for the
  // branches it gave to be explored; called once it has ended. And how many it gave.
  virtual void finish() {}
  virtual uint64_t donations() const { return 0; }
  // check --mpi with a search split into parts (StrategyInfo::splits): hands the executions it
  // has yet to run under its shallowest choice point with options left to others, as one schedule
  // prefix per option, in depth-first order, and sets `bound` to what is left its own (the
  // schedule it explores up to, SearchOptions::bound). False where it keeps everything.
  virtual bool give_away(std::vector<std::vector<uint32_t>>& prefixes, std::vector<uint32_t>& bound) {
    (void)prefixes;
    (void)bound;
    return false;
  }
};

// An option asleep where a branch given to another thread starts (--jobs): its future from
// there is explored elsewhere. Its footprint is the one it had when it was taken.
struct SleepingOption {
  sim::Option option;
  std::vector<sim::Touch> footprint;
  bool universal = false;  // dependent with every step (it aborts a rank's pending kernels)
};

// What a strategy is made with.
struct SearchOptions {
  uint64_t seed = 0;
  uint32_t pct_depth = 3;
  std::vector<uint32_t> prefix;  // dfs: explore only the executions whose schedule starts so
  // dfs: and only those whose schedule is not after `bound` in depth-first order (a part whose
  // later executions were given away; empty: no bound). Starts with `prefix`.
  std::vector<uint32_t> bound;
  StateCache* shared_cache = nullptr;  // dpor: one cache for every part (--jobs; StateCache(.., true))
  WorkPool* pool = nullptr;  // dpor, --jobs: where branches are given to idle threads
  int level = 0;             // dpor, --jobs: searches the thread is inside of (WorkPool::Runner)
  // dpor, --jobs: a given branch's search uses the shared cache only once the cache has decided
  // whether it is useful (StateCache::decided), which the states of the first search decide.
  bool cache_once_decided = false;
  bool sleep_sets = true;        // dpor: off only to measure what they save
  bool state_cache = true;       // dpor: off only to measure what it saves
  bool dfs_state_cache = false;  // dfs: a stateful oracle (tests; needs the engine's fingerprints)
};

struct StrategyInfo {
  std::string_view name;
  std::string_view summary;  // one line for --help
  bool exhaustive = true;    // covers the space; else samples
  bool splits = false;       // --jobs: subtrees under schedule prefixes explored apart (SearchOptions::prefix; dfs)
  // What it needs of the engine (footprints, state fingerprints).
  void (*configure)(sim::EngineOptions& engine) = nullptr;
  std::unique_ptr<Search> (*make)(const SearchOptions& options) = nullptr;
  // --jobs: the search of a branch another search gave to an idle thread (checker/work_pool.h);
  // null when the strategy does not give branches.
  std::unique_ptr<Search> (*make_branch)(const SearchOptions& options, const Donation& donation) = nullptr;
  bool reduces = false;  // sleep sets and a state cache: the report says what they pruned
};

// Every strategy `check --strategy` accepts, by name.
const std::vector<StrategyInfo>& strategies();
const StrategyInfo* find_strategy(std::string_view name);

}  // namespace lockstep::checker

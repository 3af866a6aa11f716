// Plain exhaustive depth-first search over the engine's choice points: stateless, each
// execution replays the prefix of the previous one and takes the next untried option.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "sim/strategy.h"

namespace lockstep::checker {

// Sleep sets (dpor, docs/semantics.md "Sleep sets"): options whose every future was already
// explored from an equivalent state. An option goes to sleep in the later siblings of the
// subtree that took it, stays asleep while the options taken after it are independent of it
// (sim::independent), and is never taken while asleep. Kept sorted by identity (kind, rank,
// thread, detail), no duplicates.
using SleepSet = std::vector<sim::Option>;

bool option_before(const sim::Option& a, const sim::Option& b);
bool asleep(const SleepSet& sleep, const sim::Option& option);

// The states a search has explored the future of: fingerprints in one flat open-addressed
// table, bounded by `max_states` (when full, nothing more is remembered and the search only
// prunes less), 8 bytes per slot, at most twice max_states slots; with each state the sleep set
// it was explored under when that was not empty (a separate map: most are empty).
class StateCache {
 public:
  explicit StateCache(size_t max_states = DEFAULT_MAX_STATES);

  // Adds a fingerprint (never 0); false when it was already there.
  bool insert(uint64_t state);
  // A visit of `state` under `sleep`: false when a visit before covered this one (its sleep set
  // was a subset of this one's: it explored every option this one would); true when the state
  // must be explored, and then it is remembered with the options neither visit explored.
  bool visit(uint64_t state, const SleepSet& sleep);
  size_t size() const { return size_; }
  bool full() const { return full_; }

  static constexpr size_t DEFAULT_MAX_STATES = 8'000'000;  // 128 MiB of table at most

 private:
  void grow();

  std::vector<uint64_t> slots_;
  size_t size_ = 0;
  size_t max_states_;
  bool full_ = false;
  std::unordered_map<uint64_t, SleepSet> sleep_;  // states explored under a non-empty sleep set
};

class DfsStrategy final : public sim::Strategy {
 public:
  DfsStrategy() = default;
  // Explores only the executions whose schedule starts with `prefix` (a subtree, for --jobs).
  explicit DfsStrategy(std::vector<uint32_t> prefix);

  // Stateful pruning: a new choice point whose state is in `cache` (under a sleep set that
  // covers the current one) ends the execution (PRUNE). Sound because DFS explores the whole
  // subtree of a state before it can meet the state again elsewhere, and the engine's options
  // at a state depend on the state alone.
  void use_cache(StateCache* cache) { cache_ = cache; }
  // Sleep sets (dpor): an option asleep is not taken; a choice point whose options are all
  // asleep, or a forced step that is asleep, ends the execution (PRUNE).
  void use_sleep_sets(bool on) { sleep_sets_ = on; }

  size_t choose(const sim::ChoicePoint& point) override;
  bool forced(const sim::Option& option) override;

  // Moves to the next unexplored execution; false when every execution has been run.
  bool next();

  // The choices of the execution that just ran, one per choice point.
  std::vector<uint32_t> schedule() const;

 private:
  struct Frame {
    uint32_t chosen = 0;
    uint32_t count = 0;
    std::vector<sim::Option> options;  // sleep sets only: what the point offered
    SleepSet sleep;                    // sleep sets only: asleep on arrival
  };
  // The sleep set below frame `f` after its current choice.
  void descend(const Frame& f);
  // Drops from pending_ what `taken` does not commute with; false when `taken` is asleep.
  bool take(const sim::Option& taken);

  std::vector<Frame> stack_;
  size_t depth_ = 0;
  size_t frozen_ = 0;  // the first frozen_ frames are the fixed prefix
  StateCache* cache_ = nullptr;
  bool sleep_sets_ = false;
  SleepSet pending_;  // the sleep set at the next choice point
};

}  // namespace lockstep::checker

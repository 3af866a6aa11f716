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
  // Dynamic source sets: what the explored future of a state reported (a DfsStrategy "seen"
  // mask), merged into what is kept for it; and what a covered visit takes as its own future.
  // Kept beside the fingerprints (8 more bytes per slot, from the first mask on).
  void add_seen(uint64_t state, uint64_t seen);
  uint64_t seen(uint64_t state) const;
  size_t size() const { return size_; }
  bool full() const { return full_; }

  static constexpr size_t DEFAULT_MAX_STATES = 8'000'000;  // 128 MiB of table at most

 private:
  void grow();

  size_t find(uint64_t state) const;  // its slot, or slots_.size()

  std::vector<uint64_t> slots_;
  std::vector<uint64_t> seen_;  // empty, or one mask per slot
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
  // Dynamic source sets (dpor, with sim::EngineOptions::lazy_points): at a point with a lazy
  // rank, that rank's options are explored first; an event below the point, in any execution of
  // its subtree, that gives the rank that acted at the point a new option and does not happen
  // after its step there is a race, and adds the options at the point of the ranks whose steps
  // after it the event follows (the race's initials are among them), or every option when there
  // are none. A step that may abort a rank, and the stored future of a state the subtree met
  // again, add every option (docs/semantics.md).
  void use_lazy_points(bool on) { lazy_ = on; }

  size_t choose(const sim::ChoicePoint& point) override;
  bool forced(const sim::Option& option) override;
  void new_option(int32_t rank, const sim::Cause& cause) override;
  uint64_t resume_depth() const override;
  bool revisits(uint64_t index) const override;
  void resumed(uint64_t index) override;

  // Points explored lazily where some option awake was never run, so far.
  uint64_t lazy_kept() const { return lazy_kept_; }

  // Moves to the next unexplored execution; false when every execution has been run.
  bool next();

  // The choices of the execution that just ran, one per choice point.
  std::vector<uint32_t> schedule() const;

 private:
  struct Frame {
    uint32_t chosen = 0;
    uint32_t count = 0;
    std::vector<sim::Option> options;  // sleep sets or lazy points: what the point offered
    SleepSet sleep;                    // sleep sets only: asleep on arrival
    // Lazy points: the rank explored first, whose options come first (the engine sorts options
    // by rank; -1: every option, in order), the point's fingerprint, and what the events after
    // it reported in its subtree so far.
    int32_t lazy_rank = -1;
    uint64_t state = 0;
    // Races with every point of their rank above (a seen mask): steps that may abort, stored
    // futures met again (their causes are not kept).
    uint64_t seen = 0;
    // Every report of the subtree, as a seen mask: the state's future that the cache keeps (on
    // another path the causes differ, so a visit that meets it again takes all as races).
    uint64_t future = 0;
    // Lazy points: the options run so far (they may run out of order, as races add ranks), every
    // option needed (a race with no known initial), and the other ranks whose options races
    // added (sorted).
    std::vector<uint8_t> done;
    bool all = false;
    std::vector<int32_t> ranks;
  };
  // What a step below a point reports, as a mask: bit r % 63 for "rank r may have a new
  // option" (ranks sharing a bit only expand more), bit 63 for a step that may abort its rank.
  static constexpr uint64_t SEEN_ABORT = uint64_t{1} << 63;
  static uint64_t seen_new_option(int32_t rank) { return uint64_t{1} << (static_cast<uint32_t>(rank) % 63); }
  // Records `seen` for the frame whose choice came last (nothing before the first point).
  void report(uint64_t seen) {
    if (depth_ > 0) {
      stack_[depth_ - 1].seen |= seen;
      stack_[depth_ - 1].future |= seen;
    }
  }
  // A race at the lazy frame `f` (point `index`) with an event that follows `cause`.
  static void widen(Frame& f, uint64_t index, const sim::Cause& cause);
  // Whether option i of `f` ran before its current choice (its subtree is explored).
  static bool explored(const Frame& f, uint32_t i) { return f.lazy_rank >= 0 ? f.done[i] != 0 : i < f.chosen; }
  // The sleep set below frame `f` after its current choice.
  void descend(const Frame& f);
  // Drops from pending_ what `taken` does not commute with; false when `taken` is asleep.
  bool take(const sim::Option& taken);
  // A lazy frame's next option to run (count: none).
  uint32_t next_lazy(Frame& f);

  std::vector<Frame> stack_;
  std::vector<uint32_t> lazy_path_;  // the indices of stack_'s lazy frames, in order
  size_t depth_ = 0;
  size_t frozen_ = 0;  // the first frozen_ frames are the fixed prefix
  bool ran_ = false;   // next() was called: stack_ describes the last execution
  StateCache* cache_ = nullptr;
  bool sleep_sets_ = false;
  bool lazy_ = false;
  uint64_t lazy_kept_ = 0;
  SleepSet pending_;  // the sleep set at the next choice point
};

}  // namespace lockstep::checker

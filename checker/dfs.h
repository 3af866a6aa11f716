// Plain exhaustive depth-first search over the engine's choice points: stateless, each
// execution replays the prefix of the previous one and takes the next untried option.
#pragma once

#include <cstdint>
#include <vector>

#include "sim/strategy.h"

namespace lockstep::checker {

// The states a search has explored the whole future of: a set of fingerprints in one flat
// open-addressed table, bounded by `max_states` (when full, nothing more is remembered and the
// search only prunes less). 8 bytes per slot, at most twice max_states slots.
class StateCache {
 public:
  explicit StateCache(size_t max_states = DEFAULT_MAX_STATES);

  // Adds a fingerprint (never 0); false when it was already there.
  bool insert(uint64_t state);
  size_t size() const { return size_; }
  bool full() const { return full_; }

  static constexpr size_t DEFAULT_MAX_STATES = 8'000'000;  // 128 MiB of table at most

 private:
  void grow();

  std::vector<uint64_t> slots_;
  size_t size_ = 0;
  size_t max_states_;
  bool full_ = false;
};

class DfsStrategy final : public sim::Strategy {
 public:
  DfsStrategy() = default;
  // Explores only the executions whose schedule starts with `prefix` (a subtree, for --jobs).
  explicit DfsStrategy(std::vector<uint32_t> prefix);

  // Stateful pruning: a new choice point whose state is in `cache` ends the execution (PRUNE).
  // Sound because DFS explores the whole subtree of a state before it can meet the state again
  // elsewhere, and the engine's options at a state depend on the state alone.
  void use_cache(StateCache* cache) { cache_ = cache; }

  size_t choose(const sim::ChoicePoint& point) override;

  // Moves to the next unexplored execution; false when every execution has been run.
  bool next();

  // The choices of the execution that just ran, one per choice point.
  std::vector<uint32_t> schedule() const;

 private:
  struct Frame {
    uint32_t chosen = 0;
    uint32_t count = 0;
  };
  std::vector<Frame> stack_;
  size_t depth_ = 0;
  size_t frozen_ = 0;  // the first frozen_ frames are the fixed prefix
  StateCache* cache_ = nullptr;
};

}  // namespace lockstep::checker

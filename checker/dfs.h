// `dfs`: plain exhaustive depth-first search over the engine's choice points, the oracle the
// reductions are tested against. Stateless: each execution replays the prefix of the previous
// one (or starts from the engine's checkpoint within it) and takes the next untried option.
#pragma once

#include <cstdint>
#include <vector>

#include "checker/reduction/state_cache.h"
#include "checker/search.h"

namespace lockstep::checker {

class DfsSearch final : public Search {
 public:
  DfsSearch() = default;
  // Explores only the executions whose schedule starts with `prefix` (a subtree, for --jobs),
  // and of them, where `bound` is not empty, those not after it in depth-first order.
  explicit DfsSearch(std::vector<uint32_t> prefix, std::vector<uint32_t> bound = {});
  // A stateful oracle (SearchOptions::dfs_state_cache, with the engine's state fingerprints): a
  // state met again ends the execution. Sound for plain DFS (a state's subtree is explored
  // before it can be met elsewhere); it shares nothing with dpor's reduction but the fingerprint.
  void use_state_cache(bool on) { cached_ = on; }
  SearchStats stats() const override;

  size_t choose(const sim::ChoicePoint& point) override;
  uint64_t resume_depth() const override;
  bool revisits(uint64_t index) const override;
  void resumed(uint64_t index, uint64_t steps) override;
  bool next(const sim::ExecutionResult& result) override;
  std::vector<uint32_t> schedule() const override;
  bool give_away(std::vector<std::vector<uint32_t>>& prefixes, std::vector<uint32_t>& bound) override;

 private:
  // The options frame `d` may take: all of them, or up to the bound's where the path above it
  // follows the bound.
  uint32_t options_at(size_t d) const;
  struct Frame {
    uint32_t chosen = 0;
    uint32_t count = 0;
  };
  std::vector<Frame> stack_;
  size_t depth_ = 0;
  size_t frozen_ = 0;  // the first frozen_ frames are the fixed prefix
  std::vector<uint32_t> bound_;
  bool ran_ = false;   // next() was called: stack_ describes the last execution
  bool cached_ = false;
  StateCache cache_;
  uint64_t pruned_ = 0;
};

}  // namespace lockstep::checker

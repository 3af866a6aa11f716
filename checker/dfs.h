// Plain exhaustive depth-first search over the engine's choice points: stateless, each
// execution replays the prefix of the previous one and takes the next untried option.
#pragma once

#include <cstdint>
#include <vector>

#include "sim/strategy.h"

namespace lockstep::checker {

class DfsStrategy final : public sim::Strategy {
 public:
  DfsStrategy() = default;
  // Explores only the executions whose schedule starts with `prefix` (a subtree, for --jobs).
  explicit DfsStrategy(std::vector<uint32_t> prefix);

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
};

}  // namespace lockstep::checker

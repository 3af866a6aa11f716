#include "checker/dfs.h"

#include <algorithm>
#include <cassert>

namespace lockstep::checker {

DfsStrategy::DfsStrategy(std::vector<uint32_t> prefix) : frozen_(prefix.size()) {
  for (uint32_t chosen : prefix) stack_.push_back(Frame{chosen, 0});
}

size_t DfsStrategy::choose(const sim::ChoicePoint& point) {
  const uint32_t count = static_cast<uint32_t>(point.options.size());
  if (depth_ < frozen_) {
    stack_[depth_].count = count;
    assert(stack_[depth_].chosen < count && "prefix does not fit the scenario");
    return stack_[depth_++].chosen;
  }
  if (depth_ < stack_.size()) {
    // Replaying the prefix: the engine is deterministic, so the same point comes back.
    assert(stack_[depth_].count == count && "nondeterministic engine: choice point changed on replay");
    return stack_[depth_++].chosen;
  }
  stack_.push_back(Frame{0, count});
  ++depth_;
  return 0;
}

bool DfsStrategy::next() {
  // Choice points below depth_ were not reached this time (cannot happen with a deterministic
  // engine, but keep the stack exact).
  stack_.resize(std::max(depth_, frozen_));
  while (stack_.size() > frozen_ && stack_.back().chosen + 1 >= stack_.back().count) stack_.pop_back();
  depth_ = 0;
  if (stack_.size() <= frozen_) return false;
  ++stack_.back().chosen;
  return true;
}

std::vector<uint32_t> DfsStrategy::schedule() const {
  std::vector<uint32_t> out;
  out.reserve(depth_);
  for (size_t i = 0; i < depth_; ++i) out.push_back(stack_[i].chosen);
  return out;
}

}  // namespace lockstep::checker

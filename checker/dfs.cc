#include "checker/dfs.h"

#include <algorithm>
#include <cassert>

namespace lockstep::checker {

DfsSearch::DfsSearch(std::vector<uint32_t> prefix) : frozen_(prefix.size()) {
  for (uint32_t chosen : prefix) stack_.push_back(Frame{chosen, 0});
}

uint64_t DfsSearch::resume_depth() const {
  // After next(), the last frame takes its next option and every frame before it is replayed.
  return ran_ && !stack_.empty() ? stack_.size() - 1 : 0;
}

bool DfsSearch::revisits(uint64_t index) const {
  if (index < frozen_ || index >= stack_.size()) return false;
  return stack_[index].chosen + 1 < stack_[index].count;
}

void DfsSearch::resumed(uint64_t index, uint64_t steps) {
  (void)steps;
  assert(index == 0 || index < stack_.size());
  depth_ = index;
}

size_t DfsSearch::choose(const sim::ChoicePoint& point) {
  const uint32_t count = static_cast<uint32_t>(point.options.size());
  if (depth_ < stack_.size()) {
    Frame& f = stack_[depth_];
    if (depth_ < frozen_) {
      f.count = count;
      assert(f.chosen < count && "prefix does not fit the scenario");
    } else {
      // Replaying the prefix: the engine is deterministic, so the same point comes back.
      assert(f.count == count && "nondeterministic engine: choice point changed on replay");
    }
    ++depth_;
    return f.chosen;
  }
  if (cached_ && point.state != 0 && !cache_.visit(point.state, {})) {
    ++pruned_;
    return sim::Strategy::PRUNE;
  }
  stack_.push_back(Frame{0, count});
  ++depth_;
  return 0;
}

SearchStats DfsSearch::stats() const { return SearchStats{pruned_, 0, cache_.size(), cache_.full()}; }

bool DfsSearch::next(const sim::ExecutionResult& result) {
  (void)result;
  ran_ = true;
  // Choice points below depth_ were not reached this time (cannot happen with a deterministic
  // engine, but keep the stack exact).
  stack_.resize(std::max(depth_, frozen_));
  depth_ = 0;
  while (stack_.size() > frozen_) {
    Frame& f = stack_.back();
    if (f.chosen + 1 < f.count) {
      ++f.chosen;
      return true;
    }
    stack_.pop_back();
  }
  return false;
}

std::vector<uint32_t> DfsSearch::schedule() const {
  std::vector<uint32_t> out;
  out.reserve(depth_);
  for (size_t i = 0; i < depth_; ++i) out.push_back(stack_[i].chosen);
  return out;
}

}  // namespace lockstep::checker

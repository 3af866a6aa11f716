#include "checker/dfs.h"

#include <algorithm>
#include <cassert>

namespace lockstep::checker {

DfsSearch::DfsSearch(std::vector<uint32_t> prefix, std::vector<uint32_t> bound)
    : frozen_(prefix.size()), bound_(std::move(bound)) {
  for (uint32_t chosen : prefix) stack_.push_back(Frame{chosen, 0});
  assert(bound_.empty() || (bound_.size() >= frozen_ && std::equal(prefix.begin(), prefix.end(), bound_.begin())));
}

uint32_t DfsSearch::options_at(size_t d) const {
  const uint32_t count = stack_[d].count;
  if (d >= bound_.size()) return count;
  for (size_t i = 0; i < d; ++i) {
    if (stack_[i].chosen != bound_[i]) return count;  // before the bound's path: every option
  }
  return std::min(count, bound_[d] + 1);
}

bool DfsSearch::give_away(std::vector<std::vector<uint32_t>>& prefixes, std::vector<uint32_t>& bound) {
  // After next(), the stack is the path to the next execution's new branch: the options left
  // are those after `chosen` at each frame. The shallowest frame with some holds the most work.
  if (!ran_) return false;
  for (size_t d = frozen_; d < stack_.size(); ++d) {
    const uint32_t end = options_at(d);
    if (stack_[d].chosen + 1 >= end) continue;
    std::vector<uint32_t> path;
    for (size_t i = 0; i <= d; ++i) path.push_back(stack_[i].chosen);
    for (uint32_t c = stack_[d].chosen + 1; c < end; ++c) {
      path.back() = c;
      prefixes.push_back(path);
    }
    path.back() = stack_[d].chosen;
    bound_ = path;
    bound = bound_;
    return true;
  }
  return false;
}

uint64_t DfsSearch::resume_depth() const {
  // After next(), the last frame takes its next option and every frame before it is replayed.
  return ran_ && !stack_.empty() ? stack_.size() - 1 : 0;
}

bool DfsSearch::revisits(uint64_t index) const {
  if (index < frozen_ || index >= stack_.size()) return false;
  return stack_[index].chosen + 1 < options_at(index);
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
    if (f.chosen + 1 < options_at(stack_.size() - 1)) {
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

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
  if (cache_ != nullptr && point.state != 0 && !cache_->insert(point.state)) return sim::Strategy::PRUNE;
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

StateCache::StateCache(size_t max_states) : slots_(1024, 0), max_states_(max_states) {}

bool StateCache::insert(uint64_t state) {
  assert(state != 0);
  const size_t mask = slots_.size() - 1;
  // The fingerprints are already well mixed: their low bits index the table.
  for (size_t i = static_cast<size_t>(state) & mask;; i = (i + 1) & mask) {
    if (slots_[i] == state) return false;
    if (slots_[i] == 0) {
      if (full_) return true;
      slots_[i] = state;
      ++size_;
      if (size_ >= max_states_) full_ = true;
      else if (size_ * 2 > slots_.size()) grow();
      return true;
    }
  }
}

void StateCache::grow() {
  std::vector<uint64_t> old(slots_.size() * 2, 0);
  old.swap(slots_);
  const size_t mask = slots_.size() - 1;
  for (uint64_t state : old) {
    if (state == 0) continue;
    size_t i = static_cast<size_t>(state) & mask;
    while (slots_[i] != 0) i = (i + 1) & mask;
    slots_[i] = state;
  }
}

}  // namespace lockstep::checker

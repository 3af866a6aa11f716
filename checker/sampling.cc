#include "checker/sampling.h"

#include <algorithm>

namespace lockstep::checker {

namespace {

uint64_t mix(uint64_t seed, uint64_t execution) {
  Rng rng(seed ^ (execution * 0xd1b54a32d192ed03ULL));
  return rng.next();
}

}  // namespace

void RandomStrategy::begin_execution(uint64_t execution) { rng_ = Rng(mix(seed_, execution)); }

size_t RandomStrategy::choose(const sim::ChoicePoint& point) { return static_cast<size_t>(rng_.below(point.options.size())); }

void PctStrategy::begin_execution(uint64_t execution, uint64_t expected_points) {
  rng_ = Rng(mix(seed_, execution));
  priority_.clear();
  change_points_.clear();
  point_ = 0;
  lowered_ = 0;
  const uint64_t span = std::max<uint64_t>(expected_points, 1);
  for (uint32_t i = 1; i < depth_; ++i) change_points_.push_back(rng_.below(span));
  std::sort(change_points_.begin(), change_points_.end());
}

uint64_t PctStrategy::priority_of(const sim::Option& option) {
  // The actor: the thread for thread steps, the sender for matches, the rank otherwise.
  std::pair<int32_t, int32_t> actor{option.rank, -1};
  if (option.kind == sim::ChoiceKind::THREAD) actor.second = option.thread;
  if (option.kind == sim::ChoiceKind::MATCH) actor = {option.detail, -2};
  auto it = priority_.find(actor);
  if (it == priority_.end()) {
    // Fresh actors get random high priorities (above every lowered one).
    it = priority_.emplace(actor, (1ULL << 32) + rng_.below(1ULL << 31)).first;
  }
  return it->second;
}

size_t PctStrategy::choose(const sim::ChoicePoint& point) {
  if (point.options.front().kind == sim::ChoiceKind::BRANCH) return static_cast<size_t>(rng_.below(point.options.size()));
  size_t best = 0;
  uint64_t best_priority = 0;
  for (size_t i = 0; i < point.options.size(); ++i) {
    const uint64_t p = priority_of(point.options[i]);
    if (i == 0 || p > best_priority) {
      best = i;
      best_priority = p;
    }
  }
  // At a change point the winner drops below everyone (to the lowered count so far).
  while (lowered_ < change_points_.size() && change_points_[lowered_] == point_) {
    const sim::Option& winner = point.options[best];
    std::pair<int32_t, int32_t> actor{winner.rank, winner.kind == sim::ChoiceKind::THREAD ? winner.thread : -1};
    if (winner.kind == sim::ChoiceKind::MATCH) actor = {winner.detail, -2};
    priority_[actor] = lowered_ + 1;
    ++lowered_;
  }
  ++point_;
  return best;
}

}  // namespace lockstep::checker

#include "checker/sampling.h"

#include <algorithm>

namespace lockstep::checker {

namespace {

uint64_t mix(uint64_t seed, uint64_t execution) {
  Rng rng(seed ^ (execution * 0xd1b54a32d192ed03ULL));
  return rng.next();
}

}  // namespace

void RandomStrategy::begin(uint64_t execution) { rng_ = Rng(mix(seed_, execution)); }

size_t RandomStrategy::choose(const sim::ChoicePoint& point) { return static_cast<size_t>(rng_.below(point.options.size())); }

void PctStrategy::begin(uint64_t execution) {
  rng_ = Rng(mix(seed_, execution));
  priority_.clear();
  change_points_.clear();
  point_ = 0;
  lowered_ = 0;
  const uint64_t span = std::max<uint64_t>(longest_, 1);
  for (uint32_t i = 1; i < depth_; ++i) change_points_.push_back(rng_.below(span));
  std::sort(change_points_.begin(), change_points_.end());
}

bool PctStrategy::next(const sim::ExecutionResult& result) {
  longest_ = std::max<uint64_t>(longest_, result.choice_points);
  return result.choice_points > 0;
}

uint64_t PctStrategy::priority_of(uint32_t actor) {
  auto it = priority_.find(actor);
  if (it == priority_.end()) {
    // Fresh actors get random high priorities (above every lowered one).
    it = priority_.emplace(actor, (1ULL << 32) + rng_.below(1ULL << 31)).first;
  }
  return it->second;
}

size_t PctStrategy::choose(const sim::ChoicePoint& point) {
  size_t best = 0;
  uint64_t best_priority = 0;
  for (size_t i = 0; i < point.options.size(); ++i) {
    const uint64_t p = priority_of(point.options[i].actor);
    if (i == 0 || p > best_priority) {
      best = i;
      best_priority = p;
    }
  }
  // At a change point the winner drops below everyone (to the lowered count so far).
  while (lowered_ < change_points_.size() && change_points_[lowered_] == point_) {
    priority_[point.options[best].actor] = lowered_ + 1;
    ++lowered_;
  }
  ++point_;
  // A thread at a `choose`: one of its branches (its options follow each other), at random.
  const sim::Option& winner = point.options[best];
  if (winner.kind == sim::ChoiceKind::BRANCH) {
    size_t first = best;
    while (first > 0 && point.options[first - 1].actor == winner.actor) --first;
    size_t count = best - first;
    while (first + count < point.options.size() && point.options[first + count].actor == winner.actor) ++count;
    return first + static_cast<size_t>(rng_.below(count));
  }
  return best;
}

}  // namespace lockstep::checker

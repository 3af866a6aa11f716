#include "checker/dfs.h"

#include <algorithm>
#include <cassert>
#include <iterator>
#include <tuple>

namespace lockstep::checker {

bool option_before(const sim::Option& a, const sim::Option& b) {
  return std::tie(a.kind, a.rank, a.thread, a.detail) < std::tie(b.kind, b.rank, b.thread, b.detail);
}

bool asleep(const SleepSet& sleep, const sim::Option& option) {
  return std::binary_search(sleep.begin(), sleep.end(), option, option_before);
}

DfsStrategy::DfsStrategy(std::vector<uint32_t> prefix) : frozen_(prefix.size()) {
  for (uint32_t chosen : prefix) {
    stack_.emplace_back();
    stack_.back().chosen = chosen;
  }
}

void DfsStrategy::widen(Frame& f, uint64_t index, const sim::Cause& cause) {
  if (f.all) return;
  // The event's causal past after the point starts with options at the point (everything
  // enabled there without a choice ran before it): of the ranks whose steps after the point it
  // follows. Those ranks' options at the point hold the race's initials.
  bool any = false;
  for (size_t i = 0; i < cause.size(); ++i) {
    if (cause.position(i) <= 2 * index + 1) continue;
    const int32_t rank = cause.rank(i);
    const bool offered = std::any_of(f.options.begin(), f.options.end(), [&](const sim::Option& o) { return o.rank == rank; });
    if (!offered) continue;
    any = true;
    const auto it = std::lower_bound(f.ranks.begin(), f.ranks.end(), rank);
    if (it == f.ranks.end() || *it != rank) f.ranks.insert(it, rank);
  }
  // None known (the cause's steps after the point are not known): every option.
  if (!any) f.all = true;
}

void DfsStrategy::new_option(int32_t rank, const sim::Cause& cause) {
  if (!lazy_ || depth_ == 0) return;
  stack_[depth_ - 1].future |= seen_new_option(rank);
  // A race with each lazy point on the path where `rank` acted and whose step the event does
  // not follow (the rank's steps are never run first there: it could have had this option),
  // deepest first; once the event follows one, it follows every earlier step of the rank too.
  // Where another rank acted (a rank a race added), the new option races with that rank's
  // step no more than it would elsewhere.
  for (auto it = lazy_path_.rbegin(); it != lazy_path_.rend(); ++it) {
    const uint32_t index = *it;
    if (index >= depth_) continue;
    Frame& f = stack_[index];
    if (f.options[f.chosen].rank != rank) continue;
    if (cause.follows(rank, index)) break;
    widen(f, index, cause);
  }
}

uint64_t DfsStrategy::resume_depth() const {
  // After next(), the last frame takes its next option and every frame before it is replayed.
  return ran_ && !stack_.empty() ? stack_.size() - 1 : 0;
}

bool DfsStrategy::revisits(uint64_t index) const {
  if (index < frozen_ || index >= stack_.size()) return false;
  const Frame& f = stack_[index];
  if (f.lazy_rank >= 0) {  // any other option not run yet (races may still add it)
    for (uint32_t i = 0; i < f.count; ++i) {
      if (i != f.chosen && f.done[i] == 0) return true;
    }
    return false;
  }
  return f.chosen + 1 < f.count;  // may yet be skipped (asleep, lazy); never needed if not
}

void DfsStrategy::resumed(uint64_t index) {
  assert(index == 0 || index < stack_.size());
  depth_ = index;
  pending_.clear();  // the replayed frame's descend() sets it
}

void DfsStrategy::descend(const Frame& f) {
  // Asleep below: what was asleep here, and the options this point took before the current
  // one (their subtrees are explored), each while the current choice commutes with it.
  const sim::Option& taken = f.options[f.chosen];
  pending_.clear();
  for (const sim::Option& x : f.sleep) {
    if (sim::independent(x, taken)) pending_.push_back(x);
  }
  const size_t kept = pending_.size();
  for (uint32_t i = 0; i < f.count; ++i) {
    if (i == f.chosen || !explored(f, i)) continue;
    const sim::Option& x = f.options[i];
    if (sim::independent(x, taken) && !asleep(f.sleep, x)) pending_.push_back(x);
  }
  if (pending_.size() > kept) {
    std::sort(pending_.begin() + static_cast<std::ptrdiff_t>(kept), pending_.end(), option_before);
    std::inplace_merge(pending_.begin(), pending_.begin() + static_cast<std::ptrdiff_t>(kept), pending_.end(),
                       option_before);
  }
}

bool DfsStrategy::take(const sim::Option& taken) {
  if (pending_.empty()) return true;
  if (asleep(pending_, taken)) return false;
  std::erase_if(pending_, [&](const sim::Option& x) { return !sim::independent(x, taken); });
  return true;
}

bool DfsStrategy::forced(const sim::Option& option) {
  if (lazy_ && option.may_abort) report(SEEN_ABORT);
  return !sleep_sets_ || take(option);
}

size_t DfsStrategy::choose(const sim::ChoicePoint& point) {
  const uint32_t count = static_cast<uint32_t>(point.options.size());
  if (depth_ < stack_.size()) {
    Frame& f = stack_[depth_];
    if (depth_ < frozen_) {
      f.count = count;
      assert(f.chosen < count && "prefix does not fit the scenario");
      if (sleep_sets_ && f.options.empty()) {
        f.options.assign(point.options.begin(), point.options.end());
        f.sleep = pending_;
      }
      // A prefix through an option asleep: another subtree covers all of this one.
      if (sleep_sets_ && asleep(f.sleep, f.options[f.chosen])) return sim::Strategy::PRUNE;
    } else {
      // Replaying the prefix: the engine is deterministic, so the same point comes back.
      assert(f.count == count && "nondeterministic engine: choice point changed on replay");
    }
    if (sleep_sets_) descend(f);
    ++depth_;
    return f.chosen;
  }
  uint32_t first = 0;
  if (sleep_sets_) {
    while (first < count && asleep(pending_, point.options[first])) ++first;
    if (first == count) return sim::Strategy::PRUNE;  // every option's future is covered
  }
  if (lazy_ && std::any_of(point.options.begin(), point.options.end(), [](const sim::Option& o) { return o.may_abort; })) {
    report(SEEN_ABORT);
  }
  if (cache_ != nullptr && point.state != 0) {
    const bool fresh = sleep_sets_ ? cache_->visit(point.state, pending_) : cache_->insert(point.state);
    if (!fresh) {
      // The state's future was explored before: what it reported is this path's future too.
      if (lazy_) report(cache_->seen(point.state));
      return sim::Strategy::PRUNE;
    }
  }
  stack_.emplace_back();
  Frame& f = stack_.back();
  f.chosen = first;
  f.count = count;
  if (sleep_sets_ || lazy_) f.options.assign(point.options.begin(), point.options.end());
  if (lazy_) {
    // Lazy only while the first option taken is the lazy rank's (all of its asleep: every one).
    if (point.lazy_rank >= 0 && point.options[first].rank == point.lazy_rank) {
      f.lazy_rank = point.lazy_rank;
      f.done.assign(count, 0);
      lazy_path_.push_back(static_cast<uint32_t>(stack_.size() - 1));
    }
    f.state = point.state;
  }
  if (sleep_sets_) {
    f.sleep = pending_;
    descend(f);
  }
  ++depth_;
  return first;
}

bool DfsStrategy::next() {
  ran_ = true;
  // Choice points below depth_ were not reached this time (cannot happen with a deterministic
  // engine, but keep the stack exact).
  stack_.resize(std::max(depth_, frozen_));
  while (!lazy_path_.empty() && lazy_path_.back() >= stack_.size()) lazy_path_.pop_back();
  depth_ = 0;
  pending_.clear();
  while (stack_.size() > frozen_) {
    Frame& f = stack_.back();
    uint32_t n = f.chosen + 1;
    if (f.lazy_rank >= 0) {
      n = next_lazy(f);
    } else if (sleep_sets_) {
      while (n < f.count && asleep(f.sleep, f.options[n])) ++n;
    }
    if (n < f.count) {
      f.chosen = n;
      return true;
    }
    // Done: what the subtree reported belongs to the state's future and to the point above.
    if (f.future != 0) {
      if (cache_ != nullptr && f.state != 0) cache_->add_seen(f.state, f.future);
      if (stack_.size() >= 2) {
        Frame& up = stack_[stack_.size() - 2];
        up.seen |= f.seen;
        up.future |= f.future;
      }
    }
    if (!lazy_path_.empty() && lazy_path_.back() == stack_.size() - 1) lazy_path_.pop_back();
    stack_.pop_back();
  }
  return false;
}

uint32_t DfsStrategy::next_lazy(Frame& f) {
  f.done[f.chosen] = 1;
  // The lazy rank's options first (they come first), then, lowest first, those of the ranks
  // that races added (a race found below an added option may add a rank listed before it), or
  // every option once a race had no known initial, a step may have aborted a rank, or a stored
  // future met again reported one of the ranks that act here.
  uint64_t acted = SEEN_ABORT | seen_new_option(f.lazy_rank);
  for (const int32_t rank : f.ranks) acted |= seen_new_option(rank);
  const bool all = f.all || (f.seen & acted) != 0;
  bool kept = false;
  for (uint32_t i = 0; i < f.count; ++i) {
    if (f.done[i] != 0) continue;
    const sim::Option& o = f.options[i];
    if (sleep_sets_ && asleep(f.sleep, o)) continue;
    if (o.rank == f.lazy_rank || all || std::binary_search(f.ranks.begin(), f.ranks.end(), o.rank)) return i;
    kept = true;
  }
  if (kept) ++lazy_kept_;
  return f.count;
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

bool StateCache::visit(uint64_t state, const SleepSet& sleep) {
  const size_t before = size_;
  if (insert(state)) {
    if (size_ > before && !sleep.empty()) sleep_.emplace(state, sleep);
    return true;
  }
  const auto it = sleep_.find(state);
  if (it == sleep_.end()) return false;  // explored with nothing asleep: every option was
  // A START option names its kernel by engine slot, which differs between paths to one state:
  // it never counts as asleep here, and one stored makes the visit explore (the safe side).
  SleepSet now;
  for (const sim::Option& x : sleep) {
    if (x.kind != sim::ChoiceKind::START) now.push_back(x);
  }
  SleepSet& stored = it->second;
  if (std::includes(now.begin(), now.end(), stored.begin(), stored.end(), option_before)) return false;
  // Explored again under `now`: what neither visit explored stays asleep for later visits.
  SleepSet both;
  std::set_intersection(stored.begin(), stored.end(), now.begin(), now.end(), std::back_inserter(both),
                        option_before);
  if (both.empty()) sleep_.erase(it);
  else stored = std::move(both);
  return true;
}

size_t StateCache::find(uint64_t state) const {
  const size_t mask = slots_.size() - 1;
  for (size_t i = static_cast<size_t>(state) & mask;; i = (i + 1) & mask) {
    if (slots_[i] == state) return i;
    if (slots_[i] == 0) return slots_.size();
  }
}

void StateCache::add_seen(uint64_t state, uint64_t seen) {
  const size_t i = find(state);
  if (i == slots_.size()) return;  // not kept (the cache was full): never met again
  if (seen_.empty()) seen_.assign(slots_.size(), 0);
  seen_[i] |= seen;
}

uint64_t StateCache::seen(uint64_t state) const {
  if (seen_.empty()) return 0;
  const size_t i = find(state);
  return i == slots_.size() ? 0 : seen_[i];
}

void StateCache::grow() {
  std::vector<uint64_t> old(slots_.size() * 2, 0);
  old.swap(slots_);
  std::vector<uint64_t> old_seen;
  if (!seen_.empty()) {
    old_seen.assign(slots_.size(), 0);
    old_seen.swap(seen_);
  }
  const size_t mask = slots_.size() - 1;
  for (size_t j = 0; j < old.size(); ++j) {
    const uint64_t state = old[j];
    if (state == 0) continue;
    size_t i = static_cast<size_t>(state) & mask;
    while (slots_[i] != 0) i = (i + 1) & mask;
    slots_[i] = state;
    if (!old_seen.empty()) seen_[i] = old_seen[j];
  }
}

}  // namespace lockstep::checker

#include "checker/reduction/state_cache.h"

#include <algorithm>
#include <cassert>
#include <iterator>

namespace lockstep::checker {

namespace {

uint64_t bit_of(uint32_t object) {
  uint64_t x = object * 0x9e3779b97f4a7c15ULL;
  return uint64_t{1} << (x >> 58);
}

}  // namespace

void Summary::add_footprint(std::span<const sim::Touch> footprint, bool universal) {
  if (universal) {
    against_read = against_add = ~uint64_t{0};
    return;
  }
  for (const sim::Touch& t : footprint) {
    const uint64_t bit = bit_of(t.object);
    if (t.access != sim::Access::READ) against_read |= bit;
    if (t.access != sim::Access::ADD) against_add |= bit;
  }
}

bool Summary::conflicts(std::span<const sim::Touch> footprint, bool universal) const {
  if (universal) return !empty();
  for (const sim::Touch& t : footprint) {
    const uint64_t bit = bit_of(t.object);
    const uint64_t against = t.access == sim::Access::READ  ? against_read
                             : t.access == sim::Access::ADD ? against_add
                                                            : against_read | against_add;
    if ((against & bit) != 0) return true;
  }
  return false;
}

StateCache::StateCache(size_t max_states, bool shared)
    : shared_(shared), done_(shared ? 1024 : 0, false), slots_(1024, 0), max_states_(max_states) {}

namespace {

// Holds the cache's mutex when it is shared.
std::optional<std::lock_guard<std::mutex>> lock_if(bool shared, std::mutex& mutex) {
  if (!shared) return std::nullopt;
  return std::optional<std::lock_guard<std::mutex>>(std::in_place, mutex);
}

}  // namespace

size_t StateCache::size() const {
  const auto lock = lock_if(shared_, mutex_);
  return size_;
}

bool StateCache::full() const {
  const auto lock = lock_if(shared_, mutex_);
  return full_;
}

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

bool StateCache::visit(uint64_t state, std::span<const uint64_t> sleep) {
  const auto lock = lock_if(shared_, mutex_);
  const size_t before = size_;
  if (insert(state)) {
    if (size_ > before && !sleep.empty()) sleep_.emplace(state, std::vector<uint64_t>(sleep.begin(), sleep.end()));
    return true;
  }
  const bool over = !shared_ || done_[find(state)];
  const auto it = sleep_.find(state);
  if (it == sleep_.end()) {
    if (over) return false;  // explored with nothing asleep: every step was
    if (!sleep.empty()) sleep_.emplace(state, std::vector<uint64_t>(sleep.begin(), sleep.end()));
    return true;
  }
  std::vector<uint64_t>& stored = it->second;
  if (over && std::includes(sleep.begin(), sleep.end(), stored.begin(), stored.end())) return false;
  // Explored again under `sleep`: what neither visit explored stays asleep for later visits.
  std::vector<uint64_t> both;
  std::set_intersection(stored.begin(), stored.end(), sleep.begin(), sleep.end(), std::back_inserter(both));
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

void StateCache::add_future(uint64_t state, const Summary& future) {
  const auto lock = lock_if(shared_, mutex_);
  const size_t i = find(state);
  if (i == slots_.size()) return;  // not kept (the cache was full): never met again
  if (shared_) done_[i] = true;
  if (future.empty()) return;
  if (futures_.empty()) futures_.assign(slots_.size(), Summary{});
  futures_[i].merge(future);
}

Summary StateCache::future(uint64_t state) const {
  const auto lock = lock_if(shared_, mutex_);
  if (futures_.empty()) return {};
  const size_t i = find(state);
  return i == slots_.size() ? Summary{} : futures_[i];
}

void StateCache::grow() {
  std::vector<uint64_t> old(slots_.size() * 2, 0);
  old.swap(slots_);
  std::vector<Summary> old_futures;
  if (!futures_.empty()) {
    old_futures.assign(slots_.size(), Summary{});
    old_futures.swap(futures_);
  }
  std::vector<bool> old_done;
  if (shared_) {
    old_done.assign(slots_.size(), false);
    old_done.swap(done_);
  }
  const size_t mask = slots_.size() - 1;
  for (size_t j = 0; j < old.size(); ++j) {
    const uint64_t state = old[j];
    if (state == 0) continue;
    size_t i = static_cast<size_t>(state) & mask;
    while (slots_[i] != 0) i = (i + 1) & mask;
    slots_[i] = state;
    if (!old_futures.empty()) futures_[i] = old_futures[j];
    if (shared_) done_[i] = old_done[j];
  }
}

}  // namespace lockstep::checker

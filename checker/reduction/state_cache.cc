#include "checker/reduction/state_cache.h"

#include "checker/reduction/execution.h"

#include <algorithm>
#include <cassert>
#include <iterator>
#include <mutex>

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

void FutureSet::add(std::span<const sim::Touch> footprint, bool all) {
  if (universal) return;
  if (all || footprint.size() + touches.size() > MAX_TOUCHES) {
    universal = true;
    touches.clear();
    return;
  }
  std::vector<sim::Touch> merged;
  merged.reserve(touches.size() + footprint.size());
  size_t i = 0, j = 0;
  while (i < touches.size() || j < footprint.size()) {
    if (j == footprint.size() || (i < touches.size() && touches[i].object < footprint[j].object)) {
      merged.push_back(touches[i++]);
    } else if (i == touches.size() || footprint[j].object < touches[i].object) {
      merged.push_back(sim::Touch{footprint[j].object, footprint[j].access});
      ++j;
    } else {
      const sim::Access a = touches[i].access, b = footprint[j].access;
      merged.push_back(sim::Touch{touches[i].object, a == b ? a : sim::Access::WRITE});
      ++i;
      ++j;
    }
  }
  touches = std::move(merged);
}

bool FutureSet::conflicts(std::span<const sim::Touch> footprint, bool all) const {
  if (all) return !empty();
  if (universal) return !footprint.empty();
  return footprints_conflict(touches, footprint);
}

StateCache::StateCache(size_t max_states, bool shared)
    : shared_(shared),
      max_states_per_shard_(shared ? (max_states >> SHARD_BITS) + 1 : max_states),
      shards_(shared ? size_t{1} << SHARD_BITS : 1) {
  if (shared_) {
    for (Shard& shard : shards_) shard.done.assign(shard.slots.size(), false);
  }
}

namespace {

// Holds a shard's lock when the cache is shared.
template <typename Lock>
std::optional<std::lock_guard<Lock>> lock_if(bool shared, Lock& lock) {
  if (!shared) return std::nullopt;
  return std::optional<std::lock_guard<Lock>>(std::in_place, lock);
}

}  // namespace

size_t StateCache::size() const { return states_.load(std::memory_order_relaxed); }

bool StateCache::full() const { return full_.load(std::memory_order_relaxed); }

bool StateCache::Shard::insert(uint64_t state, size_t max_states) {
  assert(state != 0);
  const size_t mask = slots.size() - 1;
  // The fingerprints are already well mixed: their low bits index the table.
  for (size_t i = static_cast<size_t>(state) & mask;; i = (i + 1) & mask) {
    if (slots[i] == state) return false;
    if (slots[i] == 0) {
      if (full) return true;
      slots[i] = state;
      ++size;
      if (size >= max_states) full = true;
      else if (size * 2 > slots.size()) grow();
      return true;
    }
  }
}

bool StateCache::visit(uint64_t state, std::span<const uint64_t> sleep) {
  if (retired_.load(std::memory_order_relaxed)) return true;
  Shard& shard = shard_of(state);
  const auto lock = lock_if(shared_, shard.lock);
  const size_t before = shard.size;
  if (shard.insert(state, max_states_per_shard_)) {
    if (shard.size > before) {
      if (states_.fetch_add(1, std::memory_order_relaxed) + 1 == USELESS_AFTER && covered_.load(std::memory_order_relaxed) == 0) {
        retired_.store(true, std::memory_order_relaxed);
      }
      if (shard.full) full_.store(true, std::memory_order_relaxed);
      if (!sleep.empty()) shard.sleep.emplace(state, std::vector<uint64_t>(sleep.begin(), sleep.end()));
    }
    return true;
  }
  const bool over = !shared_ || shard.done[shard.find(state)];
  const auto it = shard.sleep.find(state);
  if (it == shard.sleep.end()) {
    if (over) {  // explored with nothing asleep: every step was
      covered_.fetch_add(1, std::memory_order_relaxed);
      return false;
    }
    if (!sleep.empty()) shard.sleep.emplace(state, std::vector<uint64_t>(sleep.begin(), sleep.end()));
    return true;
  }
  std::vector<uint64_t>& stored = it->second;
  if (over && std::includes(sleep.begin(), sleep.end(), stored.begin(), stored.end())) {
    covered_.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  // Explored again under `sleep`: what neither visit explored stays asleep for later visits.
  std::vector<uint64_t> both;
  std::set_intersection(stored.begin(), stored.end(), sleep.begin(), sleep.end(), std::back_inserter(both));
  if (both.empty()) shard.sleep.erase(it);
  else stored = std::move(both);
  return true;
}

size_t StateCache::Shard::find(uint64_t state) const {
  const size_t mask = slots.size() - 1;
  for (size_t i = static_cast<size_t>(state) & mask;; i = (i + 1) & mask) {
    if (slots[i] == state) return i;
    if (slots[i] == 0) return slots.size();
  }
}

void StateCache::add_future(uint64_t state, const Summary& future) {
  Shard& shard = shard_of(state);
  const auto lock = lock_if(shared_, shard.lock);
  const size_t i = shard.find(state);
  if (i == shard.slots.size()) return;  // not kept (the cache was full): never met again
  if (shared_) shard.done[i] = true;
  if (future.empty()) return;
  if (shard.futures.empty()) shard.futures.assign(shard.slots.size(), Summary{});
  shard.futures[i].merge(future);
}

Summary StateCache::future(uint64_t state) const {
  const Shard& shard = shard_of(state);
  const auto lock = lock_if(shared_, shard.lock);
  if (shard.futures.empty()) return {};
  const size_t i = shard.find(state);
  return i == shard.slots.size() ? Summary{} : shard.futures[i];
}

void StateCache::add_future(uint64_t state, const FutureSet& future) {
  Shard& shard = shard_of(state);
  const auto lock = lock_if(shared_, shard.lock);
  const size_t i = shard.find(state);
  if (i == shard.slots.size()) return;  // not kept
  if (shared_) shard.done[i] = true;
  if (future.empty()) return;
  FutureSet& kept = shard.future_sets[state];
  const size_t before = kept.touches.size();
  if (set_touches_.load(std::memory_order_relaxed) + future.touches.size() > MAX_SET_TOUCHES) {
    kept.add({}, true);  // every object: sound, prunes less
  } else {
    kept.merge(future);
  }
  set_touches_.fetch_add(kept.touches.size(), std::memory_order_relaxed);
  set_touches_.fetch_sub(before, std::memory_order_relaxed);
}

FutureSet StateCache::future_set(uint64_t state) const {
  const Shard& shard = shard_of(state);
  const auto lock = lock_if(shared_, shard.lock);
  const auto it = shard.future_sets.find(state);
  return it == shard.future_sets.end() ? FutureSet{} : it->second;
}

void StateCache::Shard::grow() {
  std::vector<uint64_t> old(slots.size() * 2, 0);
  old.swap(slots);
  std::vector<Summary> old_futures;
  if (!futures.empty()) {
    old_futures.assign(slots.size(), Summary{});
    old_futures.swap(futures);
  }
  std::vector<bool> old_done;
  const bool shared = !done.empty();
  if (shared) {
    old_done.assign(slots.size(), false);
    old_done.swap(done);
  }
  const size_t mask = slots.size() - 1;
  for (size_t j = 0; j < old.size(); ++j) {
    const uint64_t state = old[j];
    if (state == 0) continue;
    size_t i = static_cast<size_t>(state) & mask;
    while (slots[i] != 0) i = (i + 1) & mask;
    slots[i] = state;
    if (!old_futures.empty()) futures[i] = old_futures[j];
    if (shared) done[i] = old_done[j];
  }
}

}  // namespace lockstep::checker

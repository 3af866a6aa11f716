#include "checker/reduction/execution.h"

#include <algorithm>
#include <cassert>

namespace lockstep::checker {

bool footprints_conflict(std::span<const sim::Touch> a, std::span<const sim::Touch> b) {
  size_t i = 0;
  size_t j = 0;
  while (i < a.size() && j < b.size()) {
    if (a[i].object < b[j].object) {
      ++i;
    } else if (b[j].object < a[i].object) {
      ++j;
    } else {
      if (sim::conflicts(a[i].access, b[j].access)) return true;
      ++i;
      ++j;
    }
  }
  return false;
}

bool aborts_pending(std::span<const sim::Touch> footprint) {
  return std::any_of(footprint.begin(), footprint.end(), [](const sim::Touch& t) {
    return sim::object_kind(t.object) == sim::ObjectKind::PENDING && t.access == sim::Access::WRITE;
  });
}

Execution::ObjectLog& Execution::log_of(uint32_t object) {
  const size_t kind = static_cast<size_t>(sim::object_kind(object));
  const size_t index = object & ((uint32_t{1} << sim::OBJECT_KIND_SHIFT) - 1);
  if (objects_.size() <= kind) objects_.resize(kind + 1);
  std::vector<ObjectLog>& logs = objects_[kind];
  if (logs.size() <= index) logs.resize(index + 1);
  return logs[index];
}

void Execution::join(std::vector<uint32_t>& clock, size_t event) const {
  const Event& e = events_[event];
  if (clock.size() < e.clock_width) clock.resize(e.clock_width, 0);
  const uint32_t* other = clocks_.data() + e.clock_begin;
  for (uint32_t a = 0; a < e.clock_width; ++a) clock[a] = std::max(clock[a], other[a]);
}

bool Execution::caused_by(uint32_t cause, uint32_t e) const {
  const uint32_t actor = events_[e].option.actor;
  const uint32_t n = causes_[cause];
  for (uint32_t i = 0; i < n; ++i) {
    if (causes_[cause + 1 + 2 * i] == actor) return causes_[cause + 2 + 2 * i] >= e;
  }
  return false;
}

void Execution::push(const sim::Step& step) {
  assert(step.index == events_.size());
  const uint32_t j = static_cast<uint32_t>(events_.size());
  Event event;
  event.option = step.option;
  const uint32_t actor = step.option.actor;
  event.touch_begin = static_cast<uint32_t>(touches_.size());
  event.touch_count = static_cast<uint32_t>(step.footprint.size());
  event.cause_begin = static_cast<uint32_t>(causes_.size());
  for (sim::Touch touch : step.footprint) {
    if (touch.cause != 0) {
      const uint32_t n = step.clocks[touch.cause];
      const uint32_t copied = static_cast<uint32_t>(causes_.size());
      causes_.insert(causes_.end(), step.clocks.begin() + touch.cause, step.clocks.begin() + touch.cause + 1 + 2 * n);
      touch.cause = copied;
    }
    touches_.push_back(touch);
  }
  event.after_begin = static_cast<uint32_t>(afters_.size());
  event.after_count = static_cast<uint32_t>(step.after.size() / 2);
  afters_.insert(afters_.end(), step.after.begin(), step.after.end());
  event.aborts_pending = checker::aborts_pending(step.footprint);

  // Happens-before: the actor's previous event, what the engine says made it possible, and
  // the conflicting events before it, latest first. An earlier conflicting event that is not
  // already ordered before it by the others is a race.
  std::vector<uint32_t>& clock = scratch_clock_;
  clock.assign(static_cast<size_t>(actor) + 1, 0);
  if (actor >= last_of_actor_.size()) last_of_actor_.resize(static_cast<size_t>(actor) + 1, 0);
  event.previous_of_actor = last_of_actor_[actor];
  if (event.previous_of_actor != 0) join(clock, event.previous_of_actor - 1);
  for (size_t i = 0; i + 1 < step.after.size(); i += 2) {
    const uint32_t before = step.after[i + 1];
    if (before < j) join(clock, before);
  }
  candidates_.clear();
  const std::span<const sim::Touch> touches(touches_.data() + event.touch_begin, event.touch_count);
  for (const sim::Touch& touch : touches) {
    const ObjectLog& log = log_of(touch.object);
    // An event the touch's effect happened after is no race through it.
    auto consider = [&](uint32_t e) {
      if (touch.cause == 0 || !caused_by(touch.cause, e)) candidates_.push_back(e);
    };
    const uint32_t last_write = log.writes.empty() ? 0 : log.writes.back() + 1;  // 1 + index, 0: none
    if (last_write != 0) consider(last_write - 1);
    // Reads and adds since that write; those before it happen before it.
    if (touch.access != sim::Access::READ) {
      for (auto it = log.reads.rbegin(); it != log.reads.rend() && *it + 1 > last_write; ++it) consider(*it);
    }
    // On an object that counts what is available (sends that started, a rank's kernels that may
    // want a slot), an add before a read or a write is what made more available: taking it
    // first would only have left less to choose from, which the options explored after the add
    // already show (every sender a receive may take, every kernel a slot may go to). No race.
    const sim::ObjectKind kind = sim::object_kind(touch.object);
    const bool availability = kind == sim::ObjectKind::AVAIL || kind == sim::ObjectKind::SLOTS;
    if (touch.access != sim::Access::ADD && !availability) {
      for (auto it = log.adds.rbegin(); it != log.adds.rend() && *it + 1 > last_write; ++it) consider(*it);
    }
  }
  std::sort(candidates_.begin(), candidates_.end(), std::greater<>());
  candidates_.erase(std::unique(candidates_.begin(), candidates_.end()), candidates_.end());
  event.race_begin = static_cast<uint32_t>(races_.size());
  for (uint32_t e : candidates_) {
    const uint32_t other = events_[e].option.actor;
    const bool ordered = other < clock.size() && clock[other] > e;
    if (!ordered && other != actor) races_.push_back(e);
    if (!ordered) join(clock, e);
  }
  event.race_count = static_cast<uint32_t>(races_.size()) - event.race_begin;
  clock[actor] = j + 1;
  event.clock_begin = static_cast<uint32_t>(clocks_.size());
  event.clock_width = static_cast<uint32_t>(clock.size());
  clocks_.insert(clocks_.end(), clock.begin(), clock.end());

  for (const sim::Touch& touch : step.footprint) {
    ObjectLog& log = log_of(touch.object);
    switch (touch.access) {
      case sim::Access::WRITE: log.writes.push_back(j); break;
      case sim::Access::READ: log.reads.push_back(j); break;
      case sim::Access::ADD: log.adds.push_back(j); break;
    }
  }
  last_of_actor_[actor] = j + 1;
  events_.push_back(event);
}

void Execution::truncate(size_t n) {
  if (n >= events_.size()) return;
  for (size_t i = events_.size(); i-- > n;) {
    const Event& event = events_[i];
    for (const sim::Touch& touch : footprint(i)) {
      ObjectLog& log = log_of(touch.object);
      std::vector<uint32_t>& list = touch.access == sim::Access::WRITE ? log.writes
                                    : touch.access == sim::Access::READ ? log.reads
                                                                         : log.adds;
      assert(!list.empty() && list.back() == i);
      list.pop_back();
    }
    last_of_actor_[event.option.actor] = event.previous_of_actor;
  }
  const Event& first = events_[n];
  touches_.resize(first.touch_begin);
  causes_.resize(first.cause_begin);
  afters_.resize(first.after_begin);
  clocks_.resize(first.clock_begin);
  races_.resize(first.race_begin);
  events_.resize(n);
}

}  // namespace lockstep::checker

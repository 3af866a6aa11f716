// The steps of the current execution as the reduction sees them: each with its footprint and
// what the engine says it happened after, and happens-before computed from both (vector clocks
// over actors), with the races of each step (docs/semantics.md, "Exploration").
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "sim/strategy.h"

namespace lockstep::checker {

// Whether two footprints (each sorted by object, one entry per object) conflict.
bool footprints_conflict(std::span<const sim::Touch> a, std::span<const sim::Touch> b);

// A footprint ends a rank that issued kernels (a PENDING write: an exit or crash). What other
// steps do to its kernels depends on the state they run in (sim/strategy.h), so a footprint
// recorded in another state cannot tell whether a step commutes with it: the reduction treats
// it as conflicting with every step there (sleep sets, wakeup trees).
bool aborts_pending(std::span<const sim::Touch> footprint);

class Execution {
 public:
  struct Event {
    sim::Option option;
    uint32_t touch_begin = 0;
    uint32_t touch_count = 0;
    uint32_t cause_begin = 0;  // causes_ from here are its touches' (truncate)
    uint32_t after_begin = 0;
    uint32_t after_count = 0;
    uint32_t clock_begin = 0;  // clocks_[clock_begin, +clock_width): per actor, 1 + the index of
    uint32_t clock_width = 0;  // its latest event that happens before this one (or is it), 0: none
    uint32_t race_begin = 0;   // races_[race_begin, +race_count): the events it races with
    uint32_t race_count = 0;
    uint32_t previous_of_actor = 0;  // 1 + the index of its actor's event before it (0: none)
    bool aborts_pending = false;
  };

  size_t size() const { return events_.size(); }
  const Event& operator[](size_t i) const { return events_[i]; }
  std::span<const sim::Touch> footprint(size_t i) const {
    return {touches_.data() + events_[i].touch_begin, events_[i].touch_count};
  }
  // The engine's (actor, step) pairs (sim::Step::after).
  std::span<const uint32_t> after(size_t i) const {
    return {afters_.data() + events_[i].after_begin, 2 * size_t{events_[i].after_count}};
  }
  // The earlier events in a race with event j: dependent (conflicting footprints, different
  // actors), and not ordered by happens-before through anything else. Latest first.
  std::span<const uint32_t> races(size_t j) const {
    return {races_.data() + events_[j].race_begin, events_[j].race_count};
  }

  // Appends the next step (its index is size()).
  void push(const sim::Step& step);
  // Drops the events from index n on.
  void truncate(size_t n);
  // Whether event i happens before event j.
  bool happens_before(size_t i, size_t j) const {
    if (i >= j) return false;
    const Event& e = events_[j];
    const uint32_t actor = events_[i].option.actor;
    return actor < e.clock_width && clocks_[e.clock_begin + actor] > i;
  }

 private:
  // Accesses to one object in this execution, by kind (what a later access conflicts with):
  // the events that wrote it, and those that read or added since the last write.
  struct ObjectLog {
    std::vector<uint32_t> writes;
    std::vector<uint32_t> reads;
    std::vector<uint32_t> adds;
  };
  ObjectLog& log_of(uint32_t object);
  void join(std::vector<uint32_t>& clock, size_t event) const;
  // Whether a touch's cause (an offset into causes_) holds event e.
  bool caused_by(uint32_t cause, uint32_t e) const;

  std::vector<Event> events_;
  std::vector<sim::Touch> touches_;
  std::vector<uint32_t> afters_;
  std::vector<uint32_t> clocks_;
  std::vector<uint32_t> races_;
  // The causes of touches (sim::Touch::cause), copied: at an offset, n, then n (actor, index)
  // pairs; offset 0 is the empty one.
  std::vector<uint32_t> causes_ = {0};
  std::vector<uint32_t> last_of_actor_;  // per actor: 1 + the index of its latest event
  std::vector<std::vector<ObjectLog>> objects_;  // by object kind, then object index
  std::vector<uint32_t> scratch_clock_;
  std::vector<uint32_t> candidates_;
};

}  // namespace lockstep::checker

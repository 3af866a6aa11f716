// Schedules as data: the versioned schedule string of a counterexample, a strategy that
// records the options it is given, and one that replays a recorded schedule.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sim/strategy.h"

namespace lockstep::checker {

// "lockstep-schedule/2:" then one item per choice, comma-separated: a kind letter (T thread,
// M match, B branch, S start) and rank.thread.detail, e.g. "M0.0.2" (rank 0's wildcard takes
// rank 2's send on group 0).
std::string schedule_string(const std::vector<sim::Option>& choices);

// nullopt (and a message in `error`) when the string is not a schedule of this version.
std::optional<std::vector<sim::Option>> parse_schedule(std::string_view text, std::string& error);

// Passes every choice to another strategy and keeps the option it took.
class RecordingStrategy final : public sim::Strategy {
 public:
  explicit RecordingStrategy(sim::Strategy& inner) : inner_(inner) {}
  size_t choose(const sim::ChoicePoint& point) override;
  bool forced(const sim::Option& option) override { return inner_.forced(option); }
  void taken(const sim::Step& step) override { inner_.taken(step); }
  uint64_t resume_depth() const override { return inner_.resume_depth(); }
  bool revisits(uint64_t index) const override { return inner_.revisits(index); }
  bool wants_state() const override { return inner_.wants_state(); }
  // The choices are kept from one execution to the next up to the point it starts at (one per
  // choice point; 0: none).
  void resumed(uint64_t index, uint64_t steps) override {
    choices_.resize(index);
    inner_.resumed(index, steps);
  }
  const std::vector<sim::Option>& choices() const { return choices_; }

 private:
  sim::Strategy& inner_;
  std::vector<sim::Option> choices_;
};

// Takes, at each choice point, the option equal (kind, rank, thread, detail) to the next one
// recorded. When the recorded schedule runs out or no option matches, it takes the first
// option and remembers that it diverged.
class ReplayStrategy final : public sim::Strategy {
 public:
  explicit ReplayStrategy(std::vector<sim::Option> schedule) : schedule_(std::move(schedule)) {}
  size_t choose(const sim::ChoicePoint& point) override;
  bool diverged() const { return diverged_; }
  size_t used() const { return next_; }

 private:
  std::vector<sim::Option> schedule_;
  size_t next_ = 0;
  bool diverged_ = false;
};

}  // namespace lockstep::checker

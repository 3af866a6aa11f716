#include "checker/replay.h"

#include <charconv>

#include <fmt/format.h>

namespace lockstep::checker {

namespace {

constexpr std::string_view SCHEDULE_PREFIX = "lockstep-schedule/2:";

char kind_letter(sim::ChoiceKind kind) {
  switch (kind) {
    case sim::ChoiceKind::THREAD: return 'T';
    case sim::ChoiceKind::MATCH: return 'M';
    case sim::ChoiceKind::BRANCH: return 'B';
    case sim::ChoiceKind::START: return 'S';
  }
  return '?';
}

std::optional<sim::ChoiceKind> kind_of(char letter) {
  switch (letter) {
    case 'T': return sim::ChoiceKind::THREAD;
    case 'M': return sim::ChoiceKind::MATCH;
    case 'B': return sim::ChoiceKind::BRANCH;
    case 'S': return sim::ChoiceKind::START;
    default: return std::nullopt;
  }
}

bool same(const sim::Option& a, const sim::Option& b) {
  return a.kind == b.kind && a.rank == b.rank && a.thread == b.thread && a.detail == b.detail;
}

}  // namespace

std::string schedule_string(const std::vector<sim::Option>& choices) {
  std::string out(SCHEDULE_PREFIX);
  for (size_t i = 0; i < choices.size(); ++i) {
    const sim::Option& c = choices[i];
    out += fmt::format("{}{}{}.{}.{}", i ? "," : "", kind_letter(c.kind), c.rank, c.thread, c.detail);
  }
  return out;
}

std::optional<std::vector<sim::Option>> parse_schedule(std::string_view text, std::string& error) {
  if (text.substr(0, SCHEDULE_PREFIX.size()) != SCHEDULE_PREFIX) {
    // Version 1 took a `choose` in the middle of a step and stepped a rank's last thread
    // without a choice: its choice points are not this engine's.
    if (text.starts_with("lockstep-schedule/1:")) {
      error = "a schedule of an earlier lockstep (lockstep-schedule/1); check the scenario again for a counterexample of this version";
    } else {
      error = fmt::format("a schedule starts with '{}'", SCHEDULE_PREFIX);
    }
    return std::nullopt;
  }
  text.remove_prefix(SCHEDULE_PREFIX.size());
  std::vector<sim::Option> out;
  size_t item = 0;
  while (!text.empty()) {
    ++item;
    const size_t comma = text.find(',');
    std::string_view part = text.substr(0, comma);
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
    const std::optional<sim::ChoiceKind> kind = part.empty() ? std::nullopt : kind_of(part.front());
    if (!kind) {
      error = fmt::format("choice {} ('{}') does not start with T, M, B or S", item, part);
      return std::nullopt;
    }
    part.remove_prefix(1);
    int32_t numbers[3] = {0, 0, 0};
    for (int i = 0; i < 3; ++i) {
      const char* end = part.data() + part.size();
      const auto [ptr, ec] = std::from_chars(part.data(), end, numbers[i]);
      const bool last = i == 2;
      if (ec != std::errc() || (last ? ptr != end : (ptr == end || *ptr != '.'))) {
        error = fmt::format("choice {} is not KIND rank.thread.detail", item);
        return std::nullopt;
      }
      part = std::string_view(ptr + (last ? 0 : 1), static_cast<size_t>(end - ptr - (last ? 0 : 1)));
    }
    out.push_back(sim::Option{*kind, numbers[0], numbers[1], numbers[2], 0});
  }
  return out;
}

size_t RecordingStrategy::choose(const sim::ChoicePoint& point) {
  const size_t pick = inner_.choose(point);
  // PRUNE takes no option (reading options[PRUNE] read outside the array).
  if (pick != sim::Strategy::PRUNE) choices_.push_back(point.options[pick]);
  return pick;
}

size_t ReplayStrategy::choose(const sim::ChoicePoint& point) {
  if (next_ < schedule_.size()) {
    for (size_t i = 0; i < point.options.size(); ++i) {
      if (same(point.options[i], schedule_[next_])) {
        ++next_;
        return i;
      }
    }
  }
  diverged_ = true;
  return 0;
}

}  // namespace lockstep::checker

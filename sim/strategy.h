// The engine's one question to the outside world: at a choice point, which option?
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace lockstep::sim {

enum class ChoiceKind : uint8_t {
  THREAD,  // which host thread of a multi-threaded rank takes its next step
  MATCH,   // which pending send a wildcard receive takes
  BRANCH,  // which branch of a `choose`
  START,   // which ready communication kernel takes a free slot (comm_concurrency)
};

// One option at a choice point. Options are listed in a deterministic order.
struct Option {
  ChoiceKind kind = ChoiceKind::THREAD;
  int32_t rank = -1;      // the rank that acts (the receiver for MATCH)
  int32_t thread = -1;    // THREAD: thread index within the rank
  int32_t detail = -1;    // MATCH: the sending rank; BRANCH: the branch index; START: the op
  int64_t time_ns = 0;    // virtual time at which the option becomes possible (timed strategies)
  // THREAD: the rank has several threads and one of them can still exit or crash. Its step may
  // abort pending ops that another rank's step would otherwise complete first.
  bool may_abort = false;
  // START: the kernel named the same on every path to a state (its rank-local issue index; bit
  // 31: an NCCL group's, by its first op), where `detail` is its engine slot, which depends on
  // the order ranks issued in. Not part of schedules (replay follows one path).
  uint32_t name = 0;
};

// The independence relation of the engine's options, the ground of every reduction
// (docs/semantics.md, "Independence"): two options offered at one choice point are independent
// when taking them in either order reaches the same state and neither disables the other.
// Options of different ranks touch different ranks' threads, streams and counters (a wildcard
// match binds its own receive; a kernel start or thread step completes others' ops only as
// their own steps would, and virtual time is a max over causes, not the engine's order), so
// they are independent, except a step that may abort its rank. Same-rank options are treated
// as dependent. checker/independence_test.cc checks the relation by running both orders.
inline bool independent(const Option& a, const Option& b) {
  return a.rank != b.rank && !a.may_abort && !b.may_abort;
}

// What an event happens after (EngineOptions::lazy_points): for each rank listed, the latest of
// its steps taken at quiescence that the event follows, by its position among the choice
// points: 2i+1 for the choice at point i, 2i for a step that was the only option, taken after
// point i-1 and before point i. A rank not listed: none of its steps is known to come before.
// Every edge is real (docs/semantics.md, "Dynamic source sets").
struct Cause {
  std::span<const uint32_t> entries;  // rank, position, rank, position, ... by rank

  size_t size() const { return entries.size() / 2; }
  int32_t rank(size_t i) const { return static_cast<int32_t>(entries[2 * i]); }
  uint64_t position(size_t i) const { return entries[2 * i + 1]; }
  // Whether the event happens after `rank`'s step at choice point `index` (its own or any
  // later step of the rank: steps of one rank never commute).
  bool follows(int32_t rank, uint64_t index) const {
    for (size_t i = 0; i < size(); ++i) {
      if (this->rank(i) == rank) return position(i) >= 2 * index + 1;
      if (this->rank(i) > rank) break;
    }
    return false;
  }
};

struct ChoicePoint {
  std::span<const Option> options;  // at least two
  uint64_t index = 0;               // how many choice points came before this one
  // A fingerprint of the global state here (EngineOptions::track_state; 0 when off): equal
  // fingerprints mean equal states, so the same futures (docs/semantics.md, "State cache").
  uint64_t state = 0;
  // EngineOptions::lazy_points: every option is offered because no rank's options are a
  // persistent set, but this rank's options alone are one unless another rank's step gives it
  // a new option (Strategy::new_option). -1: no such rank (a step may abort its rank, or the
  // rank waits for a communication slot), or not asked for.
  int32_t lazy_rank = -1;
};

// Strategies (dfs, dpor, random, pct, replay, timed) implement this. The engine asks at every
// choice point and knows nothing about how the choice is made.
class Strategy {
 public:
  virtual ~Strategy() = default;
  // Returns an index into point.options, or PRUNE: end this execution here (its future was
  // already explored from an equal state); the engine then ends it as ExecutionEnd::PRUNED.
  virtual size_t choose(const ChoicePoint& point) = 0;
  // A choice point with one option is no choice: the engine takes it without asking, and tells
  // the strategy here (sleep sets must see every step taken between choice points that could
  // have been a choice). Returning false ends the execution as PRUNED (its future is covered).
  virtual bool forced(const Option& option) {
    (void)option;
    return true;
  }

  // EngineOptions::lazy_points: rank `rank` may have a new option — a send to it or a wildcard
  // receive of its own became matchable, or one of its threads woke (docs/semantics.md,
  // "Dynamic source sets"); `cause`: the steps the event that gave it happens after.
  virtual void new_option(int32_t rank, const Cause& cause) {
    (void)rank;
    (void)cause;
  }

  // Checkpoints (EngineOptions::checkpoints): the engine saves its state at choice points the
  // strategy will come back to, and starts an execution from the deepest saved point that the next
  // schedule shares with the last one, instead of from the initial state. How many choice points
  // the next execution takes as the last one did (0: none).
  virtual uint64_t resume_depth() const { return 0; }
  // Asked right after choose() returned an option at the point with this index: whether a later
  // execution may take another option here.
  virtual bool revisits(uint64_t index) const {
    (void)index;
    return false;
  }
  // The execution starts at the saved point with this index, which the engine asks again: the
  // choices before it are the last execution's.
  virtual void resumed(uint64_t index) { (void)index; }

  static constexpr size_t PRUNE = SIZE_MAX;
};

// Earliest virtual time first; ties to the first option. Drives `lockstep run`.
class TimedStrategy final : public Strategy {
 public:
  size_t choose(const ChoicePoint& point) override {
    size_t best = 0;
    for (size_t i = 1; i < point.options.size(); ++i) {
      if (point.options[i].time_ns < point.options[best].time_ns) best = i;
    }
    return best;
  }
};

}  // namespace lockstep::sim

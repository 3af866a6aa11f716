// The engine's one question to the outside world: at a choice point, which option? And, for the
// checker's reductions, what each step it took touched (its footprint) and what it happened after.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace lockstep::sim {

enum class ChoiceKind : uint8_t {
  THREAD,  // a host thread of a rank with several threads takes its next step
  MATCH,   // a wildcard receive takes a pending send of one sender
  BRANCH,  // a thread waiting at a `choose` takes one branch
  START,   // a ready communication kernel takes a free slot (comm_concurrency)
};

// One option at a choice point. Options are listed in a deterministic order.
//
// Every option is the next step of an *actor*, named by `actor`: a host thread (THREAD and
// BRANCH: the global thread index), the channel from one sender into a rank's wildcard
// receives on one group (MATCH), or a communication kernel (START). An actor's id is the same
// in every execution of one engine, and an actor has at most one step enabled at a time, except
// a thread at a `choose`, whose branches are alternatives of one step (BRANCH, `detail`).
struct Option {
  ChoiceKind kind = ChoiceKind::THREAD;
  int32_t rank = -1;      // the rank that acts (the receiver for MATCH)
  int32_t thread = -1;    // THREAD, BRANCH: thread index within the rank; MATCH: the group
  int32_t detail = -1;    // MATCH: the sending rank; BRANCH: the branch index; START: the engine's
                          // kernel slot (depends on the order ranks issued in; not an identity)
  int64_t time_ns = 0;    // virtual time at which the option becomes possible (timed strategies)
  // START: the kernel named the same on every path to a state (its thread and per-thread issue
  // index). Not part of schedules (replay follows one path).
  uint32_t name = 0;
  uint32_t actor = 0;

  // The same step on another path: its actor, and its branch for BRANCH.
  uint64_t key() const {
    return (static_cast<uint64_t>(actor) << 32) | (kind == ChoiceKind::BRANCH ? 1 + static_cast<uint32_t>(detail) : 0);
  }
};

// ---------------------------------------------------------------------------------------------
// Footprints (EngineOptions::footprints; docs/semantics.md, "Independence"). A step's footprint
// lists the objects it read and wrote: a rank's stream, a communicator's per-rank sequence
// counter, a p2p queue, a handle, a rank's liveness, ... Two steps of different actors are
// dependent when their footprints conflict; otherwise taking them in either order reaches the
// same state and neither disables the other (checker/independence_test.cc checks it).
//
// Objects are dense ids, the same in every execution of one engine; the kind is in the top
// bits (object_kind).

enum class ObjectKind : uint8_t {
  STREAM,        // a rank's stream: appends write it, chaining and `sync: S` read it
  STREAMS,       // all of a rank's streams: every stream write adds to it, `sync` reads it
  HANDLE,        // a rank's async handle: set by an async op, read by `wait`
  COLL_SEQ,      // a rank's collective counter on a communicator (which op is the k-th)
  SEND_SEQ,      // (group, src, dst): the order of src's sends to dst
  RECV_POST,     // (group, dst): the order of dst's receives
  RECV_MATCH,    // (group, dst): the head wildcard receive, taken by MATCH steps
  AVAIL,         // (group, dst): the sends to dst that have started (what a wildcard may take)
  NEW_GROUP_SEQ, // a rank's new_group counter
  CREATED,       // (rank, group): new_group has made the group usable on the rank
  AGREED_SEQ,    // (rank, group): a rank's agreed-choice counter on a group
  LAUNCH,        // a rank's communication launch order (comm_concurrency with launch_order_implicit)
  SLOTS,         // a rank's communication slots (comm_concurrency)
  ALIVE,         // whether a rank runs: read by every step of its actors, written by exit/crash
  // What an exit or crash ends (kept only when some rank may exit): it reads those of its
  // rank's kernels (two exits commute); a step that joins, pairs, starts or completes a kernel
  // adds to its object (and conflicts with the exit).
  SLOT,          // a collective's slot (communicator, k) or new_group's k-th
  PAIRS,         // (group, src, dst): the sends and receives between two ranks
  PENDING,       // a rank's other kernels; written by its exit or crash when it issued any: such
                 // a step's effect on other steps depends on the state they run in, so the
                 // checker takes it as dependent with every other in sleep sets and wakeup
                 // trees, where it compares steps recorded in other states
};

constexpr uint32_t OBJECT_KIND_SHIFT = 27;
inline ObjectKind object_kind(uint32_t object) { return static_cast<ObjectKind>(object >> OBJECT_KIND_SHIFT); }
// ALIVE and PENDING objects are numbered by their rank.
inline int32_t object_rank(uint32_t object) {
  return static_cast<int32_t>(object & ((uint32_t{1} << OBJECT_KIND_SHIFT) - 1));
}

// READ and READ commute, ADD and ADD commute (a commutative update: joining a collective slot,
// a send starting); every other pair conflicts.
enum class Access : uint8_t { READ = 1, ADD = 2, WRITE = 3 };

inline bool conflicts(Access a, Access b) { return a != b || a == Access::WRITE; }

struct Touch {
  uint32_t object = 0;
  Access access = Access::READ;
  // For a touch by what the step set off (not its own action): the steps that effect happened
  // after, as an offset into Step::clocks (0: none known). An earlier step among them is no race
  // of this one through this object: without it, this step would not have touched it.
  uint32_t cause = 0;
};

// Ranks whose programs are equal up to their rank numbers (EngineOptions::symmetry): a state
// and the states that rename such ranks among themselves have the same futures, renamed. The
// engine fingerprints a state as one canonical renaming of it (ChoicePoint::state) and renames
// what the checker compares across states: option keys and footprint objects.
class Symmetry {
 public:
  // The renaming of the state at the current choice point: per rank, its name (a rank of its
  // class); empty when it is the identity. inverse_names: per name, the rank it renames.
  virtual std::span<const uint32_t> names() = 0;
  virtual std::span<const uint32_t> inverse_names() = 0;
  // An option key (Option::key) as the current renaming names it.
  virtual uint64_t canonical_key(uint64_t key) = 0;
  // An object with each rank r in it replaced by names[r] (names empty: the object itself).
  virtual uint32_t rename_object(uint32_t object, std::span<const uint32_t> names) = 0;

 protected:
  ~Symmetry() = default;
};

// A step the engine took, reported once it and everything it set off (the rank progress, the
// eager steps of single-threaded ranks) are done, before the next choice point.
struct Step {
  Option option;
  uint64_t index = 0;  // its place among the execution's steps, from 0 (choices and lone options)
  // What it touched, sorted by object, one entry per object (the strongest access). Its own
  // action's objects, and of what followed it: sends that started (AVAIL), the unfinished
  // kernels of ranks that may exit (PENDING), a rank that exited or crashed (ALIVE, PENDING).
  std::span<const Touch> footprint;
  // What made it possible (happens-before through the engine: a thread's previous step, the
  // steps whose effects woke it, started the kernels a wildcard match pairs, made a kernel
  // ready): (actor, step index) pairs sorted by actor, the latest step of each. Conflicts are
  // not included: the checker derives them from footprints.
  std::span<const uint32_t> after;
  // The clocks Touch::cause points into: at an offset, n, then n (actor, step) pairs by actor.
  std::span<const uint32_t> clocks;
  Symmetry* symmetry = nullptr;  // set when some ranks are symmetric
};

struct ChoicePoint {
  std::span<const Option> options;  // at least two
  uint64_t index = 0;               // how many choice points came before this one
  // A fingerprint of the global state here (EngineOptions::track_state; 0 when off): equal
  // fingerprints mean equal states, so the same futures (docs/semantics.md, "State cache").
  // With symmetric ranks, equal up to a renaming of those ranks.
  uint64_t state = 0;
  Symmetry* symmetry = nullptr;  // set when some ranks are symmetric
};

// Strategies (dfs, dpor, random, pct, replay, timed) implement this. The engine asks at every
// choice point and knows nothing about how the choice is made.
class Strategy {
 public:
  virtual ~Strategy() = default;
  // Returns an index into point.options, or PRUNE: end this execution here (its future was
  // already explored from an equal state, or every option's is covered); the engine then ends
  // it as ExecutionEnd::PRUNED.
  virtual size_t choose(const ChoicePoint& point) = 0;
  // A choice point with one option is no choice: the engine takes it without asking, and tells
  // the strategy here. Returning false ends the execution as PRUNED (its future is covered).
  virtual bool forced(const Option& option) {
    (void)option;
    return true;
  }
  // EngineOptions::footprints: each step taken (a choice or a lone option), with what it touched
  // and what it happened after, once it and what it set off are done.
  virtual void taken(const Step& step) { (void)step; }

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
  // choices before it are the last execution's. The steps before it are the last execution's
  // first `steps`.
  virtual void resumed(uint64_t index, uint64_t steps) {
    (void)index;
    (void)steps;
  }
  // EngineOptions::track_state: whether the next choice points need the state's fingerprint
  // (ChoicePoint::state; 0 when not). A strategy whose state cache has stopped remembering
  // says no, and the engine skips the hashing.
  virtual bool wants_state() const { return true; }

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

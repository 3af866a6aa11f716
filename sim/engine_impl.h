// Engine::Impl: the engine of sim/engine.h, its state kept across executions and its
// member functions, each concern in a file of its own (listed below by section). Private to the
// engine: included by sim/engine*.cc only.
#pragma once

#include <algorithm>
#include <cassert>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>
#include <cstdio>

#include <fmt/format.h>

#include "sim/cost.h"
#include "sim/engine.h"
#include "sim/engine_state.h"
#include "sim/interpreter.h"

namespace lockstep::sim {

struct Engine::Impl : ExecState {
  const Scenario& sc;
  EngineOptions options;
  StackPool stacks;
  std::optional<Diagnostic> setup_error;  // a bound the engine cannot be built within (run() reports it)
  std::vector<std::vector<int32_t>> member_pos;  // per group: rank -> position in its comm, -1
  std::vector<uint32_t> comm_base;               // per group: id of its first communicator
  uint32_t comm_count = 0;
  // Stream and handle names, interned: ids are what streams, handles and state fingerprints
  // hold, so that no execution builds or hashes a string. Kept across executions.
  std::deque<std::string> names;                            // by id; stable addresses
  std::unordered_map<std::string_view, uint32_t> name_ids;  // views into `names`
  std::vector<uint32_t> group_stream_name;                  // per group: "comm:GROUP"
  std::unordered_map<uint64_t, uint32_t> pair_stream_names;  // p2p_key(group, a, b): "comm:G:p2p:a-b"

  Strategy* strategy = nullptr;
  std::vector<uint32_t> vclock_buf;  // scratch of the vector clocks' joins
  std::vector<std::unique_ptr<ProgramFiber>> fibers;  // by thread
  std::vector<std::string> thread_names;               // by thread
  std::vector<uint32_t> thread_stream_names;           // by thread: its current stream's name
  // Rank::running_comm is read only under comm_concurrency and by state fingerprints: kept only
  // then, so that completing a collective's kernels does not read every member's Rank.
  const bool count_comm;
  // Per rank: some thread of it can reach `exit` or `crash` (its unfinished kernels are then
  // objects of footprints: ObjectKind::PENDING).
  std::vector<bool> rank_may_exit;
  bool any_may_exit = false;
  bool has_wildcards = false;  // some program has `recv: {from: any}` (ObjectKind::AVAIL)
  // Footprints (EngineOptions::footprints): objects and actors by key, ids kept across executions.
  std::unordered_map<uint64_t, uint32_t> object_ids[16];  // by ObjectKind
  std::unordered_map<uint64_t, uint32_t> channel_actors;  // p2p_key(group, src, dst): MATCH
  std::unordered_map<uint64_t, uint32_t> kernel_actors;   // kernel_name: START
  uint32_t next_actor = 0;                                // after the threads
  // The step being taken: what it touches (direct: while its own action is applied; the rest
  // of the kinds while what it set off runs too) and what it happened after.
  std::vector<Touch> touches;
  bool direct = false;
  bool step_pending = false;
  Option step_option;
  uint32_t step_after = 0;  // a clock
  // The event log by level: null unless the log is on at that level or finer, so that each
  // hook in the engine costs one pointer test when logging is off.
  EventLog* log_warn = nullptr;
  EventLog* log_info = nullptr;
  EventLog* log_debug = nullptr;

  Impl(const Scenario& scenario, EngineOptions opts);

  // -------------------------------------------------------------------------------------------
  // Footprints (EngineOptions::footprints; sim/strategy.h).
  // Defined in sim/engine_footprints.cc; intern and find_name in sim/engine_streams.cc.
  uint32_t object(ObjectKind kind, uint64_t key);
  static uint64_t pack(uint64_t a, uint64_t b) { return (a << 32) | b; }

  // Touches by the step's own action (a thread's op, a match, a start), not by what it sets off.
  void touch(ObjectKind kind, uint64_t key, Access access) {
    if (direct) touches.push_back(Touch{object(kind, key), access});
  }
  // Touches by what a step sets off too (sends starting, kernels of ranks that may exit, exits).
  // `cause`: a clock of what the effect happened after (Touch::cause): a step in it is not a
  // race of this one through the object, since without it the effect would not be.
  void touch_always(ObjectKind kind, uint64_t key, Access access, uint32_t cause) {
    if (options.footprints && step_pending) touches.push_back(Touch{object(kind, key), access, cause});
  }
  void touch_stream(uint32_t r, uint32_t s, Access access) {
    if (!direct) return;
    touch(ObjectKind::STREAM, pack(r, ranks[r].streams[s].name), access);
    if (access != Access::READ) touch(ObjectKind::STREAMS, r, Access::ADD);
  }
  // What an exit or crash aborts, and what a step that joins, pairs, starts or completes a
  // kernel reads of it (only when some rank may exit): a collective's slot (communicator, k),
  // the sends from one rank to another on a group (their pairs), or a rank's other kernels.
  // Joining and pairing touch the slot or the pairs whether or not the peer has issued its op
  // yet: a step that ends the peer does not commute with them in either order.
  uint64_t slot_key(uint32_t comm, uint32_t seq) const { return pack(comm, seq); }
  void touch_kernel(uint32_t k) {
    if (!any_may_exit) return;
    const Kernel& kernel = kernels[k];
    const uint32_t cause = kernel_vclock(k);
    if (kernel.composite || kernel.index == NO_INDEX) return;  // its ops are touched one by one
    if (is_collective(kernel.op.kind)) {
      touch_always(ObjectKind::SLOT, slot_key(kernel.run.slot.comm, kernel.seq), Access::ADD, cause);
    } else if (kernel.op.kind == OpKind::NEW_GROUP) {
      touch_always(ObjectKind::SLOT, slot_key(UINT32_MAX, kernel.seq), Access::ADD, cause);
    } else if (is_p2p(kernel.op.kind) && (kernel.op.peer >= 0 || kernel.match >= 0)) {
      touch_always(ObjectKind::PAIRS, pair_key(k), Access::ADD, cause);
    } else if (rank_may_exit[kernel.rank]) {
      touch_always(ObjectKind::PENDING, kernel.rank, Access::ADD, cause);
    }
  }
  uint64_t pair_key(uint32_t k) const;
  // Under comm_concurrency (START steps), kernel k is issued, started or completed: what may
  // make another of its rank ready for a slot, which a START that takes the last slot disables.
  void touch_slots(uint32_t k) {
    if (sc.semantics.comm_concurrency > 0 && !sc.semantics.launch_order_implicit) {
      touch_always(ObjectKind::SLOTS, kernels[k].rank, Access::ADD, kernel_vclock(k));
    }
  }
  uint32_t channel_actor(uint32_t group, uint32_t src, uint32_t dst);
  uint32_t kernel_actor(uint32_t k);

  static constexpr uint32_t MAIN_NAME = 0;
  static constexpr uint32_t NO_NAME = UINT32_MAX;
  uint32_t intern(std::string_view name);
  uint32_t find_name(std::string_view name) const;

  RankGroup& rank_group(uint32_t r, uint32_t group) { return rank_groups[size_t{r} * sc.groups.size() + group]; }
  const RankGroup& rank_group(uint32_t r, uint32_t group) const {
    return rank_groups[size_t{r} * sc.groups.size() + group];
  }

  // A composite's first op (0 when it has none, as the field this replaces was).
  uint32_t first_child(uint32_t composite) const { return kernels[composite].child_count > 0 ? composite + 1 : 0; }

  // The i-th dependency of a kernel (Kernel::dep_begin).
  uint32_t dep(const Kernel& kernel, uint32_t i) const {
    return kernel.dep_count == 1 ? kernel.dep_begin : dep_pool[kernel.dep_begin + i];
  }

  uint32_t comm_id(uint32_t group, uint32_t rank) const {
    return comm_base[group] + static_cast<uint32_t>(sc.groups[group].comm_of_rank[rank]);
  }
  const std::vector<int32_t>& members(uint32_t group, uint32_t rank) const {
    return *sc.groups[group].comm_for(static_cast<int32_t>(rank));
  }
  bool alive(uint32_t r) const {
    return ranks[r].status != RankStatus::EXITED && ranks[r].status != RankStatus::CRASHED;
  }
  const Link& link_of(uint32_t group) const {
    if (group < sc.group_link.size() && sc.group_link[group]) return *sc.group_link[group];
    return sc.link;
  }

  // -------------------------------------------------------------------------------------------
  // Setup and the main loop.
  void reset();
  std::optional<Diagnostic> stack_mapping_problem(size_t guarded, size_t unguarded) const;

  ExecutionResult run(Strategy& chooser) {
    if (setup_error) {
      result = ExecutionResult{};
      result.end = ExecutionEnd::LIMIT;
      result.error = setup_error;
      result.rank_status.assign(static_cast<size_t>(sc.world), RankStatus::RUNNING);
      result.rank_end_ns.assign(static_cast<size_t>(sc.world), 0);
      result.ops.resize(options.record_ops ? static_cast<size_t>(sc.world) : 0);
      return std::move(result);
    }
    strategy = &chooser;
    const Checkpoint* from = options.checkpoints ? resume_point(strategy->resume_depth()) : nullptr;
    step_pending = false;
    if (from != nullptr) {
      restore(*from);
      strategy->resumed(from->index, steps);
      decide(from->fingerprint);
    } else {
      strategy->resumed(0, 0);
      reset();
      if (sc.launch.given && !run_init()) {
        if (options.log != nullptr) log_outcome();
        return std::move(result);
      }
      for (uint32_t t = 0; t < threads.size() && !stopped; ++t) {
        advance_fiber(t);
        schedule_thread(t);
      }
    }
    while (!stopped) {
      drain();
      report_step();  // what the last step set off is done
      if (stopped) break;
      if (!choose_and_apply()) break;
    }
    report_step();
    finish();
    if (options.log != nullptr) [[unlikely]] log_outcome();
    // Threads still suspended stay so until the next reset() (or the engine's end) cancels them.
    return std::move(result);
  }

  // Runs everything that needs no choice: eager thread steps and kernel progress.
  void drain() {
    while (!stopped && (!ready.empty() || !dirty_ranks.empty())) {
      while (!dirty_ranks.empty() && !stopped) {
        prefetch_progress(dirty_ranks);
        const uint32_t r = dirty_ranks.pop_front();
        dirty_flag[r] = false;
        progress_rank(r);
      }
      if (!ready.empty() && !stopped) {
        const uint32_t t = ready.pop_front();
        // A burst: step the thread until it blocks or ends.
        while (!stopped && threads[t].state == ThreadState::RUNNABLE && is_eager(t)) step_thread(t);
      }
    }
  }

  // After a collective over thousands of ranks completes, progress visits each of them in turn,
  // and what it reads of each (its Rank's first line, the kernels at and after the heads of its
  // streams) lies at scattered addresses: at 16,384 ranks none of it is still in the cache. So
  // the queue is read ahead and those lines are prefetched in three steps, each reading only
  // what the one before fetched a few ranks earlier, so that the misses of several ranks
  // overlap. A hint only: what the engine does is unchanged.
  static constexpr size_t PREFETCH_STEP = 3;  // ranks between two steps

  // A kernel's first line: all that starting and completing a compute kernel or a collective
  // read (Kernel).
  void prefetch_kernel(uint32_t k) const { prefetch(&kernels[k]); }

  void prefetch_progress(const Fifo& queue) const {
    if (const uint32_t r = queue.peek(3 * PREFETCH_STEP); r != NO_RANK) prefetch(&ranks[r]);
    if (const uint32_t r = queue.peek(2 * PREFETCH_STEP); r != NO_RANK) {
      const Rank& rank = ranks[r];
      const uint32_t inline_count = std::min(rank.stream_count, Rank::INLINE_STREAMS);
      for (uint32_t s = 0; s < inline_count; ++s) {
        if (rank.heads[s].head != NO_INDEX) prefetch_kernel(rank.heads[s].head);
      }
      if (rank.stream_count > Rank::INLINE_STREAMS) {
        const char* first = reinterpret_cast<const char*>(rank.more_heads.data());
        const char* end = reinterpret_cast<const char*>(rank.more_heads.data() + rank.more_heads.size());
        for (const char* line = first; line < end; line += 64) prefetch(line);
      }
    }
    if (const uint32_t r = queue.peek(PREFETCH_STEP); r != NO_RANK) {
      // The head's successor (the head is often done) and first dependency.
      const Rank& rank = ranks[r];
      for (uint32_t s = 0; s < rank.stream_count; ++s) {
        const uint32_t k = rank.head(s).head;
        if (k == NO_INDEX) continue;
        if (s >= Rank::INLINE_STREAMS) prefetch_kernel(k);
        const Kernel& head = kernels[k];
        if (head.next != NO_INDEX) prefetch_kernel(head.next);
        if (head.dep_count != 0) prefetch(&kernels[dep(head, 0)]);
      }
    }
  }

  // A thread steps without a choice when it is its rank's only thread. (The threads of a rank
  // with several stay actors to their end, each step a choice, even when the others have ended:
  // a step that made the last other thread's end turn the rest into eager steps would take them
  // into its own footprint and order them against everything they touch.)
  bool is_eager(uint32_t t) const { return ranks[threads[t].rank].threads.size() == 1; }

  void schedule_thread(uint32_t t) {
    if (threads[t].state == ThreadState::RUNNABLE && is_eager(t)) ready.push_back(t);
  }

  void mark_dirty(uint32_t r) {
    if (r == progressing) return;  // progress_rank loops until nothing changes
    if (!dirty_flag[r]) {
      dirty_flag[r] = true;
      dirty_ranks.push_back(r);
    }
  }

  // The strategy's pick, or Strategy::PRUNE (the execution is then stopped as PRUNED). `state`: the
  // state's fingerprint, 0 when not tracked.
  size_t ask(std::vector<Option>& opts, uint64_t state) {
    // One option is no choice (not counted, no schedule entry), but the strategy hears of it.
    const bool lone = opts.size() == 1;
    const size_t pick = lone ? (strategy->forced(opts[0]) ? 0 : Strategy::PRUNE)
                             : strategy->choose(ChoicePoint{opts, result.choice_points, state});
    if (pick == Strategy::PRUNE) {
      result.end = ExecutionEnd::PRUNED;
      stopped = true;
      return pick;
    }
    assert(pick < opts.size());
    if (!lone) {
      if (options.checkpoints && strategy->revisits(result.choice_points)) save_checkpoint(state);
      ++result.choice_points;
    }
    return pick;
  }

  // -------------------------------------------------------------------------------------------
  // Checkpoints (EngineOptions::checkpoints, docs/engine-performance.md): the state at a quiescent
  // choice point the strategy will come back to, taken just before the pick is applied. An
  // execution whose schedule shares the first `resume_depth` choices with the last one starts from
  // the deepest checkpoint within them and asks its point again. Valid checkpoints form a chain
  // along the last execution's path, by index; those past the shared prefix are dropped when an
  // execution starts.
  // Defined in sim/engine_checkpoints.cc.

  struct Checkpoint {
    uint64_t index = 0;  // result.choice_points at the point
    uint64_t fingerprint = 0;
    size_t bytes = 0;
    ExecState state;
    std::vector<ProgramFiber::Snapshot> programs;  // by thread
  };
  std::vector<Checkpoint> checkpoints;  // slots, reused: [0, checkpoint_count) are valid
  size_t checkpoint_count = 0;
  size_t checkpoint_bytes = 0;  // of the valid ones
  size_t state_bytes() const;
  void save_checkpoint(uint64_t fingerprint);
  const Checkpoint* resume_point(uint64_t depth);
  void restore(const Checkpoint& cp);

  // -------------------------------------------------------------------------------------------
  // Vector clocks (ExecState::vclocks), kept only under footprints.
  // Defined in sim/engine_footprints.cc.

  static constexpr size_t MAX_VCLOCK_WORDS = size_t{1} << 24;  // 64 MiB; past it, joins forget

  uint32_t kernel_vclock(uint32_t k) const { return k < kernel_vclocks.size() ? kernel_vclocks[k] : 0; }
  void set_kernel_vclock(uint32_t k, uint32_t vclock) {
    if (k >= kernel_vclocks.size()) {
      if (vclock == 0) return;
      kernel_vclocks.resize(k + 1, 0);
    }
    kernel_vclocks[k] = vclock;
  }
  std::span<const uint32_t> vclock_pairs(uint32_t vclock) const;
  uint32_t vclock_make(uint32_t same);
  void vclock_merge(uint32_t a, std::span<const uint32_t> pairs);
  uint32_t vclock_join(uint32_t a, uint32_t b);
  void join_vclocks(const std::vector<int32_t>& members);
  uint32_t vclock_with(uint32_t vclock, uint32_t actor, uint64_t step);
  uint32_t start_vclock(uint32_t k);

  // -------------------------------------------------------------------------------------------
  // Choice points and steps.

  // At quiescence: every option, then the strategy's pick. The engine offers them all; which
  // need exploring is the strategy's business (checker/reduction/).
  bool choose_and_apply() {
    options_buf.clear();
    for (uint32_t t = 0; t < threads.size(); ++t) {
      const Thread& thread = threads[t];
      if (thread.state == ThreadState::RUNNABLE && !is_eager(t)) {
        options_buf.push_back(Option{ChoiceKind::THREAD, static_cast<int32_t>(thread.rank),
                                     static_cast<int32_t>(thread.local), static_cast<int32_t>(t), thread.clock_ns, 0, t});
      } else if (thread.state == ThreadState::CHOOSING) {
        const uint32_t count = static_cast<uint32_t>(fibers[t]->choose_stmt().branches.size());
        for (uint32_t b = 0; b < count; ++b) {
          options_buf.push_back(Option{ChoiceKind::BRANCH, static_cast<int32_t>(thread.rank),
                                       static_cast<int32_t>(thread.local), static_cast<int32_t>(b), thread.clock_ns, 0, t});
        }
      }
    }
    collect_wildcard_options();
    collect_start_options();
    if (options_buf.empty()) return false;
    // Collected mostly in order already (threads by rank, then wildcard matches, then starts).
    const auto before = [](const Option& a, const Option& b) {
      return std::tie(a.rank, a.kind, a.thread, a.detail) < std::tie(b.rank, b.kind, b.thread, b.detail);
    };
    if (!std::is_sorted(options_buf.begin(), options_buf.end(), before)) {
      std::sort(options_buf.begin(), options_buf.end(), before);
    }
    return decide(options.track_state && options_buf.size() > 1 ? state_fingerprint() : 0);
  }

  // Asks the strategy at the quiescent point whose options are options_buf, and applies its pick:
  // the execution's next step.
  bool decide(uint64_t fingerprint) {
    const size_t pick = ask(options_buf, fingerprint);
    if (pick == Strategy::PRUNE) return false;
    const Option chosen = options_buf[pick];
    const uint32_t r = static_cast<uint32_t>(chosen.rank);
    const uint64_t step = steps++;
    if (options.footprints) {
      step_pending = true;
      step_option = chosen;
      touches.clear();
      direct = true;
      touch(ObjectKind::ALIVE, r, Access::READ);
    }
    switch (chosen.kind) {
      case ChoiceKind::THREAD: {
        const uint32_t t = static_cast<uint32_t>(chosen.detail);
        if (options.footprints) {
          step_after = threads[t].vclock;
          threads[t].vclock = vclock_with(threads[t].vclock, chosen.actor, step);
        }
        step_thread(t);
        break;
      }
      case ChoiceKind::BRANCH: {
        const uint32_t t = chosen.actor;  // a thread's actor is its index
        if (options.footprints) {
          step_after = threads[t].vclock;
          threads[t].vclock = vclock_with(threads[t].vclock, chosen.actor, step);
        }
        take_branch(t, static_cast<uint32_t>(chosen.detail));
        break;
      }
      case ChoiceKind::MATCH: apply_wildcard(chosen, step); break;
      case ChoiceKind::START: {
        const uint32_t k = static_cast<uint32_t>(chosen.detail);
        if (options.footprints) {
          touch(ObjectKind::SLOTS, r, Access::WRITE);
          step_after = vclock_join(start_vclock(k), ranks[r].slot_vclock);
          set_kernel_vclock(k, vclock_with(step_after, chosen.actor, step));
        }
        start_kernel(k);
        break;
      }
    }
    direct = false;
    return true;
  }

  // Tells the strategy of the step just taken, once what it set off is done (run()).
  void report_step() {
    if (!step_pending) return;
    step_pending = false;
    // One entry per object, the strongest access: sort by object, merge runs.
    std::sort(touches.begin(), touches.end(), [](const Touch& a, const Touch& b) { return a.object < b.object; });
    size_t out = 0;
    for (size_t i = 0; i < touches.size(); ++i) {
      if (out > 0 && touches[out - 1].object == touches[i].object) {
        Touch& merged = touches[out - 1];
        if (merged.access != touches[i].access) merged.access = Access::WRITE;  // READ+ADD conflicts with both
        // A race through the object is ruled out only when every touch of it had the cause.
        if (merged.cause != touches[i].cause) merged.cause = 0;
      } else {
        touches[out++] = touches[i];
      }
    }
    touches.resize(out);
    strategy->taken(Step{step_option, steps - 1, touches, vclock_pairs(step_after), vclocks});
  }

  // -------------------------------------------------------------------------------------------
  // State fingerprints (EngineOptions::track_state): a hash of everything that decides the
  // future of the execution, taken at quiescent choice points, for the checker's state cache.
  // It must never give two states with different futures the same value; it may give two
  // equivalent states different values (that only prunes less). Kernels are named by what
  // issued them (rank, issue index), never by their slot in `kernels` (an artefact of the
  // global interleaving); a reference to a finished kernel is its end time, which is all that
  // a later start, wait or clock reads from it.
  // Defined in sim/engine_checkpoints.cc.

  struct Hasher {
    uint64_t h = 0x6c6f636b73746570ULL;
    void add(uint64_t v) { h = mix(h ^ v); }
    void add_signed(int64_t v) { add(static_cast<uint64_t>(v)); }
  };
  uint64_t kernel_name(uint32_t k) const;
  uint64_t kernel_ref(uint32_t k) const;
  void hash_live_kernel(uint32_t k, Hasher& out) const;
  uint64_t hash_kernel(uint32_t k) const;
  uint64_t live_kernel_hash(uint32_t k);
  uint64_t state_fingerprint();

  // -------------------------------------------------------------------------------------------
  // Host threads.

  // Resumes the thread's program to its next action. A `choose` is a step of its own: the thread
  // waits at it (CHOOSING) and the engine offers its branches at the next choice point, unless
  // there is nothing to choose (one branch, or an agreed choice another member already made).
  void advance_fiber(uint32_t t) {
    ProgramFiber& fiber = *fibers[t];
    threads[t].position = mix(threads[t].position + 1);
    fiber.advance();
    while (!stopped && fiber.state() == ProgramFiber::State::READY && fiber.action() == ProgramFiber::Action::CHOOSE) {
      if (!reach_choose(t)) return;
      fiber.advance();
    }
    switch (fiber.state()) {
      case ProgramFiber::State::READY:
        break;
      case ProgramFiber::State::FINISHED:
        end_thread(t);
        break;
      case ProgramFiber::State::FAILED:
        stop_with_error(ExecutionEnd::ERROR, fiber.failure());
        break;
      case ProgramFiber::State::NOT_STARTED:
        assert(false);
        break;
    }
  }

  void stop_with_error(ExecutionEnd end, Diagnostic diagnostic) {
    result.end = end;
    result.error = std::move(diagnostic);
    stopped = true;
  }

  // Virtual time is int64 nanoseconds: a time past it (a rank busy for more than 292 years) is
  // an error of the scenario at the op that reaches it, never a wrapped or clamped time that
  // would change the verdict. TIME_OVERFLOW marks such a time until the execution stops.
  static constexpr int64_t TIME_OVERFLOW = INT64_MAX;
  static int64_t time_after(int64_t start_ns, int64_t duration_ns) {
    int64_t end_ns = 0;
    if (__builtin_add_overflow(start_ns, duration_ns, &end_ns) || end_ns == TIME_OVERFLOW) return TIME_OVERFLOW;
    return end_ns;
  }
  void time_overflow(const OpInstance& op, uint32_t rank) {
    if (stopped) return;
    runtime_error(op, fmt::format("virtual time of rank {} overflows: {} ends past 2^63 ns (292 years)", rank,
                                  op_kind_name(op.kind)));
  }

  void runtime_error(const OpInstance& op, std::string message) {
    stop_with_error(ExecutionEnd::ERROR,
                    Diagnostic{sc.path, op.stmt ? op.stmt->loc : SourceLoc{}, Severity::ERROR, std::move(message)});
  }

  // The thread's program is at a `choose`. Per rank, a BRANCH step picks; with `agreed: G`, the
  // first member of the rank's communicator to reach its k-th agreed choice picks for all of
  // them. Returns whether the branch is taken now (the program goes on); false when the thread
  // waits for a BRANCH step (CHOOSING) or the execution stopped.
  bool reach_choose(uint32_t t) {
    Thread& thread = threads[t];
    const Stmt& stmt = fibers[t]->choose_stmt();
    const uint32_t count = static_cast<uint32_t>(stmt.branches.size());
    uint64_t key = NO_KEY;
    if (stmt.agreed) {
      if (sc.groups[stmt.group].comm_for(static_cast<int32_t>(thread.rank)) == nullptr) {
        stop_with_error(ExecutionEnd::ERROR, Diagnostic{sc.path, stmt.loc, Severity::ERROR,
                                                        fmt::format("rank {} reaches a choice agreed on group '{}' but is "
                                                                    "not a member of it", thread.rank, sc.groups[stmt.group].name)});
        return false;
      }
      // Which agreed choice is this thread's k-th (also when its program reaches it after a wake).
      touch_always(ObjectKind::AGREED_SEQ, pack(thread.rank, stmt.group), Access::WRITE, thread.vclock);
      key = (static_cast<uint64_t>(comm_id(stmt.group, thread.rank)) << 32) | rank_group(thread.rank, stmt.group).agreed_seq++;
      // Another member's pick is this rank's too: no step (the members' arrivals commute).
      if (auto it = agreed_branch.find(key); it != agreed_branch.end()) return apply_branch(t, it->second, key);
    }
    if (count <= 1) return apply_branch(t, 0, key);
    thread.state = ThreadState::CHOOSING;
    thread.choose_key = key;
    return false;
  }

  // Takes branch `branch` of the `choose` the thread's program is at (its program then goes on
  // with advance()). False when the execution stopped (an agreed choice whose branches differ).
  bool apply_branch(uint32_t t, uint32_t branch, uint64_t key) {
    Thread& thread = threads[t];
    const Stmt& stmt = fibers[t]->choose_stmt();
    const uint32_t count = static_cast<uint32_t>(stmt.branches.size());
    if (key != NO_KEY) agreed_branch.emplace(key, branch);  // kept when another member made it
    if (branch >= count) {
      stop_with_error(ExecutionEnd::ERROR, Diagnostic{sc.path, stmt.loc, Severity::ERROR,
                                                      fmt::format("agreed choice #{} on group '{}' has {} branches on rank {} "
                                                                  "but another member took branch {}",
                                                                  key & 0xffffffffu, sc.groups[stmt.group].name, count, thread.rank, branch + 1)});
      return false;
    }
    ++result.events;
    fibers[t]->set_branch(branch);
    thread.position = mix(thread.position ^ (0xb7a2c4ULL + branch));
    thread.state = ThreadState::RUNNABLE;
    thread.choose_key = NO_KEY;
    return true;
  }

  // A BRANCH step: the thread takes the branch and its program goes on; at an agreed choice, the
  // other members waiting at the same one take it too.
  void take_branch(uint32_t t, uint32_t branch) {
    const uint64_t key = threads[t].choose_key;
    if (!apply_branch(t, branch, key)) return;
    continue_thread(t);
    if (key == NO_KEY) return;
    for (uint32_t u = 0; u < threads.size() && !stopped; ++u) {
      if (threads[u].state != ThreadState::CHOOSING || threads[u].choose_key != key) continue;
      if (apply_branch(u, branch, key)) continue_thread(u);
    }
  }

  void continue_thread(uint32_t t) {
    advance_fiber(t);
    schedule_thread(t);
  }

  // The thread's program ended. Its GPU work goes on (a Python thread's end does not wait for
  // the device); the rank finishes once every thread has ended and all its work is done.
  void end_thread(uint32_t t) {
    Thread& thread = threads[t];
    thread.state = ThreadState::DONE;
    Rank& rank = ranks[thread.rank];
    rank.end_ns = std::max(rank.end_ns, thread.clock_ns);
    if (--rank.live_threads > 0) return;
    // The process waits for its GPU work before it exits: the last kernel of every stream.
    rank.ending = true;
    rank.last_thread = t;
    rank.end_waits.clear();
    for (uint32_t s = 0; s < rank.streams.size(); ++s) {
      const uint32_t k = rank.streams[s].last;
      if (k != NO_INDEX) {
        rank.end_waits.push_back(k);
        kernels[k].waited = true;
      }
    }
    check_rank_end(thread.rank);
  }

  // An ending rank whose GPU work is done has finished.
  void check_rank_end(uint32_t r) {
    Rank& rank = ranks[r];
    if (!rank.ending) return;
    int64_t end = rank.end_ns;
    for (uint32_t k : rank.end_waits) {
      if (kernels[k].state != KernelState::DONE) return;
      end = std::max(end, kernels[k].end_ns);
    }
    rank.ending = false;
    rank.end_waits.clear();
    rank.end_ns = end;
    rank.status = RankStatus::FINISHED;
    if (log_info != nullptr && log_info->wants(r)) [[unlikely]] {
      log_info->begin_line(rank.end_ns, r, thread_names[rank.last_thread]) += "finished";
      log_info->end_line();
    }
  }

  // Blocks the thread until the current tail of one stream (or of every stream) is done.
  void wait_for_streams(uint32_t t, uint32_t only) {
    Thread& thread = threads[t];
    const Rank& rank = ranks[thread.rank];
    thread.waits.clear();
    for (uint32_t s = 0; s < rank.streams.size(); ++s) {
      if ((only == NO_STREAM || only == s) && rank.streams[s].last != NO_INDEX) {
        thread.waits.push_back(rank.streams[s].last);
      }
    }
    block_thread(t);
  }

  // The caller advances the thread's program if it is RUNNABLE afterwards.
  void block_thread(uint32_t t) {
    threads[t].state = ThreadState::BLOCKED;
    for (uint32_t k : threads[t].waits) kernels[k].waited = true;
    wake_if_done(t);
  }

  // A blocked thread whose waits are all done becomes RUNNABLE.
  bool wake_if_done(uint32_t t) {
    Thread& thread = threads[t];
    if (thread.state != ThreadState::BLOCKED) return false;
    for (uint32_t k : thread.waits) {
      if (kernels[k].state != KernelState::DONE) return false;
      thread.clock_ns = std::max(thread.clock_ns, kernels[k].end_ns);
    }
    if (options.footprints) {
      for (uint32_t k : thread.waits) thread.vclock = vclock_join(thread.vclock, kernel_vclock(k));
    }
    thread.waits.clear();
    thread.state = ThreadState::RUNNABLE;
    return true;
  }

  // Applies the thread's pending action, then advances its program unless it blocked.
  void step_thread(uint32_t t) {
    const ProgramFiber& fiber = *fibers[t];
    assert(threads[t].state == ThreadState::RUNNABLE && fiber.state() == ProgramFiber::State::READY);
    if (fiber.action() == ProgramFiber::Action::NCCL_GROUP) {
      issue_nccl_group(t, fiber.group_ops());
    } else {
      apply_op(t, fiber.pending());
    }
    if (!stopped && threads[t].state == ThreadState::RUNNABLE) advance_fiber(t);
  }

  bool count_op() {
    if (++ops_issued > options.limits.max_ops) [[unlikely]] {
      stop_with_error(ExecutionEnd::LIMIT,
                      Diagnostic{sc.path, {}, Severity::ERROR,
                                 fmt::format("execution exceeds the limit of {} operations (raise it with --max-ops)",
                                             options.limits.max_ops)});
      return false;
    }
    if ((ops_issued & (EngineOptions::BOUND_CHECK_OPS - 1)) == 0) [[unlikely]] return within_bounds();
    return true;
  }

  // The time and memory bounds, checked every BOUND_CHECK_OPS issued ops (a clock read, and a
  // read of /proc/self/statm every 16th time): an execution that grows without end (a loop of
  // 10^8 collectives) stops at the bound instead of running past it.
  bool within_bounds() {
    if (options.deadline && std::chrono::steady_clock::now() >= *options.deadline) {
      stop_with_error(ExecutionEnd::LIMIT,
                      Diagnostic{sc.path, {}, Severity::ERROR,
                                 fmt::format("the time budget ran out inside an execution, after {} operations (raise "
                                             "it with --time-budget)", ops_issued)});
      return false;
    }
    if (options.max_resident_bytes > 0 && (ops_issued & (16 * EngineOptions::BOUND_CHECK_OPS - 1)) == 0) {
      const uint64_t resident = resident_bytes();
      if (resident > options.max_resident_bytes) {
        stop_with_error(ExecutionEnd::LIMIT,
                        Diagnostic{sc.path, {}, Severity::ERROR,
                                   fmt::format("resident memory {} MiB passed the bound of {} MiB inside an execution, "
                                               "after {} operations (raise it with --max-memory)",
                                               resident >> 20, options.max_resident_bytes >> 20, ops_issued)});
        return false;
      }
    }
    return true;
  }

  void apply_op(uint32_t t, const OpInstance& op) {
    if (!count_op()) return;
    ++result.events;
    Thread& thread = threads[t];
    Rank& rank = ranks[thread.rank];
    switch (op.kind) {
      case OpKind::SLEEP: {
        const uint32_t k = new_kernel(t, op);
        thread.clock_ns = time_after(thread.clock_ns, op.duration_ns);
        if (thread.clock_ns == TIME_OVERFLOW) [[unlikely]] time_overflow(op, thread.rank);
        finish_host_op(k, thread.clock_ns);
        return;
      }
      case OpKind::WAIT: {
        const uint32_t* handle = find_named(rank.handles, find_name(op.stmt->handle));
        if (handle == nullptr) {
          touch(ObjectKind::HANDLE, pack(thread.rank, intern(op.stmt->handle)), Access::READ);
          runtime_error(op, fmt::format("rank {} waits for handle '{}' before any op set it", thread.rank, op.stmt->handle));
          return;
        }
        // work.wait(): the thread's current stream waits for the op; the host does not.
        const uint32_t c = current_stream(t);
        touch(ObjectKind::HANDLE, pack(thread.rank, intern(op.stmt->handle)), Access::READ);
        touch_stream(thread.rank, c, Access::WRITE);
        add_wait(rank.streams[c].pending_waits, *handle);
        finish_host_op(new_kernel(t, op), thread.clock_ns);
        return;
      }
      case OpKind::SYNC: {
        uint32_t only = NO_STREAM;
        if (op.stmt->stream.empty()) touch(ObjectKind::STREAMS, thread.rank, Access::READ);
        else touch(ObjectKind::STREAM, pack(thread.rank, intern(op.stmt->stream)), Access::READ);
        if (!op.stmt->stream.empty()) {
          const uint32_t* named = find_stream(rank, find_name(op.stmt->stream));
          if (named == nullptr) {  // a stream never used: nothing to wait for
            finish_host_op(new_kernel(t, op), thread.clock_ns);
            return;
          }
          only = *named;
        }
        finish_host_op(new_kernel(t, op), thread.clock_ns);
        wait_for_streams(t, only);
        return;
      }
      case OpKind::NEW_GROUP:
        issue_new_group(t, op);
        return;
      case OpKind::EXIT:
      case OpKind::CRASH:
        finish_host_op(new_kernel(t, op), thread.clock_ns);
        terminate_rank(thread.rank, op.kind == OpKind::EXIT ? RankStatus::EXITED : RankStatus::CRASHED, thread.clock_ns,
                       thread.vclock);
        return;
      case OpKind::COMPUTE: {
        const uint32_t k = new_kernel(t, op);
        const uint32_t s = op.stmt && !op.stmt->stream.empty() ? named_stream(rank, intern(op.stmt->stream)) : current_stream(t);
        touch_stream(thread.rank, s, Access::WRITE);
        enqueue(thread.rank, s, k);
        mark_dirty(thread.rank);
        return;
      }
      default:
        break;
    }
    // Collectives and point to point.
    if (!usable_group(thread.rank, op)) return;
    const uint32_t k = new_kernel(t, op);
    kernels[k].comm = true;
    const uint32_t s = comm_stream(thread.rank, op);
    const bool async = op.stmt && !op.stmt->handle.empty();
    touch_link(thread.rank, s, current_stream(t), async);
    link_synchronous(thread.rank, s, current_stream(t), k, async);
    if (async) {
      const uint32_t name = intern(op.stmt->handle);
      touch(ObjectKind::HANDLE, pack(thread.rank, name), Access::WRITE);
      if (uint32_t* handle = find_named(rank.handles, name)) *handle = k;
      else rank.handles.emplace_back(name, k);
    }
    if (sc.semantics.comm_concurrency > 0) launch(thread.rank, k);
    if (is_collective(op.kind)) {
      issue_collective(k);
    } else {
      issue_p2p(k);
    }
    if (stopped) return;
    mark_dirty(thread.rank);
    if (op.kind == OpKind::BARRIER) {
      thread.waits.assign(1, k);
      block_thread(t);
    }
  }

  // What linking a communication op on stream s to the current stream c touches (link_synchronous).
  void touch_link(uint32_t r, uint32_t s, uint32_t c, bool async) {
    touch_stream(r, s, Access::WRITE);
    if (s != c) touch_stream(r, c, async ? Access::READ : Access::WRITE);
  }

  // A communication kernel joins the rank's launch order (comm_concurrency).
  void launch(uint32_t r, uint32_t k) {
    if (sc.semantics.launch_order_implicit) touch(ObjectKind::LAUNCH, r, Access::WRITE);
    ranks[r].launch_order.push_back(k);
    touch_slots(k);
  }

  bool usable_group(uint32_t r, const OpInstance& op) {
    const GroupDef& group = sc.groups[op.group];
    if (group.from_new_group) touch(ObjectKind::CREATED, pack(r, op.group), Access::READ);
    if (group.from_new_group && !rank_group(r, op.group).created) {
      runtime_error(op, fmt::format("rank {} uses group '{}' before its new_group created it", r, group.name));
      return false;
    }
    return true;
  }

  uint32_t new_kernel(uint32_t t, const OpInstance& op) {
    Thread& thread = threads[t];
    Rank& rank = ranks[thread.rank];
    const uint32_t k = static_cast<uint32_t>(kernels.size());
    Kernel& kernel = kernels.emplace_back();
    kernel.rank = thread.rank;
    kernel.thread = t;
    kernel.index = rank.issued++;
    if (kernel_local.size() < k) kernel_local.resize(k, 0);  // composites' (never read)
    kernel_local.push_back(thread.issued++);
    kernel.op = op;
    kernel.kind = op.kind;
    if (op.kind == OpKind::COMPUTE) kernel.run.duration_ns = op.duration_ns;
    kernel.issue_ns = thread.clock_ns;
    if (thread.vclock != 0) set_kernel_vclock(k, thread.vclock);
    track_live(k);
    // Communication ops and new_group are logged once their sequence number is known.
    if (log_info != nullptr) [[unlikely]] {
      if (!is_communication(op.kind) && op.kind != OpKind::NEW_GROUP) log_issue(k);
    }
    return k;
  }

  void finish_host_op(uint32_t k, int64_t end_ns) {
    Kernel& kernel = kernels[k];
    kernel.state = KernelState::DONE;
    kernel.start_ns = kernel.issue_ns;
    kernel.end_ns = end_ns;
    on_done(k);
    if (log_debug != nullptr) [[unlikely]] log_kernel(k, "done", kernel.end_ns);
  }

  // The bookkeeping of state fingerprints (track_state): a new kernel is live...
  void track_live(uint32_t k) {
    if (!options.track_state) return;
    if (k >= kernel_hashes.size()) {
      kernel_hashes.resize(k + 1);
      live_pos.resize(k + 1);
    }
    live_pos[k] = static_cast<uint32_t>(live_kernels.size());
    live_kernels.push_back(k);
    kernel_hashes[k].valid = false;
  }

  // ...until it is done (kernels never leave DONE). A done kernel that ran past the watchdog
  // stays in the state, and a done slot member counts towards its slot's completion.
  void on_done(uint32_t k) {
    if (!options.track_state) return;
    const uint32_t last = live_kernels.back();
    live_kernels[live_pos[k]] = last;
    live_pos[last] = live_pos[k];
    live_kernels.pop_back();
    const Kernel& kernel = kernels[k];
    if (kernel.index == NO_INDEX) return;
    if (is_communication(kernel.op.kind) && kernel.end_ns - kernel.start_ns > sc.semantics.timeout_ns) {
      timed_out.push_back(k);
    }
    if (is_collective(kernel.op.kind)) {
      ++comms[comm_id(kernel.op.group, kernel.rank)].slots[kernel.seq - 1].done;
    } else if (kernel.op.kind == OpKind::NEW_GROUP) {
      ++new_group_calls.slots[kernel.seq - 1].done;
    }
  }

  // -------------------------------------------------------------------------------------------
  // Streams.
  // Defined in sim/engine_streams.cc.

  // By name id (NO_NAME: a name never interned, so found nowhere).
  template <typename Pairs>
  static auto find_named(Pairs& pairs, uint32_t name) -> decltype(&pairs.front().second) {
    for (auto& [key, value] : pairs) {
      if (key == name) return &value;
    }
    return nullptr;
  }

  static const uint32_t* find_stream(const Rank& rank, uint32_t name) {
    static constexpr uint32_t MAIN = MAIN_STREAM;
    if (name == MAIN_NAME) return &MAIN;
    return find_named(rank.named_streams, name);
  }
  uint32_t add_stream(Rank& rank, uint32_t name);
  uint32_t named_stream(Rank& rank, uint32_t name);
  uint32_t pair_stream_name(uint32_t group, uint32_t a, uint32_t b);
  uint32_t comm_stream(uint32_t r, const OpInstance& op);
  void enqueue(uint32_t r, uint32_t s, uint32_t k);
  void link_synchronous(uint32_t r, uint32_t s, uint32_t c, uint32_t k, bool async);
  uint32_t current_stream(uint32_t t);
  void add_wait(WaitList& waits, uint32_t k);

  // -------------------------------------------------------------------------------------------
  // Collectives, NCCL groups, new_group.
  // Defined in sim/engine_collectives.cc.
  void issue_collective(uint32_t k);
  void join_slot(Comm& comm, uint32_t seq, size_t size, size_t position, uint32_t k);
  MismatchInfo slot_mismatch(uint32_t id, uint32_t seq) const;
  std::string p2p_difference(uint32_t send, uint32_t recv) const;
  void report_mismatches();
  static std::string collective_difference(const OpInstance& a, const OpInstance& b);
  MismatchInfo mismatch_of(const std::string& field, uint32_t a, uint32_t b) const;
  void issue_nccl_group(uint32_t t, const std::vector<OpInstance>& ops);
  void issue_new_group(uint32_t t, const OpInstance& op);

  // -------------------------------------------------------------------------------------------
  // Point to point.
  // Defined in sim/engine_p2p.cc.
  void issue_p2p(uint32_t k);
  void match_receives(uint32_t group, uint32_t dst);
  void pair_p2p(uint32_t send, uint32_t recv);
  void collect_wildcard_options();
  void apply_wildcard(const Option& option, uint64_t step);

  // -------------------------------------------------------------------------------------------
  // Kernel progress.

  // Starts what may start on the rank's streams, and wakes threads whose waits are done.
  void progress_rank(uint32_t r) {
    Rank& rank = ranks[r];
    if (!alive(r)) return;
    progressing = r;
    bool changed = true;
    while (changed && !stopped) {
      changed = false;
      for (uint32_t s = 0; s < rank.stream_count; ++s) {
        StreamHead& stream = rank.head(s);
        const uint32_t k = stream.head;
        if (k == NO_INDEX) continue;
        if (kernels[k].state == KernelState::DONE) {
          stream.before_head = k;
          stream.before_head_end_ns = kernels[k].end_ns;
          stream.head = kernels[k].next;
          changed = true;
          continue;
        }
        if (startable(k) && start_is_eager(r, k)) {
          start_kernel(k);
          changed = true;
        }
      }
    }
    progressing = NO_RANK;
    // Only a kernel becoming done can wake a blocked thread, and complete() sets `wake` when
    // one that a thread blocked on does: a wave reads no thread of a rank nothing woke.
    if (!rank.wake) return;
    rank.wake = false;
    for (uint32_t t : rank.threads) {
      if (wake_if_done(t)) {
        continue_thread(t);
        if (stopped) return;
      }
    }
    check_rank_end(r);
  }

  bool startable(uint32_t k) const {
    const Kernel& kernel = kernels[k];
    if (kernel.state != KernelState::QUEUED) return false;
    for (uint32_t i = 0; i < kernel.dep_count; ++i) {
      if (kernels[dep(kernel, i)].state != KernelState::DONE) return false;
    }
    return true;
  }

  // Under comm_concurrency, which ready communication kernel starts is a choice (CUDA does not
  // bind execution order across streams to launch order), unless launch_order_implicit.
  bool start_is_eager(uint32_t r, uint32_t k) const {
    const int64_t limit = sc.semantics.comm_concurrency;
    if (!kernels[k].comm || limit == 0) return true;
    const Rank& rank = ranks[r];
    if (rank.running_comm >= limit) return false;
    return sc.semantics.launch_order_implicit && rank.launch_order.front() == k;
  }

  void collect_start_options() {
    const int64_t limit = sc.semantics.comm_concurrency;
    if (limit == 0 || sc.semantics.launch_order_implicit) return;
    for (uint32_t r = 0; r < ranks.size(); ++r) {
      const Rank& rank = ranks[r];
      if (!alive(r) || rank.running_comm >= limit) continue;
      for (uint32_t s = 0; s < rank.stream_count; ++s) {
        const uint32_t k = rank.head(s).head;
        if (k == NO_INDEX) continue;
        if (kernels[k].comm && startable(k)) {
          options_buf.push_back(Option{ChoiceKind::START, static_cast<int32_t>(r), 0, static_cast<int32_t>(k),
                                       ready_time(k), static_cast<uint32_t>(kernel_name(k)), kernel_actor(k)});
        }
      }
    }
  }

  int64_t ready_time(uint32_t k, int32_t* cause = nullptr) const {
    const Kernel& kernel = kernels[k];
    const StreamHead& stream = ranks[kernel.rank].head(kernel.stream);
    int64_t start = kernel.issue_ns;
    int32_t by = -1;
    auto consider = [&](uint32_t other) {
      if (kernels[other].end_ns > start) {
        start = kernels[other].end_ns;
        by = static_cast<int32_t>(other);
      }
    };
    // The kernel heads its stream: the one before it on the stream is done.
    assert(stream.head == k);
    if (stream.before_head != NO_INDEX && stream.before_head_end_ns > start) {
      start = stream.before_head_end_ns;
      by = static_cast<int32_t>(stream.before_head);
    }
    for (uint32_t i = 0; i < kernel.dep_count; ++i) consider(dep(kernel, i));
    if (cause) *cause = by;
    return start;
  }

  void start_kernel(uint32_t k) {
    Kernel& kernel = kernels[k];
    Rank& rank = ranks[kernel.rank];
    kernel.start_ns = ready_time(k, &kernel.start_cause);
    kernel.state = KernelState::RUNNING;
    ++result.events;
    // Its start happens after the end of the kernel before it on its stream, and of its
    // dependencies.
    if (options.footprints) set_kernel_vclock(k, start_vclock(k));
    if (options.footprints) touch_kernel(k);
    touch_slots(k);
    if (kernel.comm) {
      if (count_comm) ++rank.running_comm;
      // launch_order is kept only under comm_concurrency: testing that first spares a wave the
      // Rank's second cache line.
      if (sc.semantics.comm_concurrency > 0 && !rank.launch_order.empty()) {
        const auto it = std::find(rank.launch_order.begin(), rank.launch_order.end(), k);
        if (it != rank.launch_order.end()) rank.launch_order.erase(it);
      }
    }
    if (kernel.has_children) {
      const uint32_t first = k + 1;
      const uint32_t count = kernel.child_count;
      for (uint32_t child = first; child < first + count; ++child) {
        kernels[child].start_ns = kernel.start_ns;
        kernels[child].start_cause = kernel.start_cause;
        kernels[child].state = KernelState::RUNNING;
        if (options.footprints) set_kernel_vclock(child, vclock_join(kernel_vclock(child), kernel_vclock(k)));
        if (log_debug != nullptr) [[unlikely]] log_kernel(child, "start", kernel.start_ns);
        on_running(child);
        if (stopped) return;
      }
      maybe_complete_group(k);
      return;
    }
    if (log_debug != nullptr) [[unlikely]] log_kernel(k, "start", kernel.start_ns);
    on_running(k);
    mark_dirty(kernel.rank);
  }

  void on_running(uint32_t k) {
    Kernel& kernel = kernels[k];
    if (kernel.kind == OpKind::COMPUTE) {
      complete(k, time_after(kernel.start_ns, kernel.run.duration_ns));
    } else if (is_collective(kernel.kind)) {
      const SlotRef ref = kernel.run.slot;
      CollSlot& slot = comms[ref.comm].slots[ref.seq - 1];
      // The latest start, and the lowest member position that has it (complete_collective).
      const int32_t position = member_pos[slot.group][kernel.rank];
      if (kernel.start_ns > slot.latest_start_ns ||
          (kernel.start_ns == slot.latest_start_ns && position < slot.latest_position)) {
        slot.latest_start_ns = kernel.start_ns;
        slot.latest_position = position;
      }
      if (++slot.running == slot.kernels.size() && !slot.mismatched) complete_collective(ref.comm, ref.seq);
    } else if (!kernel.has_children) {
      // A started send may now be taken by a wildcard receive (a MATCH step reads which have).
      if (kernel.kind == OpKind::SEND && has_wildcards) {
        touch_always(ObjectKind::AVAIL, p2p_key(kernel.op.group, 0, static_cast<uint32_t>(kernel.op.peer)), Access::ADD,
                     kernel_vclock(k));
      }
      try_complete_p2p(k);
    }
  }

  void complete(uint32_t k, int64_t end_ns) {
    Kernel& kernel = kernels[k];
    if (kernel.state == KernelState::DONE) return;
    if (end_ns == TIME_OVERFLOW) [[unlikely]] time_overflow(kernel.op, kernel.rank);
    kernel.state = KernelState::DONE;
    kernel.end_ns = end_ns;
    on_done(k);
    ++result.events;
    if (options.footprints) touch_kernel(k);
    touch_slots(k);
    if (log_debug != nullptr && !kernel.composite) [[unlikely]] log_kernel(k, "done", end_ns);
    if (!kernel.composite && is_communication(kernel.kind)) {
      longest_comm_ns = std::max(longest_comm_ns, end_ns - kernel.start_ns);
    }
    if (count_comm && kernel.comm && !kernel.in_group) {
      Rank& rank = ranks[kernel.rank];
      --rank.running_comm;
      if (options.footprints) rank.slot_vclock = vclock_join(rank.slot_vclock, kernel_vclock(k));
    }
    if (kernel.waited) ranks[kernel.rank].wake = true;
    if (kernel.in_group) maybe_complete_group(static_cast<uint32_t>(kernel.parent));
    mark_dirty(kernel.rank);
  }

  void maybe_complete_group(uint32_t composite) {
    const Kernel& group = kernels[composite];
    if (group.state != KernelState::RUNNING) return;
    int64_t end = group.start_ns;
    const uint32_t first = first_child(composite);
    for (uint32_t child = first; child < first + group.child_count; ++child) {
      if (kernels[child].state != KernelState::DONE) return;
      end = std::max(end, kernels[child].end_ns);
    }
    if (options.footprints) {
      uint32_t vclock = kernel_vclock(composite);
      for (uint32_t child = first; child < first + group.child_count; ++child) {
        vclock = vclock_join(vclock, kernel_vclock(child));
      }
      set_kernel_vclock(composite, vclock);
    }
    complete(composite, end);
  }

  // Every member's kernel runs: each ends at the latest start plus the collective's cost, its
  // end caused by the member that started last (the lowest position among equals). on_running
  // kept that latest start, so this is one pass over the members, not two: at 16,384 ranks the
  // members' kernels are no longer in the L2 cache after a first pass.
  void complete_collective(uint32_t comm, uint32_t seq) {
    CollSlot& slot = comms[comm].slots[seq - 1];
    const size_t size = slot.kernels.size();
    const int64_t start = slot.latest_start_ns;
    const int32_t last = slot.kernels[static_cast<size_t>(slot.latest_position)];
    const Kernel& any = kernels[static_cast<size_t>(slot.kernels[0])];
    const int64_t end = time_after(start, comm_cost_ns(any.op.kind, any.op.size_bytes, static_cast<int32_t>(size),
                                                       link_of(any.op.group), sc.semantics.allreduce_algorithm));
    // Members' kernels are prefetched a few ahead: on a large communicator they are scattered
    // lines no longer in the cache (prefetch_progress). Their Ranks are not read (count_comm).
    constexpr size_t AHEAD = 8;
    if (options.footprints) join_vclocks(slot.kernels);  // each end follows every start
    for (size_t i = 0; i < size; ++i) {
      if (i + AHEAD < size) prefetch(&kernels[static_cast<size_t>(slot.kernels[i + AHEAD])]);
      const int32_t k = slot.kernels[i];
      if (k != last) kernels[static_cast<size_t>(k)].end_cause = last;
      complete(static_cast<uint32_t>(k), end);
    }
  }

  // Completes a matched send/recv pair when the semantics allow.
  void try_complete_p2p(uint32_t k) {
    Kernel& kernel = kernels[k];
    if (kernel.match < 0) {
      if (kernel.op.kind == OpKind::SEND && kernel.state == KernelState::RUNNING && is_eager(kernel)) {
        complete(k, time_after(kernel.start_ns, p2p_cost(kernel)));
      }
      return;
    }
    const uint32_t send = kernel.op.kind == OpKind::SEND ? k : static_cast<uint32_t>(kernel.match);
    const uint32_t recv = kernel.op.kind == OpKind::SEND ? static_cast<uint32_t>(kernel.match) : k;
    if (!mismatched_sends.empty() && std::find(mismatched_sends.begin(), mismatched_sends.end(), send) !=
                                         mismatched_sends.end()) {
      return;  // a mismatched pair never completes
    }
    Kernel& s = kernels[send];
    Kernel& r = kernels[recv];
    const int64_t cost = p2p_cost(s);
    if (is_eager(s)) {
      if (s.state == KernelState::RUNNING) complete(send, time_after(s.start_ns, cost));
      if (r.state == KernelState::RUNNING && s.start_ns >= 0 && s.state != KernelState::ABORTED) {
        // The receive's end happens after the send (an eager send's end, not after the receive).
        if (options.footprints) set_kernel_vclock(recv, vclock_join(kernel_vclock(recv), kernel_vclock(send)));
        complete(recv, std::max(r.start_ns, time_after(s.start_ns, cost)));
      }
      return;
    }
    if (s.state == KernelState::RUNNING && r.state == KernelState::RUNNING) {
      if (options.footprints) {
        const uint32_t vclock = vclock_join(kernel_vclock(send), kernel_vclock(recv));
        set_kernel_vclock(send, vclock);
        set_kernel_vclock(recv, vclock);
      }
      const int64_t end = time_after(std::max(s.start_ns, r.start_ns), cost);
      if (s.start_ns > r.start_ns) r.end_cause = static_cast<int32_t>(send);
      if (r.start_ns > s.start_ns) s.end_cause = static_cast<int32_t>(recv);
      complete(send, end);
      complete(recv, end);
    }
  }

  int64_t p2p_cost(const Kernel& send) const {
    return comm_cost_ns(OpKind::SEND, send.op.size_bytes, 2, link_of(send.op.group), sc.semantics.allreduce_algorithm);
  }

  bool is_eager(const Kernel& send) const {
    return sc.semantics.sends_eagerly(send.op.size_bytes);
  }

  // exit / crash: the process is gone. Its threads stop; its unfinished kernels never finish,
  // and a collective it had joined can no longer complete.
  void terminate_rank(uint32_t r, RankStatus status, int64_t at_ns, uint32_t cause) {
    Rank& rank = ranks[r];
    touch_always(ObjectKind::ALIVE, r, Access::WRITE, cause);
    if (options.footprints && step_pending) {
      // Its kernels: a step that completes one before it, and one that finds it aborted after
      // it, do not commute with it, in whichever order they ran (so whether or not it aborted
      // any here). PENDING marks that it ended a rank with kernels (sim::ObjectKind).
      if (rank.issued > 0) touch_always(ObjectKind::PENDING, r, Access::WRITE, cause);
      for (uint32_t k = 0; k < kernels.size(); ++k) {
        const Kernel& kernel = kernels[k];
        if (kernel.rank != r || kernel.index == NO_INDEX) continue;
        // READ: two exits commute (each ends only its own kernels), an exit and a join (ADD) do not.
        if (is_collective(kernel.op.kind)) {
          touch_always(ObjectKind::SLOT, slot_key(kernel.run.slot.comm, kernel.seq), Access::READ, cause);
        } else if (kernel.op.kind == OpKind::NEW_GROUP) {
          touch_always(ObjectKind::SLOT, slot_key(UINT32_MAX, kernel.seq), Access::READ, cause);
        } else if (is_p2p(kernel.op.kind) && (kernel.op.peer >= 0 || kernel.match >= 0)) {
          touch_always(ObjectKind::PAIRS, pair_key(k), Access::READ, cause);
        }
      }
      // It disables every match its wildcard receives could still make: a send starting to
      // it (which would have made one possible) does not commute with it.
      for (const P2pQueue& receives : recv_queue) {
        if ((receives.key & P2P_RANK_MASK) != r) continue;
        if (std::any_of(receives.begin(), receives.end(), [&](uint32_t k) { return kernels[k].op.peer < 0; })) {
          touch_always(ObjectKind::AVAIL, receives.key, Access::WRITE, cause);
        }
      }
    }
    rank.status = status;
    rank.ending = false;
    rank.end_waits.clear();
    rank.end_ns = at_ns;
    rank.live_threads = 0;
    if (log_warn != nullptr && log_warn->wants(r)) [[unlikely]] {
      log_warn->begin_line(at_ns, r, rank.threads.empty() ? "main" : thread_names[rank.threads[0]]) +=
          status == RankStatus::EXITED ? "exited" : "crashed";
      log_warn->end_line();
    }
    for (uint32_t t : rank.threads) threads[t].state = ThreadState::DONE;
    for (size_t k = 0; k < kernels.size(); ++k) {
      Kernel& kernel = kernels[k];
      if (kernel.rank != r || kernel.state == KernelState::DONE) continue;
      if (kernel.state == KernelState::RUNNING && is_collective(kernel.op.kind) && kernel.index != NO_INDEX &&
          kernel.op.kind != OpKind::NEW_GROUP) {
        --comms[comm_id(kernel.op.group, r)].slots[kernel.seq - 1].running;
      }
      if (kernel.state == KernelState::RUNNING && kernel.op.kind == OpKind::NEW_GROUP) {
        --new_group_calls.slots[kernel.seq - 1].running;
      }
      kernel.state = KernelState::ABORTED;
    }
  }

  // -------------------------------------------------------------------------------------------
  // Initialisation (`launch:`; docs/semantics.md, "Initialisation"). Deterministic and before
  // any program: every process calls init_process_group, a blocking rendezvous over the world.
  // A process whose rank is outside its own world size raises and never joins (NCCL:
  // "Invalid rank requested"); the others check in with the process of rank 0 (the TCPStore
  // master and NCCL bootstrap root), which rejects a different world size, backend or init
  // method and a rank that already checked in (NCCL: "mismatch in rank count", "rank R of N
  // ranks has already checked in") — a `mismatch`; a rank no process joins as leaves everyone
  // waiting — a `hang`. Returns whether the programs may run.
  // Defined in sim/engine_launch.cc.
  OpRecord init_record(uint32_t p) const;
  std::string thread_name_of(uint32_t r) const;
  bool run_init();
  bool end_init(const std::vector<uint32_t>& joined, bool ok);

  // -------------------------------------------------------------------------------------------
  // The event log (EngineOptions::log; docs/logging.md).
  // Defined in sim/engine_log.cc.
  static void append_ms(std::string& out, int64_t ns);
  void describe(std::string& out, const Kernel& kernel) const;
  std::string_view stream_name(const Kernel& kernel) const;
  static bool is_sync_point(OpKind kind);
  void log_issue(uint32_t k);
  void log_kernel(uint32_t k, std::string_view what, int64_t at_ns);
  void log_slot_matched(const CollSlot& slot);
  void log_outcome();

  // -------------------------------------------------------------------------------------------
  // The end of an execution.
  // Defined in sim/engine_result.cc.
  OpRecord record_of(uint32_t k) const;
  void finish();
  void find_timeouts();
  void sort_stuck();
  void queued_behind(uint32_t k, StuckOp& stuck) const;
  void explain_wait(const Kernel& kernel, StuckOp& stuck) const;
};

}  // namespace lockstep::sim

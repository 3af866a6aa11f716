// The engine's public entry points (Engine, resident_bytes, the names of statuses) and one
// execution's main loop: running what needs no choice, collecting the options of a choice
// point, asking the strategy and applying its pick. The rest of Engine::Impl is in the
// sim/engine_*.cc files that sim/engine_impl.h lists.
#include "sim/engine.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cassert>
#include <cstdio>
#include <tuple>
#include <utility>

#include "sim/engine_impl.h"

namespace lockstep::sim {

std::string_view rank_status_name(RankStatus status) {
  switch (status) {
    case RankStatus::RUNNING: return "running";
    case RankStatus::BLOCKED: return "blocked";
    case RankStatus::FINISHED: return "finished";
    case RankStatus::EXITED: return "exited";
    case RankStatus::CRASHED: return "crashed";
    case RankStatus::NOT_STARTED: return "not started";
  }
  return "?";
}

uint64_t resident_bytes() {
  // statm: "total resident shared ..." in pages.
  char text[128];
  const int fd = ::open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  const ssize_t got = ::read(fd, text, sizeof text - 1);
  ::close(fd);
  if (got <= 0) return 0;
  text[got] = '\0';
  unsigned long long total = 0, resident = 0;
  if (std::sscanf(text, "%llu %llu", &total, &resident) != 2) return 0;
  return resident * static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
}

std::string_view kernel_state_name(KernelState state) {
  switch (state) {
    case KernelState::QUEUED: return "queued";
    case KernelState::RUNNING: return "running";
    case KernelState::DONE: return "done";
    case KernelState::ABORTED: return "aborted";
  }
  return "?";
}

ExecutionResult Engine::Impl::run(Strategy& chooser) {
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
void Engine::Impl::drain() {
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

void Engine::Impl::prefetch_progress(const Fifo& queue) const {
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

// The strategy's pick, or Strategy::PRUNE (the execution is then stopped as PRUNED). `state`: the
// state's fingerprint, 0 when not tracked.
size_t Engine::Impl::ask(std::vector<Option>& opts, uint64_t state) {
  // One option is no choice (not counted, no schedule entry), but the strategy hears of it.
  const bool lone = opts.size() == 1;
  const size_t pick = lone ? (strategy->forced(opts[0]) ? 0 : Strategy::PRUNE)
                           : strategy->choose(ChoicePoint{opts, result.choice_points, state, symmetry()});
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

// At quiescence: every option, then the strategy's pick. The engine offers them all; which
// need exploring is the strategy's business (checker/reduction/).
bool Engine::Impl::choose_and_apply() {
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
  return decide(options.track_state && options_buf.size() > 1 && strategy->wants_state() ? state_fingerprint() : 0);
}

// Asks the strategy at the quiescent point whose options are options_buf, and applies its pick:
// the execution's next step.
bool Engine::Impl::decide(uint64_t fingerprint) {
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
void Engine::Impl::report_step() {
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
  strategy->taken(Step{step_option, steps - 1, touches, vclock_pairs(step_after), vclocks, symmetry()});
}

Engine::Engine(const Scenario& scenario, EngineOptions options)
    : impl_(std::make_unique<Impl>(scenario, options)) {}

const std::vector<std::vector<uint32_t>>& Engine::rank_classes() const { return impl_->rank_classes; }
const std::string& Engine::symmetry_note() const { return impl_->symmetry_note; }

Engine::~Engine() = default;

ExecutionResult Engine::run(Strategy& strategy) { return impl_->run(strategy); }

}  // namespace lockstep::sim

// Host threads: stepping a thread's program, choices in it, blocking and waking, the bounds
// checked as ops are issued, and applying each op it issues.
#include "sim/engine_impl.h"

#include <chrono>

#include <fmt/format.h>

namespace lockstep::sim {

// Resumes the thread's program to its next action. A `choose` is a step of its own: the thread
// waits at it (CHOOSING) and the engine offers its branches at the next choice point, unless
// there is nothing to choose (one branch, or an agreed choice another member already made).
void Engine::Impl::advance_fiber(uint32_t t) {
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

void Engine::Impl::stop_with_error(ExecutionEnd end, Diagnostic diagnostic) {
  result.end = end;
  result.error = std::move(diagnostic);
  stopped = true;
}

void Engine::Impl::time_overflow(const OpInstance& op, uint32_t rank) {
  if (stopped) return;
  runtime_error(op, fmt::format("virtual time of rank {} overflows: {} ends past 2^63 ns (292 years)", rank,
                                op_kind_name(op.kind)));
}

void Engine::Impl::runtime_error(const OpInstance& op, std::string message) {
  stop_with_error(ExecutionEnd::ERROR,
                  Diagnostic{sc.path, op.stmt ? op.stmt->loc : SourceLoc{}, Severity::ERROR, std::move(message)});
}

// The thread's program is at a `choose`. Per rank, a BRANCH step picks; with `agreed: G`, the
// first member of the rank's communicator to reach its k-th agreed choice picks for all of
// them. Returns whether the branch is taken now (the program goes on); false when the thread
// waits for a BRANCH step (CHOOSING) or the execution stopped.
bool Engine::Impl::reach_choose(uint32_t t) {
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
bool Engine::Impl::apply_branch(uint32_t t, uint32_t branch, uint64_t key) {
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
void Engine::Impl::take_branch(uint32_t t, uint32_t branch) {
  const uint64_t key = threads[t].choose_key;
  if (!apply_branch(t, branch, key)) return;
  continue_thread(t);
  if (key == NO_KEY) return;
  for (uint32_t u = 0; u < threads.size() && !stopped; ++u) {
    if (threads[u].state != ThreadState::CHOOSING || threads[u].choose_key != key) continue;
    if (apply_branch(u, branch, key)) continue_thread(u);
  }
}

void Engine::Impl::continue_thread(uint32_t t) {
  advance_fiber(t);
  schedule_thread(t);
}

// The thread's program ended. Its GPU work goes on (a Python thread's end does not wait for
// the device); the rank finishes once every thread has ended and all its work is done.
void Engine::Impl::end_thread(uint32_t t) {
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
void Engine::Impl::check_rank_end(uint32_t r) {
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
void Engine::Impl::wait_for_streams(uint32_t t, uint32_t only) {
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
void Engine::Impl::block_thread(uint32_t t) {
  threads[t].state = ThreadState::BLOCKED;
  for (uint32_t k : threads[t].waits) kernels[k].waited = true;
  wake_if_done(t);
}

// A blocked thread whose waits are all done becomes RUNNABLE.
bool Engine::Impl::wake_if_done(uint32_t t) {
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
void Engine::Impl::step_thread(uint32_t t) {
  const ProgramFiber& fiber = *fibers[t];
  assert(threads[t].state == ThreadState::RUNNABLE && fiber.state() == ProgramFiber::State::READY);
  if (fiber.action() == ProgramFiber::Action::NCCL_GROUP) {
    issue_nccl_group(t, fiber.group_ops());
  } else {
    apply_op(t, fiber.pending());
  }
  if (!stopped && threads[t].state == ThreadState::RUNNABLE) advance_fiber(t);
}

bool Engine::Impl::count_op() {
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
bool Engine::Impl::within_bounds() {
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

void Engine::Impl::apply_op(uint32_t t, const OpInstance& op) {
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
        touch(ObjectKind::HANDLE, pack(thread.rank, footprint_name(intern(op.stmt->handle))), Access::READ);
        runtime_error(op, fmt::format("rank {} waits for handle '{}' before any op set it", thread.rank, op.stmt->handle));
        return;
      }
      // work.wait(): the thread's current stream waits for the op; the host does not.
      const uint32_t c = current_stream(t);
      touch(ObjectKind::HANDLE, pack(thread.rank, footprint_name(intern(op.stmt->handle))), Access::READ);
      touch_stream(thread.rank, c, Access::WRITE);
      add_wait(rank.streams[c].pending_waits, *handle);
      finish_host_op(new_kernel(t, op), thread.clock_ns);
      return;
    }
    case OpKind::SYNC: {
      uint32_t only = NO_STREAM;
      if (op.stmt->stream.empty()) touch(ObjectKind::STREAMS, thread.rank, Access::READ);
      else touch(ObjectKind::STREAM, pack(thread.rank, footprint_name(intern(op.stmt->stream))), Access::READ);
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
    touch(ObjectKind::HANDLE, pack(thread.rank, footprint_name(name)), Access::WRITE);
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
void Engine::Impl::touch_link(uint32_t r, uint32_t s, uint32_t c, bool async) {
  touch_stream(r, s, Access::WRITE);
  if (s != c) touch_stream(r, c, async ? Access::READ : Access::WRITE);
}

// A communication kernel joins the rank's launch order (comm_concurrency).
void Engine::Impl::launch(uint32_t r, uint32_t k) {
  if (sc.semantics.launch_order_implicit) touch(ObjectKind::LAUNCH, r, Access::WRITE);
  ranks[r].launch_order.push_back(k);
  touch_slots(k);
}

bool Engine::Impl::usable_group(uint32_t r, const OpInstance& op) {
  const GroupDef& group = sc.groups[op.group];
  if (group.from_new_group) touch(ObjectKind::CREATED, pack(r, op.group), Access::READ);
  if (group.from_new_group && !rank_group(r, op.group).created) {
    runtime_error(op, fmt::format("rank {} uses group '{}' before its new_group created it", r, group.name));
    return false;
  }
  return true;
}

uint32_t Engine::Impl::new_kernel(uint32_t t, const OpInstance& op) {
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
  if (has_splits(op.kind)) kernel.op.duration_ns = keep_splits(fibers[t]->splits(op));
  kernel.issue_ns = thread.clock_ns;
  if (thread.vclock != 0) set_kernel_vclock(k, thread.vclock);
  track_live(k);
  // Communication ops and new_group are logged once their sequence number is known.
  if (log_info != nullptr) [[unlikely]] {
    if (!is_communication(op.kind) && op.kind != OpKind::NEW_GROUP) log_issue(k);
  }
  return k;
}

void Engine::Impl::finish_host_op(uint32_t k, int64_t end_ns) {
  Kernel& kernel = kernels[k];
  kernel.state = KernelState::DONE;
  kernel.start_ns = kernel.issue_ns;
  kernel.end_ns = end_ns;
  on_done(k);
  if (log_debug != nullptr) [[unlikely]] log_kernel(k, "done", kernel.end_ns);
}

}  // namespace lockstep::sim

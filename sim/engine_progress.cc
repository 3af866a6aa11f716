// Kernel progress: starting kernels that may start, completing compute kernels, collectives,
// p2p pairs and NCCL groups, and a rank that exits or crashes.
#include "sim/engine_impl.h"

#include <algorithm>

#include "sim/cost.h"

namespace lockstep::sim {

// Starts what may start on the rank's streams, and wakes threads whose waits are done.
void Engine::Impl::progress_rank(uint32_t r) {
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

bool Engine::Impl::startable(uint32_t k) const {
  const Kernel& kernel = kernels[k];
  if (kernel.state != KernelState::QUEUED) return false;
  for (uint32_t i = 0; i < kernel.dep_count; ++i) {
    if (kernels[dep(kernel, i)].state != KernelState::DONE) return false;
  }
  return true;
}

// Under comm_concurrency, which ready communication kernel starts is a choice (CUDA does not
// bind execution order across streams to launch order), unless launch_order_implicit.
bool Engine::Impl::start_is_eager(uint32_t r, uint32_t k) const {
  const int64_t limit = sc.semantics.comm_concurrency;
  if (!kernels[k].comm || limit == 0) return true;
  const Rank& rank = ranks[r];
  if (rank.running_comm >= limit) return false;
  return sc.semantics.launch_order_implicit && rank.launch_order.front() == k;
}

void Engine::Impl::collect_start_options() {
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

int64_t Engine::Impl::ready_time(uint32_t k, int32_t* cause) const {
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

void Engine::Impl::start_kernel(uint32_t k) {
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

void Engine::Impl::on_running(uint32_t k) {
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

void Engine::Impl::complete(uint32_t k, int64_t end_ns) {
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

void Engine::Impl::maybe_complete_group(uint32_t composite) {
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
void Engine::Impl::complete_collective(uint32_t comm, uint32_t seq) {
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
void Engine::Impl::try_complete_p2p(uint32_t k) {
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

int64_t Engine::Impl::p2p_cost(const Kernel& send) const {
  return comm_cost_ns(OpKind::SEND, send.op.size_bytes, 2, link_of(send.op.group), sc.semantics.allreduce_algorithm);
}

// exit / crash: the process is gone. Its threads stop; its unfinished kernels never finish,
// and a collective it had joined can no longer complete.
void Engine::Impl::terminate_rank(uint32_t r, RankStatus status, int64_t at_ns, uint32_t cause) {
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

}  // namespace lockstep::sim

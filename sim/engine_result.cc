// The end of an execution: op records, how it ended, the stuck or late ops and whom they
// wait for.
#include "sim/engine_impl.h"

#include <algorithm>
#include <tuple>

namespace lockstep::sim {

OpRecord Engine::Impl::record_of(uint32_t k) const {
  const Kernel& kernel = kernels[k];
  OpRecord rec;
  rec.index = kernel.index;
  rec.thread_index = kernel_local[k];
  rec.op = kernel.op;
  if (has_splits(kernel.op.kind)) {
    const std::span<const int64_t> sent = send_splits(kernel.op);
    const std::span<const int64_t> received = recv_splits(kernel.op);
    SplitSizes& splits = rec.splits.make();
    splits.send.assign(sent.begin(), sent.end());
    splits.receive.assign(received.begin(), received.end());
  }
  rec.thread = threads.empty() ? std::string() : thread_names[kernel.thread];
  if (kernel.stream != NO_STREAM) rec.stream = names[ranks[kernel.rank].streams[kernel.stream].name];
  rec.seq = kernel.seq;
  rec.state = kernel.state;
  rec.matched_peer = kernel.match >= 0 ? static_cast<int32_t>(kernels[static_cast<size_t>(kernel.match)].rank) : -1;
  rec.issue_ns = kernel.issue_ns;
  rec.start_ns = kernel.start_ns;
  rec.end_ns = kernel.end_ns;
  // Causes name ops by (rank, index); a composite NCCL group stands for its first op.
  auto name = [&](int32_t cause, int32_t& rank, uint32_t& index) {
    if (cause < 0) return;
    const Kernel* by = &kernels[static_cast<size_t>(cause)];
    if (by->index == NO_INDEX && by->child_count > 0) by = &kernels[static_cast<size_t>(cause) + 1];
    rank = static_cast<int32_t>(by->rank);
    index = by->index;
  };
  name(kernel.start_cause, rec.start_cause_rank, rec.start_cause_index);
  name(kernel.end_cause, rec.end_cause_rank, rec.end_cause_index);
  return rec;
}

void Engine::Impl::finish() {
  const size_t world = ranks.size();
  result.rank_status.resize(world);
  result.rank_end_ns.resize(world);
  bool all_finished = true;
  bool any_unfinished = false;  // running or blocked
  for (size_t r = 0; r < world; ++r) {
    RankStatus status = ranks[r].status;
    if (status == RankStatus::RUNNING) {
      bool blocked = ranks[r].ending;  // every thread ended; its GPU work never finished
      for (uint32_t t : ranks[r].threads) blocked |= threads[t].state == ThreadState::BLOCKED;
      if (blocked) status = RankStatus::BLOCKED;
    }
    any_unfinished |= status == RankStatus::RUNNING || status == RankStatus::BLOCKED;
    result.rank_status[r] = status;
    result.rank_end_ns[r] = ranks[r].end_ns;
    if (status != RankStatus::FINISHED && status != RankStatus::EXITED && status != RankStatus::CRASHED) {
      all_finished = false;
    }
  }
  // A rank that did not finish: the last moment it made progress. (Only then: on a large
  // run that completes, this walk was a cache miss per kernel.)
  for (size_t k = 0; any_unfinished && k < kernels.size(); ++k) {
    const Kernel& kernel = kernels[k];
    const RankStatus status = result.rank_status[kernel.rank];
    if (status != RankStatus::RUNNING && status != RankStatus::BLOCKED) continue;
    const int64_t at = kernel.state == KernelState::DONE ? kernel.end_ns : kernel.start_ns;
    result.rank_end_ns[kernel.rank] = std::max(result.rank_end_ns[kernel.rank], at);
  }
  if (options.record_ops) {
    // A rank's kernels are created in its issue order, so its records come out sorted by index.
    result.ops.assign(world, {});
    for (size_t r = 0; r < world; ++r) result.ops[r].reserve(ranks[r].issued);
    for (uint32_t k = 0; k < kernels.size(); ++k) {
      if (kernels[k].index != NO_INDEX) result.ops[kernels[k].rank].push_back(record_of(k));
    }
    for ([[maybe_unused]] const std::vector<OpRecord>& ops : result.ops) {
      assert(std::is_sorted(ops.begin(), ops.end(), [](const OpRecord& a, const OpRecord& b) { return a.index < b.index; }));
    }
  }
  if (stopped) return;
  if (!mismatched_slots.empty() || !mismatched_sends.empty()) {
    report_mismatches();
    return;
  }
  if (all_finished) {
    result.end = ExecutionEnd::COMPLETED;
    find_timeouts();
    return;
  }
  result.end = ExecutionEnd::STUCK;
  for (uint32_t k = 0; k < kernels.size(); ++k) {
    const Kernel& kernel = kernels[k];
    if (kernel.state != KernelState::RUNNING || kernel.index == NO_INDEX) continue;
    if (kernel.op.kind == OpKind::COMPUTE) continue;
    StuckOp stuck;
    stuck.rank = static_cast<int32_t>(kernel.rank);
    stuck.thread = threads.empty() ? std::string() : thread_names[kernel.thread];
    stuck.op = record_of(k);
    explain_wait(kernel, stuck);
    if (stuck.waiting_for.empty()) continue;  // an NCCL group member that could complete
    result.stuck.push_back(std::move(stuck));
  }
  sort_stuck();
}

// A communication kernel that ran (waiting for its peers) longer than the watchdog allows.
// PyTorch's watchdog fires on such an op; the ranks it waited for are those that started last.
void Engine::Impl::find_timeouts() {
  const int64_t limit = sc.semantics.timeout_ns;
  if (longest_comm_ns <= limit) return;  // nothing to look for: the common case, one compare
  for (uint32_t k = 0; k < kernels.size(); ++k) {
    const Kernel& kernel = kernels[k];
    if (!is_communication(kernel.op.kind) || kernel.index == NO_INDEX) continue;
    if (kernel.end_ns - kernel.start_ns <= limit) continue;
    StuckOp late;
    late.rank = static_cast<int32_t>(kernel.rank);
    late.thread = threads.empty() ? std::string() : thread_names[kernel.thread];
    late.op = record_of(k);
    if (is_collective(kernel.op.kind)) {
      const CollSlot& slot = comms[comm_id(kernel.op.group, kernel.rank)].slots[kernel.seq - 1];
      int64_t last = 0;
      for (int32_t other : slot.kernels) last = std::max(last, kernels[static_cast<size_t>(other)].start_ns);
      for (int32_t other : slot.kernels) {
        const Kernel& o = kernels[static_cast<size_t>(other)];
        if (o.start_ns == last && o.rank != kernel.rank) late.waiting_for.push_back(static_cast<int32_t>(o.rank));
      }
    } else if (kernel.match >= 0) {
      late.waiting_for.push_back(static_cast<int32_t>(kernels[static_cast<size_t>(kernel.match)].rank));
    }
    result.stuck.push_back(std::move(late));
  }
  // By rank and issue index: `kernels` is in the engine's order, which differs between
  // interleavings that reach the same state (the property test found two orders of one
  // timeout reported as two bugs).
  sort_stuck();
  if (!result.stuck.empty()) result.end = ExecutionEnd::TIMEOUT;
}

// Stuck (or late) ops by rank, then thread, then their place among the thread's ops: an order
// every interleaving that reaches the same state gives (the rank's issue order interleaves
// its threads' ops in the engine's order).
void Engine::Impl::sort_stuck() {
  auto key = [&](const StuckOp& s) {
    uint32_t ordinal = 0;
    for (uint32_t t : ranks[static_cast<size_t>(s.rank)].threads) {
      if (thread_names[t] == s.thread) break;
      ++ordinal;
    }
    return std::tuple(s.rank, ordinal, s.op.thread_index);
  };
  std::stable_sort(result.stuck.begin(), result.stuck.end(),
                   [&](const StuckOp& a, const StuckOp& b) { return key(a) < key(b); });
}

// A queued kernel that waits for another thread's unfinished op through the current stream
// the two threads share: said in the explanation (StuckOp::queued_behind).
void Engine::Impl::queued_behind(uint32_t k, StuckOp& stuck) const {
  const Kernel& kernel = kernels[k];
  if (kernel.parent >= 0) return;  // an NCCL group's op: its composite holds the waits
  const uint32_t current = thread_stream_names[kernel.thread];
  for (uint32_t i = 0; i < kernel.dep_count; ++i) {
    const uint32_t d = dep(kernel, i);
    const Kernel& blocker = kernels[d];
    if (blocker.state == KernelState::DONE || blocker.thread == kernel.thread) continue;
    if (thread_stream_names[blocker.thread] != current || blocker.index == NO_INDEX) continue;
    QueuedBehind out;
    out.rank = static_cast<int32_t>(kernel.rank);
    out.behind = record_of(d);
    out.stream = names[current];
    for (uint32_t t : ranks[kernel.rank].threads) {
      if (thread_stream_names[t] == current) out.threads.push_back(thread_names[t]);
    }
    stuck.queued_behind.push_back(std::move(out));
    return;
  }
}

// Whom a running, unfinished op waits for.
void Engine::Impl::explain_wait(const Kernel& kernel, StuckOp& stuck) const {
  auto add = [&](int32_t r, bool never) {
    stuck.waiting_for.push_back(r);
    if (never) stuck.never_issued.push_back(r);
  };
  const uint32_t group = kernel.op.group;
  if (kernel.op.kind == OpKind::NEW_GROUP) {
    const CollSlot& slot = new_group_calls.slots[kernel.seq - 1];
    for (size_t i = 0; i < slot.kernels.size(); ++i) {
      if (i == kernel.rank) continue;
      if (slot.kernels[i] < 0) add(static_cast<int32_t>(i), true);
      else if (kernels[static_cast<size_t>(slot.kernels[i])].state != KernelState::RUNNING) add(static_cast<int32_t>(i), false);
    }
    return;
  }
  if (is_collective(kernel.op.kind)) {
    const CollSlot& slot = comms[comm_id(group, kernel.rank)].slots[kernel.seq - 1];
    for (size_t i = 0; i < slot.kernels.size(); ++i) {
      const int32_t member = members(group, kernel.rank)[i];
      if (static_cast<uint32_t>(member) == kernel.rank) continue;
      if (slot.kernels[i] < 0) {
        add(member, true);
      } else if (kernels[static_cast<size_t>(slot.kernels[i])].state != KernelState::RUNNING) {
        add(member, false);
        queued_behind(static_cast<uint32_t>(slot.kernels[i]), stuck);
      }
    }
    return;
  }
  if (kernel.match >= 0) {
    const Kernel& peer = kernels[static_cast<size_t>(kernel.match)];
    if (peer.state == KernelState::RUNNING && !is_eager(kernel.op.kind == OpKind::SEND ? kernel : peer)) return;
    add(static_cast<int32_t>(peer.rank), false);
    if (peer.state == KernelState::QUEUED) queued_behind(static_cast<uint32_t>(kernel.match), stuck);
    return;
  }
  if (kernel.op.peer >= 0) {
    // Unmatched: has the peer issued an op that could pair with this one (queued behind
    // earlier ones), or never?
    const uint32_t peer = static_cast<uint32_t>(kernel.op.peer);
    bool issued = false;
    if (kernel.op.kind == OpKind::SEND) {
      if (const P2pQueue* receives = recv_queue.find(p2p_key(group, 0, peer))) {
        for (uint32_t recv : *receives) {
          const int32_t from = kernels[recv].op.peer;
          issued |= from < 0 || static_cast<uint32_t>(from) == kernel.rank;
        }
      }
    } else {
      const P2pQueue* sends = send_queue.find(p2p_key(group, peer, kernel.rank));
      issued = sends != nullptr && !sends->empty();
    }
    add(kernel.op.peer, !issued);
    return;
  }
  for (int32_t member : members(group, kernel.rank)) {
    if (static_cast<uint32_t>(member) != kernel.rank) add(member, true);
  }
}

}  // namespace lockstep::sim

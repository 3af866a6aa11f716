// Point to point: issuing sends and receives, matching them in order, wildcard receives as
// choices.
#include "sim/engine_impl.h"

namespace lockstep::sim {

void Engine::Impl::issue_p2p(uint32_t k) {
  Kernel& kernel = kernels[k];
  const uint32_t group = kernel.op.group;
  const uint32_t me = kernel.rank;
  if (kernel.op.kind == OpKind::SEND) {
    const uint32_t dst = static_cast<uint32_t>(kernel.op.peer);
    touch(ObjectKind::SEND_SEQ, p2p_key(group, me, dst), Access::WRITE);
    if (options.footprints) touch_kernel(k);
    P2pQueue& sends = send_queue.get(p2p_key(group, me, dst));
    kernel.seq = ++sends.sent;
    if (log_info != nullptr) [[unlikely]] log_issue(k);
    sends.push_back(k);
    match_receives(group, dst);
  } else {
    touch(ObjectKind::RECV_POST, p2p_key(group, 0, me), Access::WRITE);
    if (options.footprints) touch_kernel(k);
    if (log_info != nullptr) [[unlikely]] log_issue(k);
    recv_queue.get(p2p_key(group, 0, me)).push_back(k);
    match_receives(group, me);
  }
}

// Receives at `dst` on `group` match in issue order; a named receive takes the oldest
// unmatched send from its source. A wildcard at the head waits for a choice.
void Engine::Impl::match_receives(uint32_t group, uint32_t dst) {
  P2pQueue* receives = recv_queue.find(p2p_key(group, 0, dst));
  if (receives == nullptr) return;
  while (!receives->empty() && !stopped) {
    const uint32_t recv = receives->front();
    const int32_t src = kernels[recv].op.peer;
    if (src < 0) return;
    P2pQueue* sends = send_queue.find(p2p_key(group, static_cast<uint32_t>(src), dst));
    if (sends == nullptr || sends->empty()) return;
    const uint32_t send = sends->front();
    sends->pop_front();
    receives->pop_front();
    pair_p2p(send, recv);
  }
}

void Engine::Impl::pair_p2p(uint32_t send, uint32_t recv) {
  kernels[send].match = static_cast<int32_t>(recv);
  kernels[recv].match = static_cast<int32_t>(send);
  kernels[recv].seq = kernels[send].seq;
  if (options.footprints) touch_kernel(recv);  // a wildcard's pairs, known now
  if (log_debug != nullptr) [[unlikely]] {
    log_kernel(send, "matched", std::max(kernels[send].issue_ns, kernels[recv].issue_ns));
    log_kernel(recv, "matched", std::max(kernels[send].issue_ns, kernels[recv].issue_ns));
  }
  if (!p2p_difference(send, recv).empty()) {
    mismatched_sends.push_back(send);  // the pair never completes
    return;
  }
  try_complete_p2p(send);
}

// A wildcard receive takes a message that was sent: both kernels must have started (or, an
// eager send, finished). A send still queued behind other work on its stream has not been
// posted, as in MPI's and Gloo's any-source receives (NCCL has no wildcard); matching it early
// reported deadlocks no real job could reach. Nor has one whose rank exited or crashed before
// it started (aborted, never run): no step made it available (ObjectKind::AVAIL).
void Engine::Impl::collect_wildcard_options() {
  for (const P2pQueue& receives : recv_queue) {
    if (receives.empty()) continue;
    const Kernel& recv = kernels[receives.front()];
    if (recv.op.peer >= 0 || !alive(recv.rank) || recv.state != KernelState::RUNNING) continue;
    const uint32_t group = recv.op.group;
    for (int32_t src : members(group, recv.rank)) {
      if (static_cast<uint32_t>(src) == recv.rank) continue;
      const P2pQueue* sends = send_queue.find(p2p_key(group, static_cast<uint32_t>(src), recv.rank));
      if (sends == nullptr || sends->empty()) continue;
      if (kernels[sends->front()].start_ns < 0) continue;  // queued, or aborted before it started
      options_buf.push_back(Option{ChoiceKind::MATCH, static_cast<int32_t>(recv.rank), static_cast<int32_t>(group),
                                   src, kernels[sends->front()].issue_ns, 0,
                                   channel_actor(group, static_cast<uint32_t>(src), recv.rank)});
    }
  }
}

// A MATCH step (decide): `step` is its index among the execution's steps.
void Engine::Impl::apply_wildcard(const Option& option, uint64_t step) {
  const uint32_t group = static_cast<uint32_t>(option.thread);
  const uint32_t dst = static_cast<uint32_t>(option.rank);
  const uint32_t src = static_cast<uint32_t>(option.detail);
  P2pQueue& receives = *recv_queue.find(p2p_key(group, 0, dst));
  P2pQueue& sends = *send_queue.find(p2p_key(group, src, dst));
  const uint32_t recv = receives.front();
  const uint32_t send = sends.front();
  receives.pop_front();
  sends.pop_front();
  ++result.events;
  if (options.footprints) {
    touch(ObjectKind::RECV_MATCH, p2p_key(group, 0, dst), Access::WRITE);
    touch(ObjectKind::AVAIL, p2p_key(group, 0, dst), Access::READ);
    // It happens after both kernels started (what made it possible), and the pair after it.
    step_after = vclock_join(kernel_vclock(recv), kernel_vclock(send));
    set_kernel_vclock(recv, vclock_with(step_after, option.actor, step));
  }
  pair_p2p(send, recv);
  match_receives(group, dst);
  mark_dirty(dst);
  mark_dirty(src);
}

}  // namespace lockstep::sim

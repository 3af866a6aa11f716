// Checkpoints (states saved at choice points and restored) and state fingerprints (a hash of
// everything that decides an execution's future, for the checker's state cache).
#include "sim/engine_impl.h"

namespace lockstep::sim {

size_t Engine::Impl::state_bytes() const {
  size_t bytes = kernels.size() * (sizeof(Kernel) + sizeof(KernelHash) + sizeof(uint32_t)) +
                 dep_pool.size() * sizeof(uint32_t) + ranks.size() * sizeof(Rank) +
                 threads.size() * (sizeof(Thread) + sizeof(ProgramFiber::Snapshot)) +
                 rank_groups.size() * sizeof(RankGroup) + comms.size() * sizeof(Comm) +
                 (vclocks.size() + kernel_vclocks.size() + kernel_local.size()) * sizeof(uint32_t);
  for (const auto& fiber : fibers) bytes += fiber->snapshot_bytes();
  return bytes;
}

void Engine::Impl::save_checkpoint(uint64_t fingerprint) {
  const uint64_t index = result.choice_points;
  if (checkpoint_count > 0 && checkpoints[checkpoint_count - 1].index >= index) return;  // restored from it
  const size_t bytes = state_bytes();
  if (checkpoint_bytes + bytes > options.checkpoint_budget_bytes) return;  // replayed from an earlier one
  if (checkpoint_count == checkpoints.size()) checkpoints.emplace_back().state.kernels.keep_exact();
  Checkpoint& cp = checkpoints[checkpoint_count++];
  cp.index = index;
  cp.fingerprint = fingerprint;
  cp.bytes = bytes;
  cp.state = static_cast<const ExecState&>(*this);
  cp.programs.resize(fibers.size());
  for (size_t t = 0; t < fibers.size(); ++t) fibers[t]->save(cp.programs[t]);
  checkpoint_bytes += bytes;
}

// The deepest checkpoint within the first `depth` choices, after dropping the others.
const Engine::Impl::Checkpoint* Engine::Impl::resume_point(uint64_t depth) {
  while (checkpoint_count > 0 && checkpoints[checkpoint_count - 1].index > depth) {
    checkpoint_bytes -= checkpoints[--checkpoint_count].bytes;
  }
  return checkpoint_count > 0 ? &checkpoints[checkpoint_count - 1] : nullptr;
}

void Engine::Impl::restore(const Checkpoint& cp) {
  static_cast<ExecState&>(*this) = cp.state;
  for (size_t t = 0; t < fibers.size(); ++t) fibers[t]->restore(cp.programs[t]);
}

// A kernel by its thread and its index among the thread's ops (an NCCL group's composite by
// its first op, bit 31): the same on every path to a state.
uint64_t Engine::Impl::kernel_name(uint32_t k) const {
  const Kernel& kernel = kernels[k];
  const uint32_t named = kernel.index != NO_INDEX ? k : first_child(k);
  const uint32_t local = kernel_local[named];
  return (static_cast<uint64_t>(kernel.thread) << 32) | local | (named != k ? 0x80000000u : 0);
}

uint64_t Engine::Impl::kernel_ref(uint32_t k) const {
  const Kernel& kernel = kernels[k];
  if (kernel.state == KernelState::DONE) return mix(static_cast<uint64_t>(kernel.end_ns) ^ mix(static_cast<uint64_t>(kernel.start_ns)));
  return mix(kernel_name(k));
}

uint64_t Engine::Impl::canon_kernel_name(uint32_t k) const {
  const uint64_t name = kernel_name(k);
  if (!renamed) return name;
  return (static_cast<uint64_t>(canon_thread(static_cast<uint32_t>(name >> 32))) << 32) | (name & 0xffffffffULL);
}

uint64_t Engine::Impl::canon_kernel_ref(uint32_t k) const {
  if (!renamed) return kernel_ref(k);
  const Kernel& kernel = kernels[k];
  if (kernel.state == KernelState::DONE) return kernel_ref(k);
  return mix(canon_kernel_name(k));
}

// Member positions of a communicator hold the kernels of its ranks in rank order; renamed,
// position i holds the kernel of the rank renamed to the i-th member.
template <typename F>
void Engine::Impl::for_canon_members(const CollSlot& slot, uint32_t group, uint32_t rank, F&& f) const {
  if (!renamed) {
    for (const int32_t k : slot.kernels) f(k);
    return;
  }
  const std::vector<int32_t>& members = *sc.groups[group].comm_for(static_cast<int32_t>(rank));
  for (size_t i = 0; i < slot.kernels.size() && i < members.size(); ++i) {
    const uint32_t original = uncanon[static_cast<uint32_t>(members[i])];
    f(slot.kernels[static_cast<size_t>(member_pos[group][original])]);
  }
}

void Engine::Impl::hash_live_kernel(uint32_t k, Hasher& out) const {
  const Kernel& kernel = kernels[k];
  out.add(canon_kernel_name(k));
  out.add(canon_thread(kernel.thread));
  out.add(ranks[kernel.rank].streams[kernel.stream == NO_STREAM ? 0 : kernel.stream].name ^ (kernel.stream == NO_STREAM ? 0xabcULL : 0));
  out.add(kernel.seq);
  out.add(static_cast<uint64_t>(kernel.state) | static_cast<uint64_t>(kernel.comm) << 8 |
          static_cast<uint64_t>(kernel.op.kind) << 16 | static_cast<uint64_t>(kernel.op.dtype) << 24);
  out.add(kernel.op.group);
  out.add_signed(kernel.op.size_bytes);
  out.add_signed(canon_peer(kernel.op.peer));
  out.add_signed(canon_peer(kernel.op.root));
  if (has_splits(kernel.op.kind)) {
    for (int64_t bytes : send_splits(kernel.op)) out.add_signed(bytes);
    for (int64_t bytes : recv_splits(kernel.op)) out.add_signed(bytes);
  } else {
    out.add_signed(kernel.op.duration_ns);
  }
  out.add(kernel.op.stmt != nullptr ? (static_cast<uint64_t>(kernel.op.stmt->loc.line) << 32 | kernel.op.stmt->loc.col) : 0);
  out.add(kernel.match >= 0 ? canon_kernel_ref(static_cast<uint32_t>(kernel.match)) : 0);
  out.add(kernel.parent >= 0 ? canon_kernel_name(static_cast<uint32_t>(kernel.parent)) : 0);
  out.add(kernel.child_count);
  for (uint32_t i = 0; i < kernel.dep_count; ++i) out.add(canon_kernel_ref(dep(kernel, i)));
  out.add_signed(kernel.issue_ns);
  out.add_signed(kernel.start_ns);
  out.add_signed(kernel.end_ns);
}

// One kernel of the sum over live kernels (state_fingerprint).
uint64_t Engine::Impl::hash_kernel(uint32_t k) const {
  const Kernel& kernel = kernels[k];
  Hasher one;
  hash_live_kernel(k, one);
  if (kernel.state == KernelState::DONE && is_collective(kernel.op.kind)) {
    for_canon_members(comms[comm_id(kernel.op.group, kernel.rank)].slots[kernel.seq - 1], kernel.op.group, kernel.rank,
                      [&](int32_t other) { one.add_signed(other >= 0 ? kernels[static_cast<size_t>(other)].start_ns : -2); });
  }
  return one.h;
}

// hash_kernel of a kernel not done, remembered. What it reads of the kernel is fixed once the
// kernel is issued except for the fields compared here, and what it reads of the kernels it
// references (dependencies, match) changes only when one of them becomes done.
uint64_t Engine::Impl::live_kernel_hash(uint32_t k) {
  if (renamed) return hash_kernel(k);  // the memo holds the identity's
  const Kernel& kernel = kernels[k];
  uint32_t done_refs = 0;
  for (uint32_t i = 0; i < kernel.dep_count; ++i) {
    done_refs += kernels[dep(kernel, i)].state == KernelState::DONE ? 1 : 0;
  }
  if (kernel.match >= 0) done_refs += kernels[static_cast<size_t>(kernel.match)].state == KernelState::DONE ? 1 : 0;
  KernelHash& memo = kernel_hashes[k];
  if (memo.valid && memo.state == kernel.state && memo.start_ns == kernel.start_ns && memo.end_ns == kernel.end_ns &&
      memo.match == kernel.match && memo.stream == kernel.stream && memo.seq == kernel.seq &&
      memo.dep_count == kernel.dep_count && memo.child_count == kernel.child_count && memo.done_refs == done_refs) {
    return memo.hash;
  }
  memo = KernelHash{hash_kernel(k), kernel.start_ns, kernel.end_ns, kernel.match, kernel.stream, kernel.seq,
                    kernel.dep_count, kernel.child_count, done_refs, kernel.state, true};
  return memo.hash;
}

// Not const: it moves the communicators' complete_prefix on, which only saves later scans.
uint64_t Engine::Impl::state_fingerprint() {
  choose_renaming();
  Hasher h;
  h.add(ops_issued);
  // Ranks (and their threads, which are numbered rank by rank) in the renamed order.
  const auto rank_at = [&](uint32_t i) { return renamed ? uncanon[i] : i; };
  for (uint32_t i = 0; i < ranks.size(); ++i) {
    for (const uint32_t t : ranks[rank_at(i)].threads) {
      const Thread& thread = threads[t];
      h.add(static_cast<uint64_t>(thread.state));
      // A finished thread's clock and path are history: only reports read them.
      if (thread.state == ThreadState::DONE) continue;
      h.add(thread.position);
      h.add_signed(thread.clock_ns);
      h.add(thread.issued);
      h.add(thread.choose_key);
      for (uint32_t k : thread.waits) h.add(canon_kernel_ref(k));
      h.add(0xfeed);
    }
  }
  for (uint32_t i = 0; i < ranks.size(); ++i) {
    const uint32_t r = rank_at(i);
    const Rank& rank = ranks[r];
    h.add(static_cast<uint64_t>(rank.status) | static_cast<uint64_t>(rank.live_threads) << 8);
    // A rank that finished, exited or crashed acts no more: what the future reads of it is
    // its status and its kernels, which the structures of live ranks reference.
    if (rank.status != RankStatus::RUNNING && rank.status != RankStatus::BLOCKED) continue;
    h.add(rank.issued);
    h.add(rank.new_groups);
    h.add(rank.running_comm);  // not end_ns: a report's number, never read by the future
    h.add(rank.ending ? 1 : 0);
    for (uint32_t k : rank.end_waits) h.add(canon_kernel_ref(k));
    // Streams, named streams and handles by name, as sums: the order in which a rank's threads
    // made them (their slots) is an artefact of the interleaving.
    uint64_t streams_sum = 0;
    for (uint32_t s = 0; s < rank.streams.size(); ++s) {
      const Stream& stream = rank.streams[s];
      Hasher one;
      one.add(footprint_name(stream.name));  // the same on every engine of a search
      one.add(stream.last == NO_INDEX ? 0 : canon_kernel_ref(stream.last));
      for (uint32_t k = rank.head(s).head; k != NO_INDEX; k = kernels[k].next) one.add(canon_kernel_ref(k));
      for (uint32_t k : stream.pending_waits) one.add(canon_kernel_ref(k));
      streams_sum += one.h;
    }
    h.add(streams_sum);
    const RankGroup* per_group = &rank_group(r, 0);
    const size_t group_count = sc.groups.size();
    for (size_t g = 0; g < group_count; ++g) h.add(per_group[g].stream == NO_STREAM ? 0 : 1);
    for (size_t g = 0; g < group_count; ++g) h.add(per_group[g].coll_seq);
    for (size_t g = 0; g < group_count; ++g) h.add(per_group[g].agreed_seq);
    for (size_t g = 0; g < group_count; ++g) h.add(per_group[g].created ? 1 : 2);
    uint64_t handles_sum = 0;
    for (const auto& [name, k] : rank.handles) handles_sum += mix(mix(footprint_name(name)) + canon_kernel_ref(k));
    h.add(handles_sum);
    for (uint32_t k : rank.launch_order) h.add(canon_kernel_ref(k));
    h.add(0xcafe);
  }
  // Kernels not done, and done ones the watchdog will report (their record is history the
  // verdict reads): the two lists kept by track_live and on_done.
  uint64_t live = 0;  // a sum: the order of `kernels` (and of the lists) is an artefact
  for (uint32_t k : live_kernels) live += live_kernel_hash(k);
  for (uint32_t k : timed_out) live += hash_kernel(k);
  h.add(live);
  // Communicators: the collectives not complete everywhere (every member's kernel issued and
  // done, which CollSlot::done counts).
  auto slot_complete = [](const CollSlot& slot) { return slot.done == slot.kernels.size(); };
  auto hash_slots = [&](Comm& comm, uint64_t id, uint32_t group, uint32_t member) {
    while (comm.complete_prefix < comm.slots.size() && slot_complete(comm.slots[comm.complete_prefix])) {
      ++comm.complete_prefix;
    }
    for (size_t seq = comm.complete_prefix; seq < comm.slots.size(); ++seq) {
      const CollSlot& slot = comm.slots[seq];
      if (slot_complete(slot)) continue;
      h.add(id);
      h.add(seq);
      h.add(slot.issued | static_cast<uint64_t>(slot.running) << 32);
      h.add(slot.first >= 0 ? canon_kernel_ref(static_cast<uint32_t>(slot.first)) : 0);
      for_canon_members(slot, group, member, [&](int32_t k) { h.add(k >= 0 ? canon_kernel_ref(static_cast<uint32_t>(k)) : 1); });
    }
  };
  for (uint32_t g = 0; g < sc.groups.size(); ++g) {
    const GroupDef& group = sc.groups[g];
    for (uint32_t c = 0; c < group.comms.size(); ++c) {
      hash_slots(comms[comm_base[g] + c], comm_base[g] + c, g, group.comms[c].empty() ? 0 : static_cast<uint32_t>(group.comms[c].front()));
    }
  }
  hash_slots(new_group_calls, UINT32_MAX, 0, 0);
  // Keyed tables: a sum over entries (their iteration order is not part of the state).
  uint64_t keyed = 0;
  // A p2p key (group, src, dst) renamed; receive queues are keyed (group, 0, dst), their 0 no
  // rank.
  const auto canon_key = [&](uint64_t key, bool receives) {
    if (!renamed) return key;
    const auto src = static_cast<uint32_t>((key >> 21) & P2P_RANK_MASK);
    const auto dst = static_cast<uint32_t>(key & P2P_RANK_MASK);
    return p2p_key(static_cast<uint32_t>(key >> 42), receives ? src : canon_rank(src), canon_rank(dst));
  };
  for (const P2pQueue& queue : send_queue) {
    const uint64_t key = canon_key(queue.key, false);
    keyed += mix(mix(key ^ 0x5e17ULL) + queue.sent);  // every key has sent >= 1
    if (queue.empty()) continue;
    Hasher one;
    one.add(key);
    for (uint32_t k : queue) one.add(canon_kernel_ref(k));
    keyed += one.h;
  }
  for (const P2pQueue& queue : recv_queue) {
    if (queue.empty()) continue;
    Hasher one;
    one.add(~canon_key(queue.key, true));
    for (uint32_t k : queue) one.add(canon_kernel_ref(k));
    keyed += one.h;
  }
  for (const auto& [key, branch] : agreed_branch) keyed += mix(mix(key ^ 0xa6eeULL) + branch);
  h.add(keyed);
  return h.h == 0 ? 1 : h.h;
}

}  // namespace lockstep::sim

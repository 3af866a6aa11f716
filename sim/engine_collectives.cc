// Collectives, NCCL groups and new_group: issuing them, matching the k-th ops of a
// communicator, and mismatches.
#include "sim/engine_impl.h"

#include <algorithm>
#include <cassert>
#include <optional>
#include <tuple>

#include <fmt/format.h>

namespace lockstep::sim {

void Engine::Impl::issue_collective(uint32_t k) {
  Kernel& kernel = kernels[k];
  const uint32_t group = kernel.op.group;
  kernel.seq = ++rank_group(kernel.rank, group).coll_seq;
  kernel.run.slot = SlotRef{comm_id(group, kernel.rank), kernel.seq};
  touch(ObjectKind::COLL_SEQ, pack(kernel.rank, kernel.run.slot.comm), Access::WRITE);
  if (log_info != nullptr) [[unlikely]] log_issue(k);
  Comm& comm = comms[kernel.run.slot.comm];
  if (options.footprints) touch_kernel(k);
  join_slot(comm, kernel.seq, members(group, kernel.rank).size(),
            static_cast<size_t>(member_pos[group][kernel.rank]), k);
  comm.slots[kernel.seq - 1].group = group;
}

void Engine::Impl::join_slot(Comm& comm, uint32_t seq, size_t size, size_t position, uint32_t k) {
  while (comm.slots.size() < seq) comm.slots.add().reset();
  CollSlot& slot = comm.slots[seq - 1];
  if (slot.kernels.empty()) slot.kernels.assign(size, -1);
  slot.kernels[position] = static_cast<int32_t>(k);

  ++slot.issued;
  if (log_debug != nullptr && slot.issued == size) [[unlikely]] log_slot_matched(slot);
  if (slot.first < 0) slot.first = static_cast<int32_t>(k);
  bool differs = static_cast<uint32_t>(slot.first) != k &&
                 !collective_difference(static_cast<uint32_t>(slot.first), k).empty();
  if (!differs && op_info(kernels[k].op.kind).agreement == Agreement::SPLITS) {
    // What each pair exchanges must agree: k against every member issued before it.
    // (k against itself too: what a member sends itself must be what it expects from itself.)
    for (int32_t other : slot.kernels) {
      if (other >= 0 && !collective_difference(static_cast<uint32_t>(other), k).empty()) {
        differs = true;
        break;
      }
    }
  }
  if (!slot.mismatched && differs) {
    slot.mismatched = true;
    const uint32_t id = &comm == &new_group_calls ? UINT32_MAX : static_cast<uint32_t>(&comm - comms.data());
    mismatched_slots.emplace_back(id, seq);
  }
}

// The mismatch a slot shows in the final state, whatever order its members issued in: the
// lowest rank whose op differs from another's, against the lowest rank it differs from.
MismatchInfo Engine::Impl::slot_mismatch(uint32_t id, uint32_t seq) const {
  const CollSlot& slot = (id == UINT32_MAX ? new_group_calls : comms[id]).slots[seq - 1];
  std::vector<uint32_t> issued;
  for (int32_t k : slot.kernels) {
    if (k >= 0) issued.push_back(static_cast<uint32_t>(k));
  }
  std::sort(issued.begin(), issued.end(), [&](uint32_t x, uint32_t y) { return kernels[x].rank < kernels[y].rank; });
  for (uint32_t a : issued) {
    for (uint32_t b : issued) {
      MismatchInfo split;
      const std::string field = collective_difference(a, b, &split);
      if (field.empty()) continue;
      MismatchInfo info = mismatch_of(field, a, b);
      info.split_from = split.split_from;
      info.split_to = split.split_to;
      info.split_sent = split.split_sent;
      info.split_expected = split.split_expected;
      return info;
    }
  }
  assert(false && "a mismatched slot has two members that differ");
  return {};
}

// The field a matched send/recv pair differs in ("size", "dtype", "tag"), or empty.
std::string Engine::Impl::p2p_difference(uint32_t send, uint32_t recv) const {
  const OpInstance& a = kernels[send].op;
  const OpInstance& b = kernels[recv].op;
  if (a.size_bytes != b.size_bytes) return "size";
  if (a.dtype != b.dtype) return "dtype";
  // A tag is a logical identity (docs/scenario-language.md): a pair that carries different ones moved the wrong
  // tensor, however well the sizes agree (PyTorch p2p has no tag matching on NCCL).
  if ((a.stmt ? std::string_view(a.stmt->tag) : std::string_view()) !=
      (b.stmt ? std::string_view(b.stmt->tag) : std::string_view())) {
    return "tag";
  }
  return {};
}

// At the end: the first mismatch in (group, seq, ranks) order, so that every interleaving of
// the same issued ops reports the same one.
void Engine::Impl::report_mismatches() {
  std::optional<MismatchInfo> best;
  auto consider = [&](MismatchInfo info) {
    if (!best || std::tie(info.group, info.seq, info.rank_a, info.rank_b) <
                     std::tie(best->group, best->seq, best->rank_a, best->rank_b)) {
      best = std::move(info);
    }
  };
  for (const auto& [id, seq] : mismatched_slots) consider(slot_mismatch(id, seq));
  for (uint32_t send : mismatched_sends) {
    const uint32_t recv = static_cast<uint32_t>(kernels[send].match);
    consider(mismatch_of(p2p_difference(send, recv), send, recv));
  }
  result.mismatch = std::move(best);
  result.end = ExecutionEnd::MISMATCH;
}

std::string Engine::Impl::collective_difference(uint32_t ka, uint32_t kb, MismatchInfo* split) const {
  const OpInstance& a = kernels[ka].op;
  const OpInstance& b = kernels[kb].op;
  if (a.kind != b.kind) return "kind";
  if (a.kind == OpKind::NEW_GROUP) return a.stmt->new_group == b.stmt->new_group ? std::string() : "group";
  if (op_info(a.kind).agreement == Agreement::SPLITS) {
    // Member a sends b what b receives from a, both ways.
    const auto pos = [&](uint32_t k) { return static_cast<size_t>(member_pos[kernels[k].op.group][kernels[k].rank]); };
    for (const auto& [from, to] : {std::pair{ka, kb}, std::pair{kb, ka}}) {
      const int64_t sent = send_splits(kernels[from].op)[pos(to)];
      const int64_t expected = recv_splits(kernels[to].op)[pos(from)];
      if (sent == expected) continue;
      if (split != nullptr) {
        split->split_from = static_cast<int32_t>(kernels[from].rank);
        split->split_to = static_cast<int32_t>(kernels[to].rank);
        split->split_sent = sent;
        split->split_expected = expected;
      }
      return "split sizes";
    }
  } else if (a.size_bytes != b.size_bytes) {
    return "size";
  }
  if (a.dtype != b.dtype) return "dtype";
  if (a.root != b.root) return "root";
  const std::string_view tag_a = a.stmt ? std::string_view(a.stmt->tag) : std::string_view();
  const std::string_view tag_b = b.stmt ? std::string_view(b.stmt->tag) : std::string_view();
  if (tag_a != tag_b) return "tag";
  return {};
}

uint32_t Engine::Impl::keep_splits(std::span<const int64_t> splits) {
  const auto at = static_cast<uint32_t>(split_values.size());
  split_values.push_back(static_cast<int64_t>(splits.size() / 2));
  split_values.insert(split_values.end(), splits.begin(), splits.end());
  return at;
}

MismatchInfo Engine::Impl::mismatch_of(const std::string& field, uint32_t a, uint32_t b) const {
  MismatchInfo info;
  info.group = kernels[a].op.group;
  info.seq = kernels[b].seq;
  info.field = field;
  info.rank_a = static_cast<int32_t>(kernels[a].rank);
  info.op_a = record_of(a);
  info.rank_b = static_cast<int32_t>(kernels[b].rank);
  info.op_b = record_of(b);
  if (info.rank_a > info.rank_b) {
    std::swap(info.rank_a, info.rank_b);
    std::swap(info.op_a, info.op_b);
  }
  return info;
}

// An NCCL group: its ops match like any others, but they hold one place on the stream (a
// composite kernel) and start together, so a paired send and recv do not block each other.
// The group completes when all its ops can.
void Engine::Impl::issue_nccl_group(uint32_t t, const std::vector<OpInstance>& ops) {
  Thread& thread = threads[t];
  const uint32_t r = thread.rank;
  for (const OpInstance& op : ops) {
    if (!usable_group(r, op)) return;
  }
  const uint32_t composite = static_cast<uint32_t>(kernels.size());
  {
    Kernel group_kernel;
    group_kernel.rank = r;
    group_kernel.thread = t;
    group_kernel.comm = true;
    group_kernel.issue_ns = thread.clock_ns;
    group_kernel.composite = true;
    if (!ops.empty()) {
      group_kernel.op = ops.front();
      group_kernel.kind = group_kernel.op.kind;
    }
    kernels.push_back(std::move(group_kernel));
    track_live(composite);
  }
  for (const OpInstance& op : ops) {
    if (!count_op()) return;
    ++result.events;
    const uint32_t k = new_kernel(t, op);
    kernels[k].parent = static_cast<int32_t>(composite);
    kernels[k].in_group = true;
    ++kernels[composite].child_count;
    kernels[composite].has_children = true;
  }
  const uint32_t c = current_stream(t);
  const uint32_t s = ops.empty() ? c : comm_stream(r, ops.front());
  touch_link(r, s, c, false);
  link_synchronous(r, s, c, composite, false);
  const uint32_t first = first_child(composite);
  const uint32_t count = kernels[composite].child_count;
  for (uint32_t k = first; k < first + count; ++k) kernels[k].stream = s;
  if (sc.semantics.comm_concurrency > 0) launch(r, composite);
  for (uint32_t k = first; k < first + count; ++k) {
    if (is_collective(kernels[k].op.kind)) issue_collective(k);
    else issue_p2p(k);
    if (stopped) return;
  }
  mark_dirty(r);
}

// new_group: a blocking rendezvous of every world rank, the k-th calls matching; on the host,
// not on a stream (PyTorch's store-based barrier).
void Engine::Impl::issue_new_group(uint32_t t, const OpInstance& op) {
  Thread& thread = threads[t];
  Rank& rank = ranks[thread.rank];
  const uint32_t k = new_kernel(t, op);
  Kernel& kernel = kernels[k];
  touch(ObjectKind::NEW_GROUP_SEQ, thread.rank, Access::WRITE);
  touch(ObjectKind::CREATED, pack(thread.rank, op.stmt->new_group), Access::WRITE);
  kernel.seq = ++rank.new_groups;
  kernel.state = KernelState::RUNNING;
  kernel.start_ns = kernel.issue_ns;
  if (rank_group(thread.rank, op.stmt->new_group).created) {
    runtime_error(op, fmt::format("rank {} creates group '{}' a second time", thread.rank,
                                  sc.groups[op.stmt->new_group].name));
    return;
  }
  rank_group(thread.rank, op.stmt->new_group).created = true;
  if (options.footprints) touch_kernel(k);
  if (log_info != nullptr) [[unlikely]] log_issue(k);
  join_slot(new_group_calls, kernel.seq, static_cast<size_t>(sc.world), thread.rank, k);
  if (stopped) return;
  CollSlot& slot = new_group_calls.slots[kernel.seq - 1];
  ++slot.running;
  thread.waits.assign(1, k);
  if (slot.running == static_cast<uint32_t>(sc.world) && !slot.mismatched) {
    int64_t end = 0;
    for (int32_t other : slot.kernels) end = std::max(end, kernels[static_cast<size_t>(other)].start_ns);
    if (options.footprints) join_vclocks(slot.kernels);
    for (int32_t other : slot.kernels) complete(static_cast<uint32_t>(other), end);
  }
  block_thread(t);
}

}  // namespace lockstep::sim

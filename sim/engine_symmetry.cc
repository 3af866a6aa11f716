// Symmetric ranks (EngineOptions::symmetry; docs/semantics.md, "Symmetric ranks"): ranks whose
// programs are equal up to their rank numbers, found once per engine; at each fingerprint, the
// renaming of them that the state is hashed under.
#include "sim/engine_impl.h"

#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace lockstep::sim {

namespace {

// An op as it bears on symmetry: every field the engine reads, ranks (peer, root) as given.
// Thread boundaries and NCCL groups are entries too (kind = op count + 1 or + 2).
struct OpSig {
  const Stmt* stmt = nullptr;
  int64_t size_bytes = 0;
  int64_t duration_ns = 0;
  uint32_t group = 0;
  int32_t peer = -1;
  int32_t root = -1;
  uint32_t kind = 0;
  uint32_t dtype = 0;
};

constexpr uint32_t THREAD_MARK = OP_KIND_COUNT + 1;
constexpr uint32_t GROUP_MARK = OP_KIND_COUNT + 2;

// Ops unrolled over all ranks before the search gives symmetry up (the unrolling's time and
// memory: about 50 bytes an op).
constexpr size_t MAX_SYMMETRY_OPS = size_t{1} << 20;
// Classes a rank is tried against before it starts a class of its own.
constexpr size_t MAX_CLASS_TRIES = 4;

}  // namespace

void Engine::Impl::find_rank_classes() {
  const auto world = static_cast<uint32_t>(sc.world);
  canon.resize(world);
  uncanon.resize(world);
  for (uint32_t r = 0; r < world; ++r) canon[r] = uncanon[r] = r;
  if (setup_error) return;
  if (!options.track_state) {
    symmetry_note = "the strategy keeps no state cache: --symmetry applies to dpor";
    return;
  }
  if (sc.launch.given) {
    symmetry_note = "the scenario has `launch:`";
    return;
  }
  if (sc.semantics.comm_concurrency > 0) {
    symmetry_note = "the scenario limits comm_concurrency";
    return;
  }
  if (sc.semantics.p2p_comm != P2pComm::GROUP) {
    symmetry_note = "p2p runs on per-pair communicators";
    return;
  }
  for (const GroupDef& group : sc.groups) {
    if (group.from_new_group) {
      symmetry_note = "the scenario makes groups with new_group";
      return;
    }
  }
  // Each rank's ops, thread by thread: a program's only input is a `choose` branch, so without
  // one what it issues is fixed (ProgramFiber::advance).
  std::vector<std::vector<OpSig>> ops(world);
  size_t total = 0;
  const auto add = [&](uint32_t r, const OpInstance& op) {
    ops[r].push_back(OpSig{op.stmt, op.size_bytes, op.duration_ns, op.group, op.peer, op.root,
                           static_cast<uint32_t>(op.kind), static_cast<uint32_t>(op.dtype)});
    ++total;
    if (has_splits(op.kind) || op.kind == OpKind::NEW_GROUP || op.kind == OpKind::INIT) {
      symmetry_note = "the scenario has an op that lists per-member sizes or makes a group";
      return false;
    }
    return true;
  };
  bool ok = true;
  for (uint32_t r = 0; r < world && ok; ++r) {
    for (const uint32_t t : ranks[r].threads) {
      ProgramFiber& fiber = *fibers[t];
      fiber.restart();
      ops[r].push_back(OpSig{nullptr, 0, 0, 0, -1, -1, THREAD_MARK, ranks[r].threads.count});
      for (fiber.advance(); ok && fiber.state() == ProgramFiber::State::READY; fiber.advance()) {
        if (total >= MAX_SYMMETRY_OPS) {
          symmetry_note = "the programs issue more than " + std::to_string(MAX_SYMMETRY_OPS) + " ops";
          ok = false;
        } else if (fiber.action() == ProgramFiber::Action::CHOOSE) {
          symmetry_note = "the scenario has `choose`";
          ok = false;
        } else if (fiber.action() == ProgramFiber::Action::OP) {
          ok = add(r, fiber.pending());
        } else {
          ops[r].push_back(OpSig{nullptr, 0, 0, 0, -1, -1, GROUP_MARK, static_cast<uint32_t>(fiber.group_ops().size())});
          for (const OpInstance& op : fiber.group_ops()) ok = ok && add(r, op);
        }
      }
      if (ok && fiber.state() == ProgramFiber::State::FAILED) {
        symmetry_note = "a program fails";  // the search reports it
        ok = false;
      }
      fiber.restart();
      if (!ok) break;
    }
  }
  if (!ok) return;
  // Which ranks name which in their ops.
  std::vector<std::vector<uint32_t>> named_by(world);
  for (uint32_t r = 0; r < world; ++r) {
    for (const OpSig& op : ops[r]) {
      for (const int32_t x : {op.peer, op.root}) {
        if (x >= 0 && x < sc.world && (named_by[x].empty() || named_by[x].back() != r)) named_by[x].push_back(r);
      }
    }
  }
  // The groups ops run on (a group no op uses is no part of any state).
  std::vector<bool> used(sc.groups.size(), false);
  for (const std::vector<OpSig>& rank_ops : ops) {
    for (const OpSig& op : rank_ops) {
      if (op.kind < OP_KIND_COUNT && op_info(static_cast<OpKind>(op.kind)).op_class != OpClass::HOST) used[op.group] = true;
    }
  }
  // Whether swapping ranks a and b maps every rank's ops onto those of the rank it becomes.
  const auto swap_is_symmetry = [&](uint32_t a, uint32_t b) {
    for (size_t g = 0; g < sc.groups.size(); ++g) {
      if (used[g] && sc.groups[g].comm_of_rank[a] != sc.groups[g].comm_of_rank[b]) return false;
    }
    const auto swapped = [&](int32_t x) -> int32_t {
      return x == static_cast<int32_t>(a) ? static_cast<int32_t>(b) : x == static_cast<int32_t>(b) ? static_cast<int32_t>(a) : x;
    };
    const auto maps = [&](uint32_t x) {
      const std::vector<OpSig>& from = ops[x];
      const std::vector<OpSig>& to = ops[static_cast<uint32_t>(swapped(static_cast<int32_t>(x)))];
      if (from.size() != to.size()) return false;
      for (size_t i = 0; i < from.size(); ++i) {
        const OpSig& p = from[i];
        const OpSig& q = to[i];
        if (p.stmt != q.stmt || p.size_bytes != q.size_bytes || p.duration_ns != q.duration_ns || p.group != q.group ||
            p.kind != q.kind || p.dtype != q.dtype || swapped(p.peer) != q.peer || swapped(p.root) != q.root) {
          return false;
        }
      }
      return true;
    };
    for (size_t j = 0; j < ranks[a].threads.count; ++j) {
      const uint32_t ta = ranks[a].threads[j];
      const uint32_t tb = ranks[b].threads[j];
      if (thread_names[ta] != thread_names[tb] || thread_stream_names[ta] != thread_stream_names[tb]) return false;
    }
    if (!maps(a) || !maps(b)) return false;
    for (const uint32_t x : named_by[a]) {
      if (!maps(x)) return false;
    }
    for (const uint32_t x : named_by[b]) {
      if (!maps(x)) return false;
    }
    return true;
  };
  // Candidates share a signature: their ops without the ranks they name. A rank is tried
  // against the latest classes of its bucket (a swap with a class's first rank: the swaps of a
  // class's ranks with its first generate every renaming among them).
  std::map<uint64_t, std::vector<uint32_t>> buckets;
  for (uint32_t r = 0; r < world; ++r) {
    uint64_t h = 0x73796d6dULL;
    for (const OpSig& op : ops[r]) {
      h = mix(h ^ reinterpret_cast<uintptr_t>(op.stmt));
      h = mix(h ^ static_cast<uint64_t>(op.size_bytes));
      h = mix(h ^ static_cast<uint64_t>(op.duration_ns));
      h = mix(h ^ (uint64_t{op.group} << 32 | op.kind << 8 | op.dtype));
    }
    buckets[h].push_back(r);
  }
  for (const auto& [signature, members] : buckets) {
    std::vector<std::vector<uint32_t>> classes;
    for (const uint32_t r : members) {
      bool joined = false;
      for (size_t tried = 0; tried < classes.size() && tried < MAX_CLASS_TRIES && !joined; ++tried) {
        std::vector<uint32_t>& c = classes[classes.size() - 1 - tried];
        if (swap_is_symmetry(c.front(), r)) {
          c.push_back(r);
          joined = true;
        }
      }
      if (!joined) classes.push_back({r});
    }
    for (std::vector<uint32_t>& c : classes) {
      if (c.size() >= 2) rank_classes.push_back(std::move(c));
    }
  }
  std::sort(rank_classes.begin(), rank_classes.end());
  if (rank_classes.empty()) {
    symmetry_note = "no two ranks' programs are equal up to their rank numbers";
    return;
  }
  symmetry_view.impl = this;
  if (options.ids == nullptr) options.ids = &own_ids;  // canonical_key and rename_object look keys up
}

// Each class's ranks sorted by what the state holds of them, named by their rank-free part:
// the class's k-th name goes to the k-th of them (ties in rank order). Two states that rename
// each other then mostly choose renamings that make them equal; where they do not, the
// fingerprints differ and the cache only prunes less.
void Engine::Impl::choose_renaming() {
  renamed = false;
  if (rank_classes.empty()) return;
  std::vector<std::pair<uint64_t, uint32_t>> order;
  for (const std::vector<uint32_t>& members : rank_classes) {
    order.clear();
    for (const uint32_t r : members) {
      const Rank& rank = ranks[r];
      Hasher h;
      h.add(static_cast<uint64_t>(rank.status) | static_cast<uint64_t>(rank.live_threads) << 8 |
            static_cast<uint64_t>(rank.ending ? 1 : 0) << 40);
      h.add(rank.issued);
      h.add(rank.stream_count);
      h.add(rank.handles.size());
      for (const uint32_t t : rank.threads) {
        const Thread& thread = threads[t];
        h.add(static_cast<uint64_t>(thread.state));
        h.add(thread.position);
        h.add_signed(thread.clock_ns);
        h.add(thread.issued);
        h.add(thread.waits.size());
      }
      for (size_t g = 0; g < sc.groups.size(); ++g) h.add(rank_group(r, static_cast<uint32_t>(g)).coll_seq);
      // Its streams' kernels in order, each named without its rank: its thread's index among
      // the rank's, and its index among that thread's ops (or its times once done).
      uint64_t streams_sum = 0;
      for (uint32_t s = 0; s < rank.streams.size(); ++s) {
        Hasher one;
        one.add(footprint_name(rank.streams[s].name));
        for (uint32_t k = rank.head(s).head; k != NO_INDEX; k = kernels[k].next) {
          const Kernel& kernel = kernels[k];
          if (kernel.state == KernelState::DONE) {
            one.add(kernel_ref(k));
          } else {
            const uint64_t name = kernel_name(k);
            one.add(static_cast<uint64_t>(threads[kernel.thread].local) << 32 | (name & 0xffffffffULL));
            one.add(static_cast<uint64_t>(kernel.state));
          }
        }
        streams_sum += one.h;
      }
      h.add(streams_sum);
      order.emplace_back(h.h, r);
    }
    std::sort(order.begin(), order.end());
    for (size_t i = 0; i < members.size(); ++i) {
      canon[order[i].second] = members[i];
      uncanon[members[i]] = order[i].second;
      renamed = renamed || order[i].second != members[i];
    }
  }
}

uint64_t Engine::Impl::canonical_key(uint64_t key) {
  if (!renamed) return key;
  const auto actor = static_cast<uint32_t>(key >> 32);
  const uint64_t low = key & 0xffffffffULL;
  const auto thread_count = static_cast<uint32_t>(threads.size());
  if (actor < thread_count) return static_cast<uint64_t>(canon_thread(actor)) << 32 | low;
  const auto [kind, actor_key] = options.ids->actor_key(actor, thread_count);
  uint32_t renamed_actor = actor;
  if (kind == 0) {  // a wildcard channel (group, src, dst)
    const auto src = static_cast<uint32_t>((actor_key >> 21) & P2P_RANK_MASK);
    const auto dst = static_cast<uint32_t>(actor_key & P2P_RANK_MASK);
    renamed_actor = channel_actor(static_cast<uint32_t>(actor_key >> 42), canon_rank(src), canon_rank(dst));
  } else {  // a kernel, by its thread and index
    const uint64_t name = (static_cast<uint64_t>(canon_thread(static_cast<uint32_t>(actor_key >> 32))) << 32) |
                          (actor_key & 0xffffffffULL);
    renamed_actor = kernel_name_actor(name);
  }
  return static_cast<uint64_t>(renamed_actor) << 32 | low;
}

uint32_t Engine::Impl::rename_object(uint32_t object, std::span<const uint32_t> renaming) {
  if (renaming.empty()) return object;
  const auto name = [&](uint64_t r) -> uint64_t { return r < renaming.size() ? renaming[r] : r; };
  const ObjectKind kind = object_kind(object);
  if (kind == ObjectKind::ALIVE || kind == ObjectKind::PENDING) {
    return (static_cast<uint32_t>(kind) << OBJECT_KIND_SHIFT) | static_cast<uint32_t>(name(static_cast<uint32_t>(object_rank(object))));
  }
  const auto [it, added] = object_keys.try_emplace(object, 0);
  if (added) it->second = options.ids->object_key(static_cast<uint32_t>(kind), object & ((uint32_t{1} << OBJECT_KIND_SHIFT) - 1));
  const uint64_t key = it->second;
  uint64_t renamed_key = key;
  switch (kind) {
    case ObjectKind::STREAM:
    case ObjectKind::HANDLE:
    case ObjectKind::COLL_SEQ:
    case ObjectKind::CREATED:
    case ObjectKind::AGREED_SEQ: renamed_key = pack(name(key >> 32), key & 0xffffffffULL); break;
    case ObjectKind::STREAMS:
    case ObjectKind::NEW_GROUP_SEQ:
    case ObjectKind::LAUNCH:
    case ObjectKind::SLOTS: renamed_key = name(key); break;
    case ObjectKind::SEND_SEQ:
    case ObjectKind::PAIRS:  // (group, src, dst)
      renamed_key = p2p_key(static_cast<uint32_t>(key >> 42), static_cast<uint32_t>(name((key >> 21) & P2P_RANK_MASK)),
                            static_cast<uint32_t>(name(key & P2P_RANK_MASK)));
      break;
    case ObjectKind::RECV_POST:
    case ObjectKind::RECV_MATCH:
    case ObjectKind::AVAIL:  // (group, 0, dst): the 0 is no rank
      renamed_key = p2p_key(static_cast<uint32_t>(key >> 42), 0, static_cast<uint32_t>(name(key & P2P_RANK_MASK)));
      break;
    case ObjectKind::SLOT:
    case ObjectKind::ALIVE:
    case ObjectKind::PENDING: break;
  }
  return renamed_key == key ? object : this->object(kind, renamed_key);
}

}  // namespace lockstep::sim

// Streams: interned stream and handle names, a rank's streams, enqueueing kernels on them and
// the waits between streams.
#include "sim/engine_impl.h"

#include <algorithm>

#include <fmt/format.h>

namespace lockstep::sim {

uint32_t Engine::Impl::intern(std::string_view name) {
  if (auto it = name_ids.find(name); it != name_ids.end()) return it->second;
  const uint32_t id = static_cast<uint32_t>(names.size());
  names.emplace_back(name);
  name_ids.emplace(names.back(), id);
  return id;
}

uint32_t Engine::Impl::find_name(std::string_view name) const {
  const auto it = name_ids.find(name);
  return it != name_ids.end() ? it->second : NO_NAME;
}

uint32_t Engine::Impl::add_stream(Rank& rank, uint32_t name) {
  const uint32_t s = static_cast<uint32_t>(rank.streams.size());
  rank.named_streams.emplace_back(name, s);
  rank.streams.add().reset(name);
  if (s < Rank::INLINE_STREAMS) {
    rank.heads[s] = StreamHead{};
  } else {
    rank.more_heads.emplace_back();
  }
  rank.stream_count = s + 1;
  return s;
}

uint32_t Engine::Impl::named_stream(Rank& rank, uint32_t name) {
  const uint32_t* found = find_stream(rank, name);
  return found != nullptr ? *found : add_stream(rank, name);
}

uint32_t Engine::Impl::pair_stream_name(uint32_t group, uint32_t a, uint32_t b) {
  auto [it, added] = pair_stream_names.try_emplace(p2p_key(group, a, b), 0);
  if (added) it->second = intern(fmt::format("comm:{}:p2p:{}-{}", sc.groups[group].name, a, b));
  return it->second;
}

// The stream of a communication op: `stream:` if given; for p2p under p2p_comm: pair, the
// pair's own stream (PyTorch's lazy init); else the group's `comm:GROUP` stream.
uint32_t Engine::Impl::comm_stream(uint32_t r, const OpInstance& op) {
  Rank& rank = ranks[r];
  if (op.stmt && !op.stmt->stream.empty()) return named_stream(rank, intern(op.stmt->stream));
  if (is_p2p(op.kind) && sc.semantics.p2p_comm == P2pComm::PAIR && op.peer >= 0) {
    const uint32_t a = std::min<uint32_t>(r, static_cast<uint32_t>(op.peer));
    const uint32_t b = std::max<uint32_t>(r, static_cast<uint32_t>(op.peer));
    return named_stream(rank, pair_stream_name(op.group, a, b));
  }
  uint32_t& s = rank_group(r, op.group).stream;
  if (s == NO_STREAM) s = add_stream(rank, group_stream_name[op.group]);
  return s;
}

void Engine::Impl::enqueue(uint32_t r, uint32_t s, uint32_t k) {
  Stream& stream = ranks[r].streams[s];
  StreamHead& head = ranks[r].head(s);
  Kernel& kernel = kernels[k];
  assert(kernel.dep_count == 0);
  // Done ones too: their end still bounds this kernel's start (see add_wait). One dependency
  // (the common case) is kept in the kernel itself, which progress reads anyway.
  kernel.dep_count = static_cast<uint32_t>(stream.pending_waits.size());
  if (kernel.dep_count == 1) {
    kernel.dep_begin = stream.pending_waits[0];
  } else if (kernel.dep_count > 1) {
    kernel.dep_begin = static_cast<uint32_t>(dep_pool.size());
    dep_pool.insert(dep_pool.end(), stream.pending_waits.begin(), stream.pending_waits.end());
  }
  stream.pending_waits.clear();
  kernel.stream = s;
  if (stream.last != NO_INDEX) kernels[stream.last].next = k;
  stream.last = k;
  if (head.head == NO_INDEX) head.head = k;
}

// A communication op's stream s waits for prior work on the issuing thread's current stream c;
// c waits for the op unless it is async (then `wait: H` adds that edge).
// "Prior work on c" is its last kernel and the waits c has taken on since (an earlier
// synchronous op on another stream): CUDA orders an event recorded on c after both.
void Engine::Impl::link_synchronous(uint32_t r, uint32_t s, uint32_t c, uint32_t k, bool async) {
  Rank& rank = ranks[r];
  if (s != c) {
    Stream& current = rank.streams[c];
    WaitList& waits = rank.streams[s].pending_waits;
    if (current.last != NO_INDEX) add_wait(waits, current.last);
    for (uint32_t w : current.pending_waits) add_wait(waits, w);
  }
  enqueue(r, s, k);
  if (!async && s != c) add_wait(rank.streams[c].pending_waits, k);
}

// The thread's current stream (ThreadDef::stream; `main` unless it names one), made on first use.
uint32_t Engine::Impl::current_stream(uint32_t t) {
  const uint32_t name = thread_stream_names[t];
  return name == MAIN_NAME ? MAIN_STREAM : named_stream(ranks[threads[t].rank], name);
}

// Adds a wait on kernel k, keeping one wait per stream (a later kernel of a stream implies
// the earlier ones), so the lists stay as short as the streams. A finished kernel is still
// waited for: the engine's order is not virtual time, and a kernel done before this point of
// the interleaving may end after the host issues the waiting one (its end bounds the start).
void Engine::Impl::add_wait(WaitList& waits, uint32_t k) {
  for (uint32_t& w : waits) {
    if (kernels[w].stream == kernels[k].stream) {
      w = std::max(w, k);
      return;
    }
  }
  waits.push_back(k);
}

}  // namespace lockstep::sim

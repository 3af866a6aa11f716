// Footprints (EngineOptions::footprints; sim/strategy.h): the objects and actors a step touches,
// numbered, and the vector clocks of what each step and kernel happens after.
#include "sim/engine_impl.h"

#include <algorithm>
#include <mutex>
#include <span>
#include <stdexcept>

namespace lockstep::sim {

uint32_t FootprintIds::object(uint32_t kind, uint64_t key) {
  const std::lock_guard<std::mutex> lock(mutex_);
  auto& ids = objects_[kind];
  const auto [it, added] = ids.try_emplace(key, static_cast<uint32_t>(ids.size()));
  if (added) object_keys_[kind].push_back(key);
  return it->second;
}

uint64_t FootprintIds::object_key(uint32_t kind, uint32_t index) {
  const std::lock_guard<std::mutex> lock(mutex_);
  return object_keys_[kind].at(index);
}

std::pair<uint32_t, uint64_t> FootprintIds::actor_key(uint32_t actor, uint32_t first) {
  const std::lock_guard<std::mutex> lock(mutex_);
  return actor_keys_.at(actor - first);
}

uint32_t FootprintIds::name(std::string_view name) {
  const std::lock_guard<std::mutex> lock(mutex_);
  const auto [it, added] = names_.try_emplace(std::string(name), static_cast<uint32_t>(names_.size()));
  if (added) name_texts_.emplace_back(name);
  return it->second;
}

namespace {

constexpr uint32_t INDEX_MASK = (uint32_t{1} << OBJECT_KIND_SHIFT) - 1;

// Objects whose key holds a name's number in its low 32 bits (Engine::Impl::pack(rank, name)).
bool named(ObjectKind kind) { return kind == ObjectKind::STREAM || kind == ObjectKind::HANDLE; }
// Objects numbered by their rank, not through the ids (Engine::Impl::object).
bool by_rank(ObjectKind kind) { return kind == ObjectKind::ALIVE || kind == ObjectKind::PENDING; }

}  // namespace

FootprintIds::Portable FootprintIds::portable_object(uint32_t object) {
  const ObjectKind kind = object_kind(object);
  Portable p;
  p.kind = static_cast<uint32_t>(kind);
  if (by_rank(kind)) {
    p.key = object & INDEX_MASK;
    return p;
  }
  const std::lock_guard<std::mutex> lock(mutex_);
  p.key = object_keys_[p.kind].at(object & INDEX_MASK);
  if (named(kind)) {
    p.name = name_texts_.at(static_cast<uint32_t>(p.key));
    p.key &= ~uint64_t{0xffffffff};
  }
  return p;
}

uint32_t FootprintIds::local_object(const Portable& p) {
  const auto kind = static_cast<ObjectKind>(p.kind);
  if (by_rank(kind)) return (p.kind << OBJECT_KIND_SHIFT) | static_cast<uint32_t>(p.key & INDEX_MASK);
  const uint64_t key = named(kind) ? p.key | name(p.name) : p.key;
  return (p.kind << OBJECT_KIND_SHIFT) | object(p.kind, key);
}

FootprintIds::Portable FootprintIds::portable_actor(uint32_t actor) {
  const std::lock_guard<std::mutex> lock(mutex_);
  if (actor < threads_) return Portable{Portable::THREAD, actor, {}};
  const auto& [kind, key] = actor_keys_.at(actor - threads_);
  return Portable{kind, key, {}};
}

uint32_t FootprintIds::local_actor(const Portable& p) {
  if (p.kind == Portable::THREAD) return static_cast<uint32_t>(p.key);
  uint32_t first = 0;
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    first = threads_;
  }
  // Before an engine has said how many threads there are, no actor can be numbered.
  if (first == UINT32_MAX) throw std::logic_error("FootprintIds::local_actor before set_threads");
  return actor(p.kind, p.key, first);
}

void FootprintIds::set_threads(uint32_t threads) {
  const std::lock_guard<std::mutex> lock(mutex_);
  threads_ = threads;
}

uint32_t FootprintIds::actor(uint32_t kind, uint64_t key, uint32_t first) {
  const std::lock_guard<std::mutex> lock(mutex_);
  const auto [it, added] = actors_[kind].try_emplace(key, 0);
  if (added) {
    it->second = first + next_actor_++;
    actor_keys_.emplace_back(kind, key);
  }
  return it->second;
}

uint32_t Engine::Impl::object(ObjectKind kind, uint64_t key) {
  // A rank's liveness and unfinished kernels are numbered by the rank (the checker reads it
  // back: the steps of the rank that exits are alternatives of the exit).
  if (kind == ObjectKind::ALIVE || kind == ObjectKind::PENDING) {
    return (static_cast<uint32_t>(kind) << OBJECT_KIND_SHIFT) | static_cast<uint32_t>(key);
  }
  auto& ids = object_ids[static_cast<size_t>(kind)];
  const auto [it, added] = ids.try_emplace(key, 0);
  if (added) {
    const uint32_t index = options.ids != nullptr ? options.ids->object(static_cast<uint32_t>(kind), key)
                                                  : static_cast<uint32_t>(ids.size() - 1);
    it->second = (static_cast<uint32_t>(kind) << OBJECT_KIND_SHIFT) | index;
  }
  return it->second;
}

// The pairs (group, src, dst) of a p2p kernel (a wildcard receive's once matched).
uint64_t Engine::Impl::pair_key(uint32_t k) const {
  const Kernel& kernel = kernels[k];
  const uint32_t peer = kernel.op.peer >= 0 ? static_cast<uint32_t>(kernel.op.peer)
                                            : kernels[static_cast<size_t>(kernel.match)].rank;
  return kernel.op.kind == OpKind::SEND ? p2p_key(kernel.op.group, kernel.rank, peer)
                                        : p2p_key(kernel.op.group, peer, kernel.rank);
}

uint32_t Engine::Impl::channel_actor(uint32_t group, uint32_t src, uint32_t dst) {
  const uint64_t key = p2p_key(group, src, dst);
  const auto [it, added] = channel_actors.try_emplace(key, 0);
  if (added) it->second = options.ids != nullptr ? options.ids->actor(0, key, static_cast<uint32_t>(threads.size())) : next_actor++;
  return it->second;
}

uint32_t Engine::Impl::kernel_actor(uint32_t k) { return kernel_name_actor(kernel_name(k)); }

uint32_t Engine::Impl::kernel_name_actor(uint64_t name) {
  const auto [it, added] = kernel_actors.try_emplace(name, 0);
  if (added) it->second = options.ids != nullptr ? options.ids->actor(1, name, static_cast<uint32_t>(threads.size())) : next_actor++;
  return it->second;
}

// A clock's (actor, step) pairs.
std::span<const uint32_t> Engine::Impl::vclock_pairs(uint32_t vclock) const {
  return std::span<const uint32_t>(vclocks.data() + vclock + 1, 2 * size_t{vclocks[vclock]});
}

// A clock holding the pairs of vclock_buf (sorted by actor, one per actor), or `same` when it
// holds exactly those. Past MAX_VCLOCK_WORDS, the empty clock: forgetting an edge is safe
// for memory (the checker then meets a race it cannot reverse and explores more), running
// out of memory is not.
uint32_t Engine::Impl::vclock_make(uint32_t same) {
  const uint32_t n = vclocks[same];
  if (n * 2 == vclock_buf.size() &&
      std::equal(vclock_buf.begin(), vclock_buf.end(), vclocks.begin() + same + 1)) {
    return same;
  }
  if (vclocks.size() + vclock_buf.size() + 1 > MAX_VCLOCK_WORDS) return 0;
  const uint32_t made = static_cast<uint32_t>(vclocks.size());
  vclocks.push_back(static_cast<uint32_t>(vclock_buf.size() / 2));
  vclocks.insert(vclocks.end(), vclock_buf.begin(), vclock_buf.end());
  return made;
}

// Into vclock_buf: every step in clock `a` or in `pairs` ((actor, step) pairs by actor), the
// later step where both list an actor.
void Engine::Impl::vclock_merge(uint32_t a, std::span<const uint32_t> pairs) {
  vclock_buf.clear();
  const uint32_t na = vclocks[a];
  const size_t nb = pairs.size() / 2;
  size_t i = 0;
  size_t j = 0;
  while (i < na || j < nb) {
    const uint32_t ra = i < na ? vclocks[a + 1 + 2 * i] : UINT32_MAX;
    const uint32_t rb = j < nb ? pairs[2 * j] : UINT32_MAX;
    if (ra < rb) {
      vclock_buf.insert(vclock_buf.end(), {ra, vclocks[a + 2 + 2 * i]});
      ++i;
    } else if (rb < ra) {
      vclock_buf.insert(vclock_buf.end(), {rb, pairs[2 * j + 1]});
      ++j;
    } else {
      vclock_buf.insert(vclock_buf.end(), {ra, std::max(vclocks[a + 2 + 2 * i], pairs[2 * j + 1])});
      ++i;
      ++j;
    }
  }
}

// Every step either clock follows.
uint32_t Engine::Impl::vclock_join(uint32_t a, uint32_t b) {
  if (a == b || b == 0) return a;
  if (a == 0) return b;
  const std::span<const uint32_t> pairs = vclock_pairs(b);
  vclock_merge(a, pairs);
  if (std::equal(vclock_buf.begin(), vclock_buf.end(), pairs.begin(), pairs.end())) return b;
  return vclock_make(a);
}

// Gives every kernel of a rendezvous (a collective's members, new_group's calls) the join of
// their clocks.
void Engine::Impl::join_vclocks(const std::vector<int32_t>& members) {
  uint32_t vclock = 0;
  for (const int32_t k : members) vclock = vclock_join(vclock, kernel_vclock(static_cast<uint32_t>(k)));
  if (vclock == 0) return;
  for (const int32_t k : members) set_kernel_vclock(static_cast<uint32_t>(k), vclock);
}

// `vclock` and `actor`'s step `step` (an actor's steps only grow).
uint32_t Engine::Impl::vclock_with(uint32_t vclock, uint32_t actor, uint64_t step) {
  if (step >= UINT32_MAX) return vclock;  // past 2^32 steps: forget (see vclock_make)
  const uint32_t pair[2] = {actor, static_cast<uint32_t>(step)};
  vclock_merge(vclock, pair);
  return vclock_make(vclock);
}

// What a ready kernel's start happens after: its own clock, the kernel before it on its stream,
// and its dependencies (start_kernel keeps the join).
uint32_t Engine::Impl::start_vclock(uint32_t k) {
  const Kernel& kernel = kernels[k];
  uint32_t vclock = kernel_vclock(k);
  const uint32_t before = ranks[kernel.rank].head(kernel.stream).before_head;
  if (before != NO_INDEX) vclock = vclock_join(vclock, kernel_vclock(before));
  for (uint32_t i = 0; i < kernel.dep_count; ++i) vclock = vclock_join(vclock, kernel_vclock(dep(kernel, i)));
  return vclock;
}

}  // namespace lockstep::sim

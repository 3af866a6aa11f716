// The states a search has explored the future of (docs/semantics.md, "State cache"): 64-bit
// fingerprints in flat open-addressed tables, with each state's sleep set when it was not
// empty, and a summary of what the steps of its explored future touched.
#pragma once

#include <cstddef>
#include <cstdint>
#include <atomic>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "sim/strategy.h"

namespace lockstep::checker {

// What a set of steps touched, as two 64-bit masks of object hashes (a Bloom filter: a false
// conflict only explores more): what a read would conflict with (objects added or written),
// and what an add would (objects read or written). A write conflicts with either. A step that
// conflicts with every step sets every bit.
struct Summary {
  uint64_t against_read = 0;
  uint64_t against_add = 0;

  void add_footprint(std::span<const sim::Touch> footprint, bool universal);
  void merge(const Summary& other) {
    against_read |= other.against_read;
    against_add |= other.against_add;
  }
  // Whether a step with this footprint may conflict with one of the steps summarised.
  bool conflicts(std::span<const sim::Touch> footprint, bool universal) const;
  bool empty() const { return against_read == 0 && against_add == 0; }
};

// The same exactly, for --symmetry: a state's future is stored in the names of the state's
// canonical renaming and read back in those of a state that renames it, which a Bloom filter
// cannot be. (object, strongest access) sorted by object; past MAX_TOUCHES objects, every
// object.
struct FutureSet {
  std::vector<sim::Touch> touches;
  bool universal = false;

  void add(std::span<const sim::Touch> footprint, bool universal);
  void merge(const FutureSet& other) { add(other.touches, other.universal); }
  bool conflicts(std::span<const sim::Touch> footprint, bool universal) const;
  bool empty() const { return touches.empty() && !universal; }

  static constexpr size_t MAX_TOUCHES = 4096;
};

class StateCache {
 public:
  // `shared`: searches on several threads use it at once (check --jobs); a state then covers a
  // later visit only once its exploration is over (add_future), not while another thread is
  // still in it. (One search meets a state again only after its future is explored: a state
  // never repeats along one execution.)
  explicit StateCache(size_t max_states = DEFAULT_MAX_STATES, bool shared = false);

  // A visit of `state` (never 0) under the sleep set `sleep` (Option keys, sorted): false when
  // a visit before covered this one (its sleep set was a subset of this one's: it explored
  // every step this one would); true when the state must be explored, and then it is
  // remembered with the keys neither visit explored.
  bool visit(uint64_t state, std::span<const uint64_t> sleep);
  // The exploration of a state is over: what its future touched, merged into what is kept for
  // it (nothing when the state is not kept); and what a covered visit takes as its own future.
  void add_future(uint64_t state, const Summary& future);
  Summary future(uint64_t state) const;
  // The same with exact futures (--symmetry). Past MAX_SET_TOUCHES objects kept over all
  // states, a state's future is kept as every object.
  void add_future(uint64_t state, const FutureSet& future);
  FutureSet future_set(uint64_t state) const;
  static constexpr size_t MAX_SET_TOUCHES = size_t{1} << 23;  // 96 MiB

  size_t size() const;
  bool full() const;
  // Whether remembering more states may still pay: false from the moment USELESS_AFTER states
  // are kept with no visit covered yet. A search meets its repeated states early if it has any
  // (depth first, its first executions run to the end of the program, where they are), so one
  // that has met none in that many is one whose schedules all reach different states
  // (interleavings of host threads, say): the cache, and the engine's hashing of states, would
  // only cost time. The cache then stops: no visit is remembered or covered.
  bool useful() const { return !retired_.load(std::memory_order_relaxed); }
  // Whether useful() can still change (check --jobs gives work away only once it cannot, so
  // that the threads' timing does not decide it).
  bool decided() const {
    return retired_.load(std::memory_order_relaxed) || covered_.load(std::memory_order_relaxed) > 0;
  }

  static constexpr size_t DEFAULT_MAX_STATES = 8'000'000;  // 128 MiB of table, 256 MiB of futures at most
  static constexpr size_t USELESS_AFTER = size_t{1} << 16;

 private:
  // Held for a few hundred nanoseconds at a time: spinning costs less than a futex's sleep and
  // wake-up, which two threads on one cache otherwise pay at nearly every contended visit.
  class SpinLock {
   public:
    void lock() {
      while (locked_.exchange(true, std::memory_order_acquire)) {
        while (locked_.load(std::memory_order_relaxed)) pause();
      }
    }
    void unlock() { locked_.store(false, std::memory_order_release); }

   private:
    static void pause() {
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#endif
    }
    std::atomic<bool> locked_{false};
  };

  // A part of the table. Shared, the cache is 64 shards by a fingerprint's top bits, each with
  // its own lock, so that threads seldom wait for each other; otherwise one shard, no lock.
  struct Shard {
    mutable SpinLock lock;
    std::vector<bool> done;  // shared: per slot, its state's exploration is over
    std::vector<uint64_t> slots = std::vector<uint64_t>(1024, 0);
    size_t size = 0;
    bool full = false;
    std::unordered_map<uint64_t, std::vector<uint64_t>> sleep;  // states explored under a non-empty sleep set
    std::vector<Summary> futures;  // empty, or one per slot (16 more bytes a slot, from the first)
    std::unordered_map<uint64_t, FutureSet> future_sets;  // --symmetry

    bool insert(uint64_t state, size_t max_states);
    size_t find(uint64_t state) const;  // its slot, or slots.size()
    void grow();
  };
  static constexpr int SHARD_BITS = 6;

  Shard& shard_of(uint64_t state) const { return shards_[shards_.size() == 1 ? 0 : state >> (64 - SHARD_BITS)]; }

  bool shared_ = false;
  size_t max_states_per_shard_;
  // Every shard's states, and whether one is full: read after every execution (the search's
  // stats), kept here so that a read does not take every shard's lock.
  std::atomic<size_t> states_{0};
  std::atomic<bool> full_{false};
  std::atomic<uint64_t> covered_{0};  // visits a visit before covered
  std::atomic<bool> retired_{false};  // see useful()
  std::atomic<size_t> set_touches_{0};  // in every shard's future_sets
  mutable std::vector<Shard> shards_;
};

}  // namespace lockstep::checker

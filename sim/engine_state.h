// What one execution changes (ExecState): kernels, streams, ranks, host threads,
// communicators' collective slots and the p2p queues, with the constants and hashes they use.
// A checkpoint is a copy of it. Private to the engine (sim/engine*.cc).
#pragma once

#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <utility>
#include <vector>

#include "sim/engine.h"
#include "sim/engine_containers.h"

namespace lockstep::sim {

namespace engine_detail {

constexpr uint32_t NO_STREAM = UINT32_MAX;
constexpr uint32_t MAIN_STREAM = 0;
constexpr uint32_t NO_INDEX = UINT32_MAX;
constexpr uint32_t NO_RANK = UINT32_MAX;
constexpr uint64_t NO_KEY = UINT64_MAX;

// What a kernel needs to run, besides its times: a compute kernel's duration, or a
// collective's slot (comms[comm].slots[seq - 1]). Copies of what OpInstance and Kernel::seq
// hold, kept in the kernel's first cache line.
struct SlotRef {
  uint32_t comm;
  uint32_t seq;
};
union RunArg {
  int64_t duration_ns;  // COMPUTE
  SlotRef slot;         // collectives
};

// An issued operation. Device ops are kernels on a stream; host ops have no stream. The ops of
// an NCCL group are children of one composite kernel that holds their place on the stream, and
// are the kernels right after it.
struct alignas(64) Kernel {  // two cache lines exactly (static_asserts below)
  // User-provided, so that value-initialisation (emplace_back()) runs the member initialisers
  // only, without zeroing the whole struct first: that memset was a twelfth of a small
  // execution's time.
  Kernel() {}  // NOLINT(modernize-use-equals-default)

  // The first cache line: everything progress, starting and completing read and write of a
  // kernel (state, dependencies, place, times, causes, what it needs to run). At 16,384 ranks
  // a wave's kernels no longer fit in the cache, and a second line per kernel was a miss more
  // per start and per completion. The flags and `kind` and `run` are copies of what the second
  // line holds (index, parent, child_count, op).
  KernelState state = KernelState::QUEUED;
  bool comm = false;              // occupies a communication slot while it runs
  OpKind kind = OpKind::COMPUTE;  // op.kind
  bool waited : 1 = false;        // a host thread has blocked on it (its rank's Rank::wake)
  bool composite : 1 = false;     // an NCCL group's composite (index == NO_INDEX)
  bool in_group : 1 = false;      // parent >= 0
  bool has_children : 1 = false;  // child_count > 0
  uint32_t dep_count = 0;         // deps: kernels of the same rank that must be done first:
  uint32_t dep_begin = 0;         // dep_pool[dep_begin .. +dep_count], or the one itself (Impl::dep)
  uint32_t rank = 0;
  uint32_t stream = NO_STREAM;
  uint32_t next = NO_INDEX;       // the next kernel on its stream (Stream is a list through this)
  int32_t start_cause = -1;       // the kernel whose end set start_ns (-1: the issue time)
  int32_t end_cause = -1;         // the kernel whose start set end_ns (-1: its own start)
  int64_t issue_ns = 0;
  int64_t start_ns = -1;
  int64_t end_ns = -1;
  RunArg run = {0};
  // The second line: what issuing, matching, p2p, records and fingerprints read.
  int32_t match = -1;             // p2p: the matched kernel
  int32_t parent = -1;            // the NCCL group composite it belongs to
  uint32_t thread = 0;            // global thread index
  uint32_t index = NO_INDEX;      // position in the rank's issue order (NO_INDEX: a composite)
  uint32_t seq = 0;
  uint32_t child_count = 0;       // a composite's ops: the kernels after it (Impl::first_child)
  OpInstance op;
};
static_assert(offsetof(Kernel, match) == 64, "what a wave reads of a kernel is its first cache line");
static_assert(sizeof(Kernel) == 128, "a kernel is two cache lines, its hot fields in the first");

// A stream's kernels are a list through Kernel::next, in enqueue order: progress reads the head
// and the kernel before it (its end time is kept here), so that a wave over thousands of ranks
// touches no per-stream array (a vector of every kernel the stream ever held was a cache miss
// per stream per rank, and memory that grew with every op). What progress reads of a stream is
// its StreamHead, which the Rank keeps in its first cache line for its first two streams; the
// rest of a stream (Stream) is read when a kernel is enqueued on it.
struct StreamHead {
  uint32_t head = NO_INDEX;             // first kernel not done (NO_INDEX: none queued)
  uint32_t before_head = NO_INDEX;      // the done kernel before head (NO_INDEX: none)
  int64_t before_head_end_ns = 0;       // its end time
};

// Kernels to wait for, at most one per stream (Impl::add_wait): two in place, main's and one
// communicator stream's.
using WaitList = InlineVector<uint32_t, 2>;

struct Stream {
  uint32_t name = 0;                    // id in Impl::names
  uint32_t last = NO_INDEX;             // the last kernel enqueued (NO_INDEX: none ever)
  WaitList pending_waits;               // kernels the next enqueued kernel must wait for

  void reset(uint32_t name_id) {
    name = name_id;
    last = NO_INDEX;
    pending_waits.clear();
  }
};

// A rank's streams: the first two (main and one communicator's, the common case) in the Rank
// itself, so that a rank's first execution allocates nothing for them.
class StreamList {
 public:
  static constexpr uint32_t INLINE = 2;

  Stream& add() {
    if (size_ < INLINE) return first_[size_++];
    ++size_;
    return more_.add();
  }
  void clear() {
    size_ = 0;
    more_.clear();
  }
  uint32_t size() const { return size_; }
  Stream& operator[](size_t s) { return s < INLINE ? first_[s] : more_[s - INLINE]; }
  const Stream& operator[](size_t s) const { return s < INLINE ? first_[s] : more_[s - INLINE]; }

 private:
  Stream first_[INLINE];
  Recycled<Stream> more_;
  uint32_t size_ = 0;
};

// A first-in first-out queue of indices that keeps its memory across executions.
class Fifo {
 public:
  bool empty() const { return head_ == items_.size(); }
  void push_back(uint32_t value) { items_.push_back(value); }
  // The value `ahead` places after the front, NO_RANK past the end.
  uint32_t peek(size_t ahead) const { return head_ + ahead < items_.size() ? items_[head_ + ahead] : NO_RANK; }
  uint32_t pop_front() {
    const uint32_t value = items_[head_++];
    if (head_ == items_.size()) {
      clear();
    } else if (head_ >= 4096 && head_ * 2 >= items_.size()) {  // a long run that never drains
      items_.erase(items_.begin(), items_.begin() + static_cast<std::ptrdiff_t>(head_));
      head_ = 0;
    }
    return value;
  }
  void clear() {
    items_.clear();
    head_ = 0;
  }

 private:
  std::vector<uint32_t> items_;
  size_t head_ = 0;
};

// CHOOSING: the program waits at a `choose` for the engine's branch (a BRANCH option).
enum class ThreadState : uint8_t { RUNNABLE, BLOCKED, CHOOSING, DONE };

// Threads and their fibers are made once per engine and restarted for each execution.
struct Thread {
  // What a rank's progress reads (whether it can wake) first.
  ThreadState state = ThreadState::RUNNABLE;
  uint32_t rank = 0;
  InlineVector<uint32_t, 4> waits;  // kernels it is blocked on
  int64_t clock_ns = 0;
  uint32_t local = 0;              // index among its rank's threads
  uint64_t position = 0;           // a hash of its path through its program: the actions it
                                   // took and the branches it chose (state fingerprints)
  uint32_t vclock = 0;             // the steps its next step follows (ExecState::vclocks)
  uint32_t issued = 0;             // ops it issued: its next op's index among them (kernel names)
  uint64_t choose_key = NO_KEY;    // CHOOSING at an agreed choice: its (communicator, k) key
};

// A rank's threads: consecutive global thread indices (the engine makes them rank by rank).
struct ThreadRange {
  uint32_t first = 0;
  uint32_t count = 0;

  struct Iterator {
    uint32_t t;
    uint32_t operator*() const { return t; }
    Iterator& operator++() {
      ++t;
      return *this;
    }
    bool operator!=(const Iterator& other) const { return t != other.t; }
  };
  Iterator begin() const { return {first}; }
  Iterator end() const { return {first + count}; }
  size_t size() const { return count; }
  bool empty() const { return count == 0; }
  uint32_t operator[](size_t i) const { return first + static_cast<uint32_t>(i); }
};

// What a rank keeps per group, in one array over all (rank, group) pairs (Impl::rank_group):
// four vectors per rank were four allocations per rank in an execution's first reset.
struct RankGroup {
  uint32_t stream = NO_STREAM;  // the group's default stream, NO_STREAM until used
  uint32_t coll_seq = 0;        // collectives issued
  uint32_t agreed_seq = 0;      // agreed chooses reached
  bool created = false;         // a new_group made it usable here
};

// What the progress of every rank in a wave reads of it: one cache line. After a collective
// over N ranks completes, progress visits all N; at 16,384 ranks what it reads of each is no
// longer in the L2 cache when it comes back, and every line more per rank is a miss more.
struct RankHot {
  static constexpr uint32_t INLINE_STREAMS = 2;  // main and one communicator's, in the common case

  RankStatus status = RankStatus::RUNNING;
  bool wake = false;               // a kernel one of its threads blocked on is done: progress
                                   // looks at its threads (Kernel::waited)
  uint32_t live_threads = 0;
  uint32_t running_comm = 0;       // comm kernels running (kept when Impl::count_comm)
  ThreadRange threads;             // fixed by the scenario
  uint32_t stream_count = 0;       // streams.size()
  StreamHead heads[INLINE_STREAMS];  // of streams 0 and 1 (Rank::head)
  uint32_t issued = 0;
  uint32_t new_groups = 0;         // new_group calls made
};
static_assert(sizeof(RankHot) == 64, "what a wave reads of a rank is one cache line");

struct alignas(64) Rank : RankHot {
  StreamHead& head(uint32_t s) { return s < INLINE_STREAMS ? heads[s] : more_heads[s - INLINE_STREAMS]; }
  const StreamHead& head(uint32_t s) const {
    return s < INLINE_STREAMS ? heads[s] : more_heads[s - INLINE_STREAMS];
  }

  // Cold.
  std::vector<StreamHead> more_heads;  // of streams 2, 3, ...
  StreamList streams;              // streams[0] is main
  InlineVector<std::pair<uint32_t, uint32_t>, 1> named_streams;  // name id -> stream, all but main
  std::vector<std::pair<uint32_t, uint32_t>> handles;  // async handle (name id) -> its latest kernel
  std::vector<uint32_t> launch_order;  // comm kernels not yet started, in launch order
  int64_t end_ns = 0;
  // Every thread has ended and the process waits for its GPU work before it exits (a thread's
  // end does not wait): the last kernel of each stream, until all are done (then FINISHED).
  bool ending = false;
  InlineVector<uint32_t, 4> end_waits;
  uint32_t last_thread = 0;  // the thread that ended last (the event log's "finished")
  // Under footprints and comm_concurrency: the steps the rank's free slots happen after (the
  // completions that freed them): what a START needs besides its kernel.
  uint32_t slot_vclock = 0;
};

// The k-th collective of a communicator (or the k-th new_group over world).
struct CollSlot {
  std::vector<int32_t> kernels;  // per member position, -1 until issued
  uint32_t issued = 0;
  uint32_t running = 0;
  uint32_t done = 0;             // members whose kernel is done (kept when track_state)
  int32_t first = -1;            // the first kernel issued
  bool mismatched = false;       // members issued different ops: it never completes
  uint32_t group = 0;            // a collective's GroupDef (not kept for new_group)
  int32_t latest_position = 0;   // of the running members, the lowest position whose start is
  int64_t latest_start_ns = 0;   // the latest, and that start (0 and 0 before any)

  void reset() {
    kernels.clear();
    issued = running = done = 0;
    first = -1;
    mismatched = false;
    group = 0;
    latest_position = 0;
    latest_start_ns = 0;
  }
};

struct Comm {
  Recycled<CollSlot> slots;      // slots[seq - 1]
  size_t complete_prefix = 0;    // slots before it are complete everywhere (state fingerprints)

  void reset() {
    slots.clear();
    complete_prefix = 0;
  }
};

inline uint64_t p2p_key(uint32_t group, uint32_t src, uint32_t dst) {
  return (static_cast<uint64_t>(group) << 42) | (static_cast<uint64_t>(src) << 21) | dst;
}
constexpr uint64_t P2P_RANK_MASK = (uint64_t{1} << 21) - 1;  // a p2p_key's dst

inline uint64_t mix(uint64_t x) {  // splitmix64's finaliser
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// The unmatched sends of one (group, src, dst), or receives of one (group, dst), in order.
struct P2pQueue {
  uint64_t key = 0;
  uint32_t slot = 0;                // its place in P2pTable::slots_
  uint32_t sent = 0;                // sends issued on the key: the last one's sequence number
  std::vector<uint32_t> items;
  size_t head = 0;                  // items[head..] are unmatched, oldest first

  bool empty() const { return head == items.size(); }
  uint32_t front() const { return items[head]; }
  void pop_front() { ++head; }
  void push_back(uint32_t k) { items.push_back(k); }
  const uint32_t* begin() const { return items.data() + head; }
  const uint32_t* end() const { return items.data() + items.size(); }
};

// P2pQueues by key: open addressing over entries that are reused across executions; clear()
// forgets the keys and keeps the queues' memory (the unordered_map of deques it replaces
// allocated afresh in every execution). Iteration order is insertion order.
class P2pTable {
 public:
  const P2pQueue* find(uint64_t key) const {
    const size_t mask = slots_.size() - 1;
    for (size_t i = home(key); ; i = (i + 1) & mask) {
      if (slots_[i] == 0) return nullptr;
      if (entries_[slots_[i] - 1].key == key) return &entries_[slots_[i] - 1];
    }
  }
  P2pQueue* find(uint64_t key) { return const_cast<P2pQueue*>(std::as_const(*this).find(key)); }
  // The key's queue, made empty on first use.
  P2pQueue& get(uint64_t key) {
    if (P2pQueue* found = find(key)) return *found;
    if ((used_ + 1) * 2 > slots_.size()) grow();
    if (used_ == entries_.size()) entries_.emplace_back();
    P2pQueue& queue = entries_[used_++];
    queue.key = key;
    queue.sent = 0;
    queue.items.clear();
    queue.head = 0;
    place(used_ - 1);
    return queue;
  }
  void clear() {
    for (size_t e = 0; e < used_; ++e) slots_[entries_[e].slot] = 0;
    used_ = 0;
  }
  const P2pQueue* begin() const { return entries_.data(); }
  const P2pQueue* end() const { return entries_.data() + used_; }

 private:
  // Fibonacci hashing: one multiply spreads the packed (group, src, dst) keys well.
  size_t home(uint64_t key) const { return static_cast<size_t>((key * 0x9e3779b97f4a7c15ULL) >> shift_); }
  void place(size_t e) {
    const size_t mask = slots_.size() - 1;
    size_t i = home(entries_[e].key);
    while (slots_[i] != 0) i = (i + 1) & mask;
    slots_[i] = static_cast<uint32_t>(e + 1);
    entries_[e].slot = static_cast<uint32_t>(i);
  }
  void grow() {
    slots_.assign(slots_.size() * 2, 0);
    --shift_;
    for (size_t e = 0; e < used_; ++e) place(e);
  }

  std::vector<uint32_t> slots_ = std::vector<uint32_t>(16, 0);  // entry index + 1; 0 empty
  int shift_ = 64 - 4;                                            // 64 - log2(slots_.size())
  std::vector<P2pQueue> entries_;
  size_t used_ = 0;
};

inline bool is_communication(OpKind kind) { return is_collective(kind) || is_p2p(kind); }

}  // namespace engine_detail

// The engine's types are used unqualified in sim/engine*.cc, the only files that include this.
using namespace engine_detail;  // NOLINT(google-build-using-namespace)

// Everything an execution changes, as one value: a checkpoint is a copy of it
// (EngineOptions::checkpoints), with the programs' snapshots. What the engine keeps across
// executions (scenario tables, interned names, the programs themselves) is Engine::Impl's.
struct ExecState {
  std::vector<Rank> ranks;
  std::vector<RankGroup> rank_groups;  // [rank * groups + group]
  std::vector<Thread> threads;      // made once, restarted by reset()
  ChunkedArray<Kernel> kernels;
  BigVector<uint32_t> dep_pool;     // Kernel::dep_begin/dep_count index this
  std::vector<Comm> comms;            // per communicator (comm_id)
  Comm new_group_calls;               // the k-th new_group of every rank
  // Mismatches met so far (docs/semantics.md, "Matching"): collective slots as (communicator,
  // seq), UINT32_MAX for new_group's; p2p pairs by their send. The execution goes on (their
  // ops never complete) and ends MISMATCH, reporting the canonical one of the final state.
  std::vector<std::pair<uint32_t, uint32_t>> mismatched_slots;
  std::vector<uint32_t> mismatched_sends;
  // all_to_all_single's split sizes, each op's as n, its n sizes sent, its n received; the op's
  // OpInstance::duration_ns holds where they start.
  std::vector<int64_t> split_values;
  P2pTable send_queue;                // (group, src, dst): unmatched sends, sends issued
  P2pTable recv_queue;                // (group, 0, dst): unmatched receives
  std::unordered_map<uint64_t, uint32_t> agreed_branch;           // (comm, k) -> branch
  Fifo ready;                         // eager runnable threads
  Fifo dirty_ranks;                   // ranks whose kernels/threads need re-examination
  std::vector<bool> dirty_flag;
  uint32_t progressing = NO_RANK;    // the rank progress_rank is working on
  std::vector<Option> options_buf;
  // For state fingerprints (track_state), kept as kernels change so that a fingerprint reads
  // only what is live: the kernels not done (by live_pos), and the done ones that ran
  // past the watchdog (their record is history the verdict reads).
  std::vector<uint32_t> live_kernels;
  std::vector<uint32_t> live_pos;  // by kernel: its place in live_kernels while not done
  std::vector<uint32_t> timed_out;
  // A live kernel's term of the fingerprint, remembered with every input of it that can still
  // change: most live kernels are queued and untouched from one choice point to the next.
  struct KernelHash {
    uint64_t hash = 0;
    int64_t start_ns = 0;
    int64_t end_ns = 0;
    int32_t match = 0;
    uint32_t stream = 0;
    uint32_t seq = 0;
    uint32_t dep_count = 0;
    uint32_t child_count = 0;
    uint32_t done_refs = 0;  // of its dependencies and match, those done (done is final)
    KernelState state = KernelState::QUEUED;
    bool valid = false;
  };
  std::vector<KernelHash> kernel_hashes;  // by kernel
  // Vector clocks (EngineOptions::footprints; sim::Step::after): the steps a thread's next step
  // or a kernel happens after through the engine (a thread's own steps, wake-ups, kernels that
  // had to start or finish first), as each actor's latest step, by its index among the
  // execution's steps. Immutable, in one arena: a clock is an offset into it, holding n, then n
  // (actor, step) pairs by actor; 0 is the empty clock (no step known). Every edge they hold is
  // real; what happened before the first step is left out.
  std::vector<uint32_t> vclocks;
  std::vector<uint32_t> kernel_vclocks;  // by kernel; past the end: 0
  // Per kernel, its index among its thread's ops: with the thread, its name on every path
  // (kernel_name).
  std::vector<uint32_t> kernel_local;
  uint64_t steps = 0;  // steps taken (choices and lone options): the next step's index
  ExecutionResult result;
  bool stopped = false;
  uint64_t ops_issued = 0;
  int64_t longest_comm_ns = 0;  // the longest a finished communication kernel ran (timeouts)
};

}  // namespace lockstep::sim

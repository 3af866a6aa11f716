// Engine::Impl: the engine of sim/engine.h, its state kept across executions and its
// member functions, each concern in a file of its own (listed below by section). Private to the
// engine: included by sim/engine*.cc only.
#pragma once

#include <algorithm>
#include <cassert>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "sim/engine.h"
#include "sim/engine_state.h"
#include "sim/interpreter.h"

namespace lockstep::sim {

struct Engine::Impl : ExecState {
  const Scenario& sc;
  EngineOptions options;
  StackPool stacks;
  std::optional<Diagnostic> setup_error;  // a bound the engine cannot be built within (run() reports it)
  std::vector<std::vector<int32_t>> member_pos;  // per group: rank -> position in its comm, -1
  std::vector<uint32_t> comm_base;               // per group: id of its first communicator
  uint32_t comm_count = 0;
  // Stream and handle names, interned: ids are what streams, handles and state fingerprints
  // hold, so that no execution builds or hashes a string. Kept across executions.
  std::deque<std::string> names;                            // by id; stable addresses
  std::unordered_map<std::string_view, uint32_t> name_ids;  // views into `names`
  std::vector<uint32_t> group_stream_name;                  // per group: "comm:GROUP"
  std::unordered_map<uint64_t, uint32_t> pair_stream_names;  // p2p_key(group, a, b): "comm:G:p2p:a-b"

  Strategy* strategy = nullptr;
  std::vector<uint32_t> vclock_buf;  // scratch of the vector clocks' joins
  std::vector<std::unique_ptr<ProgramFiber>> fibers;  // by thread
  std::vector<std::string> thread_names;               // by thread
  std::vector<uint32_t> thread_stream_names;           // by thread: its current stream's name
  std::vector<uint32_t> footprint_names;               // by name id: footprint_name's (UINT32_MAX: not asked yet)
  // Rank::running_comm is read only under comm_concurrency and by state fingerprints: kept only
  // then, so that completing a collective's kernels does not read every member's Rank.
  const bool count_comm;
  // Per rank: some thread of it can reach `exit` or `crash` (its unfinished kernels are then
  // objects of footprints: ObjectKind::PENDING).
  std::vector<bool> rank_may_exit;
  bool any_may_exit = false;
  bool has_wildcards = false;  // some program has `recv: {from: any}` (ObjectKind::AVAIL)
  // Footprints (EngineOptions::footprints): objects and actors by key, ids kept across executions.
  std::unordered_map<uint64_t, uint32_t> object_ids[16];  // by ObjectKind
  std::unordered_map<uint64_t, uint32_t> channel_actors;  // p2p_key(group, src, dst): MATCH
  std::unordered_map<uint64_t, uint32_t> kernel_actors;   // kernel_name: START
  uint32_t next_actor = 0;                                // after the threads
  // The step being taken: what it touches (direct: while its own action is applied; the rest
  // of the kinds while what it set off runs too) and what it happened after.
  std::vector<Touch> touches;
  bool direct = false;
  bool step_pending = false;
  Option step_option;
  uint32_t step_after = 0;  // a clock
  // The event log by level: null unless the log is on at that level or finer, so that each
  // hook in the engine costs one pointer test when logging is off.
  EventLog* log_warn = nullptr;
  EventLog* log_info = nullptr;
  EventLog* log_debug = nullptr;

  Impl(const Scenario& scenario, EngineOptions opts);

  // -------------------------------------------------------------------------------------------
  // Footprints (EngineOptions::footprints; sim/strategy.h).
  // Defined in sim/engine_footprints.cc; intern and find_name in sim/engine_streams.cc.
  uint32_t object(ObjectKind kind, uint64_t key);
  static uint64_t pack(uint64_t a, uint64_t b) { return (a << 32) | b; }

  // Touches by the step's own action (a thread's op, a match, a start), not by what it sets off.
  void touch(ObjectKind kind, uint64_t key, Access access) {
    if (direct) touches.push_back(Touch{object(kind, key), access});
  }
  // Touches by what a step sets off too (sends starting, kernels of ranks that may exit, exits).
  // `cause`: a clock of what the effect happened after (Touch::cause): a step in it is not a
  // race of this one through the object, since without it the effect would not be.
  void touch_always(ObjectKind kind, uint64_t key, Access access, uint32_t cause) {
    if (options.footprints && step_pending) touches.push_back(Touch{object(kind, key), access, cause});
  }
  // A name's id in footprint keys and state fingerprints: the engine's own (names are interned
  // in the order the engine meets them), or with shared EngineOptions::ids, the one every
  // engine sharing them uses.
  uint32_t footprint_name(uint32_t id) {
    if (options.ids == nullptr) return id;
    if (id >= footprint_names.size()) footprint_names.resize(id + 1, UINT32_MAX);
    if (footprint_names[id] == UINT32_MAX) footprint_names[id] = options.ids->name(names[id]);
    return footprint_names[id];
  }
  void touch_stream(uint32_t r, uint32_t s, Access access) {
    if (!direct) return;
    touch(ObjectKind::STREAM, pack(r, footprint_name(ranks[r].streams[s].name)), access);
    if (access != Access::READ) touch(ObjectKind::STREAMS, r, Access::ADD);
  }
  // What an exit or crash aborts, and what a step that joins, pairs, starts or completes a
  // kernel reads of it (only when some rank may exit): a collective's slot (communicator, k),
  // the sends from one rank to another on a group (their pairs), or a rank's other kernels.
  // Joining and pairing touch the slot or the pairs whether or not the peer has issued its op
  // yet: a step that ends the peer does not commute with them in either order.
  uint64_t slot_key(uint32_t comm, uint32_t seq) const { return pack(comm, seq); }
  void touch_kernel(uint32_t k) {
    if (!any_may_exit) return;
    const Kernel& kernel = kernels[k];
    const uint32_t cause = kernel_vclock(k);
    if (kernel.composite || kernel.index == NO_INDEX) return;  // its ops are touched one by one
    if (is_collective(kernel.op.kind)) {
      touch_always(ObjectKind::SLOT, slot_key(kernel.run.slot.comm, kernel.seq), Access::ADD, cause);
    } else if (kernel.op.kind == OpKind::NEW_GROUP) {
      touch_always(ObjectKind::SLOT, slot_key(UINT32_MAX, kernel.seq), Access::ADD, cause);
    } else if (is_p2p(kernel.op.kind) && (kernel.op.peer >= 0 || kernel.match >= 0)) {
      touch_always(ObjectKind::PAIRS, pair_key(k), Access::ADD, cause);
    } else if (rank_may_exit[kernel.rank]) {
      touch_always(ObjectKind::PENDING, kernel.rank, Access::ADD, cause);
    }
  }
  uint64_t pair_key(uint32_t k) const;
  // Under comm_concurrency (START steps), kernel k is issued, started or completed: what may
  // make another of its rank ready for a slot, which a START that takes the last slot disables.
  void touch_slots(uint32_t k) {
    if (sc.semantics.comm_concurrency > 0 && !sc.semantics.launch_order_implicit) {
      touch_always(ObjectKind::SLOTS, kernels[k].rank, Access::ADD, kernel_vclock(k));
    }
  }
  uint32_t channel_actor(uint32_t group, uint32_t src, uint32_t dst);
  uint32_t kernel_actor(uint32_t k);

  static constexpr uint32_t MAIN_NAME = 0;
  static constexpr uint32_t NO_NAME = UINT32_MAX;
  uint32_t intern(std::string_view name);
  uint32_t find_name(std::string_view name) const;

  RankGroup& rank_group(uint32_t r, uint32_t group) { return rank_groups[size_t{r} * sc.groups.size() + group]; }
  const RankGroup& rank_group(uint32_t r, uint32_t group) const {
    return rank_groups[size_t{r} * sc.groups.size() + group];
  }

  // A composite's first op (0 when it has none, as the field this replaces was).
  uint32_t first_child(uint32_t composite) const { return kernels[composite].child_count > 0 ? composite + 1 : 0; }

  // The i-th dependency of a kernel (Kernel::dep_begin).
  uint32_t dep(const Kernel& kernel, uint32_t i) const {
    return kernel.dep_count == 1 ? kernel.dep_begin : dep_pool[kernel.dep_begin + i];
  }

  uint32_t comm_id(uint32_t group, uint32_t rank) const {
    return comm_base[group] + static_cast<uint32_t>(sc.groups[group].comm_of_rank[rank]);
  }
  const std::vector<int32_t>& members(uint32_t group, uint32_t rank) const {
    return *sc.groups[group].comm_for(static_cast<int32_t>(rank));
  }
  bool alive(uint32_t r) const {
    return ranks[r].status != RankStatus::EXITED && ranks[r].status != RankStatus::CRASHED;
  }
  const Link& link_of(uint32_t group) const {
    if (group < sc.group_link.size() && sc.group_link[group]) return *sc.group_link[group];
    return sc.link;
  }

  // -------------------------------------------------------------------------------------------
  // Setup and the main loop.
  // The constructor, reset and stack_mapping_problem are in sim/engine_setup.cc, the rest in
  // sim/engine.cc.
  void reset();
  std::optional<Diagnostic> stack_mapping_problem(size_t guarded, size_t unguarded) const;
  ExecutionResult run(Strategy& chooser);
  void drain();

  // After a collective over thousands of ranks completes, progress visits each of them in turn,
  // and what it reads of each (its Rank's first line, the kernels at and after the heads of its
  // streams) lies at scattered addresses: at 16,384 ranks none of it is still in the cache. So
  // the queue is read ahead and those lines are prefetched in three steps, each reading only
  // what the one before fetched a few ranks earlier, so that the misses of several ranks
  // overlap. A hint only: what the engine does is unchanged.
  static constexpr size_t PREFETCH_STEP = 3;  // ranks between two steps

  // A kernel's first line: all that starting and completing a compute kernel or a collective
  // read (Kernel).
  void prefetch_kernel(uint32_t k) const { prefetch(&kernels[k]); }
  void prefetch_progress(const Fifo& queue) const;

  // A thread steps without a choice when it is its rank's only thread. (The threads of a rank
  // with several stay actors to their end, each step a choice, even when the others have ended:
  // a step that made the last other thread's end turn the rest into eager steps would take them
  // into its own footprint and order them against everything they touch.)
  bool is_eager(uint32_t t) const { return ranks[threads[t].rank].threads.size() == 1; }

  void schedule_thread(uint32_t t) {
    if (threads[t].state == ThreadState::RUNNABLE && is_eager(t)) ready.push_back(t);
  }

  void mark_dirty(uint32_t r) {
    if (r == progressing) return;  // progress_rank loops until nothing changes
    if (!dirty_flag[r]) {
      dirty_flag[r] = true;
      dirty_ranks.push_back(r);
    }
  }
  size_t ask(std::vector<Option>& opts, uint64_t state);

  // -------------------------------------------------------------------------------------------
  // Checkpoints (EngineOptions::checkpoints, docs/engine-performance.md): the state at a quiescent
  // choice point the strategy will come back to, taken just before the pick is applied. An
  // execution whose schedule shares the first `resume_depth` choices with the last one starts from
  // the deepest checkpoint within them and asks its point again. Valid checkpoints form a chain
  // along the last execution's path, by index; those past the shared prefix are dropped when an
  // execution starts.
  // Defined in sim/engine_checkpoints.cc.

  struct Checkpoint {
    uint64_t index = 0;  // result.choice_points at the point
    uint64_t fingerprint = 0;
    size_t bytes = 0;
    ExecState state;
    std::vector<ProgramFiber::Snapshot> programs;  // by thread
  };
  std::vector<Checkpoint> checkpoints;  // slots, reused: [0, checkpoint_count) are valid
  size_t checkpoint_count = 0;
  size_t checkpoint_bytes = 0;  // of the valid ones
  size_t state_bytes() const;
  void save_checkpoint(uint64_t fingerprint);
  const Checkpoint* resume_point(uint64_t depth);
  void restore(const Checkpoint& cp);

  // -------------------------------------------------------------------------------------------
  // Vector clocks (ExecState::vclocks), kept only under footprints.
  // Defined in sim/engine_footprints.cc.

  static constexpr size_t MAX_VCLOCK_WORDS = size_t{1} << 24;  // 64 MiB; past it, joins forget

  uint32_t kernel_vclock(uint32_t k) const { return k < kernel_vclocks.size() ? kernel_vclocks[k] : 0; }
  void set_kernel_vclock(uint32_t k, uint32_t vclock) {
    if (k >= kernel_vclocks.size()) {
      if (vclock == 0) return;
      kernel_vclocks.resize(k + 1, 0);
    }
    kernel_vclocks[k] = vclock;
  }
  std::span<const uint32_t> vclock_pairs(uint32_t vclock) const;
  uint32_t vclock_make(uint32_t same);
  void vclock_merge(uint32_t a, std::span<const uint32_t> pairs);
  uint32_t vclock_join(uint32_t a, uint32_t b);
  void join_vclocks(const std::vector<int32_t>& members);
  uint32_t vclock_with(uint32_t vclock, uint32_t actor, uint64_t step);
  uint32_t start_vclock(uint32_t k);

  // -------------------------------------------------------------------------------------------
  // Choice points and steps.
  // Defined in sim/engine.cc.
  bool choose_and_apply();
  bool decide(uint64_t fingerprint);
  void report_step();

  // -------------------------------------------------------------------------------------------
  // State fingerprints (EngineOptions::track_state): a hash of everything that decides the
  // future of the execution, taken at quiescent choice points, for the checker's state cache.
  // It must never give two states with different futures the same value; it may give two
  // equivalent states different values (that only prunes less). Kernels are named by what
  // issued them (rank, issue index), never by their slot in `kernels` (an artefact of the
  // global interleaving); a reference to a finished kernel is its end time, which is all that
  // a later start, wait or clock reads from it.
  // Defined in sim/engine_checkpoints.cc.

  struct Hasher {
    uint64_t h = 0x6c6f636b73746570ULL;
    void add(uint64_t v) { h = mix(h ^ v); }
    void add_signed(int64_t v) { add(static_cast<uint64_t>(v)); }
  };
  uint64_t kernel_name(uint32_t k) const;
  uint64_t kernel_ref(uint32_t k) const;
  // The same under the renaming of symmetric ranks chosen for the fingerprint being taken
  // (canon; the identity without symmetric ranks).
  uint64_t canon_kernel_name(uint32_t k) const;
  uint64_t canon_kernel_ref(uint32_t k) const;
  void hash_live_kernel(uint32_t k, Hasher& out) const;
  uint64_t hash_kernel(uint32_t k) const;
  uint64_t live_kernel_hash(uint32_t k);
  uint64_t state_fingerprint();
  // A collective slot's kernels (or their start times) in the order of the renamed members.
  template <typename F>
  void for_canon_members(const CollSlot& slot, uint32_t group, uint32_t rank, F&& f) const;

  // -------------------------------------------------------------------------------------------
  // Symmetric ranks (EngineOptions::symmetry). Defined in sim/engine_symmetry.cc.
  std::vector<std::vector<uint32_t>> rank_classes;  // of two ranks or more, ascending
  std::vector<uint32_t> canon;        // per rank: its name in the renaming chosen last
  std::vector<uint32_t> uncanon;      // per name: the rank it renames
  bool renamed = false;               // canon is not the identity
  std::string symmetry_note;          // why there are no classes, when asked for
  std::unordered_map<uint32_t, uint64_t> object_keys;  // the keys of objects renamed so far
  FootprintIds own_ids;               // options.ids when none is given (reverse lookups)
  struct SymmetryView final : Symmetry {
    Impl* impl = nullptr;
    std::span<const uint32_t> names() override {
      return impl->renamed ? std::span<const uint32_t>(impl->canon) : std::span<const uint32_t>();
    }
    std::span<const uint32_t> inverse_names() override {
      return impl->renamed ? std::span<const uint32_t>(impl->uncanon) : std::span<const uint32_t>();
    }
    uint64_t canonical_key(uint64_t key) override { return impl->canonical_key(key); }
    uint32_t rename_object(uint32_t object, std::span<const uint32_t> renaming) override {
      return impl->rename_object(object, renaming);
    }
  } symmetry_view;
  Symmetry* symmetry() { return rank_classes.empty() ? nullptr : &symmetry_view; }
  void find_rank_classes();
  void choose_renaming();  // canon for the state now
  uint32_t canon_rank(uint32_t r) const { return renamed ? canon[r] : r; }
  int64_t canon_peer(int32_t r) const { return r >= 0 && renamed ? canon[static_cast<uint32_t>(r)] : r; }
  uint32_t canon_thread(uint32_t t) const {
    if (!renamed) return t;
    const Thread& thread = threads[t];
    return ranks[canon[thread.rank]].threads.first + thread.local;
  }
  uint64_t canonical_key(uint64_t key);
  uint32_t rename_object(uint32_t object, std::span<const uint32_t> renaming);
  uint32_t kernel_name_actor(uint64_t name);  // kernel_actor by the kernel's name

  // -------------------------------------------------------------------------------------------
  // Host threads.
  // Defined in sim/engine_threads.cc.
  void advance_fiber(uint32_t t);
  void stop_with_error(ExecutionEnd end, Diagnostic diagnostic);

  // Virtual time is int64 nanoseconds: a time past it (a rank busy for more than 292 years) is
  // an error of the scenario at the op that reaches it, never a wrapped or clamped time that
  // would change the verdict. TIME_OVERFLOW marks such a time until the execution stops.
  static constexpr int64_t TIME_OVERFLOW = INT64_MAX;
  static int64_t time_after(int64_t start_ns, int64_t duration_ns) {
    int64_t end_ns = 0;
    if (__builtin_add_overflow(start_ns, duration_ns, &end_ns) || end_ns == TIME_OVERFLOW) return TIME_OVERFLOW;
    return end_ns;
  }
  void time_overflow(const OpInstance& op, uint32_t rank);
  void runtime_error(const OpInstance& op, std::string message);
  bool reach_choose(uint32_t t);
  bool apply_branch(uint32_t t, uint32_t branch, uint64_t key);
  void take_branch(uint32_t t, uint32_t branch);
  void continue_thread(uint32_t t);
  void end_thread(uint32_t t);
  void check_rank_end(uint32_t r);
  void wait_for_streams(uint32_t t, uint32_t only);
  void block_thread(uint32_t t);
  bool wake_if_done(uint32_t t);
  void step_thread(uint32_t t);
  bool count_op();
  bool within_bounds();
  void apply_op(uint32_t t, const OpInstance& op);
  void touch_link(uint32_t r, uint32_t s, uint32_t c, bool async);
  void launch(uint32_t r, uint32_t k);
  bool usable_group(uint32_t r, const OpInstance& op);
  uint32_t new_kernel(uint32_t t, const OpInstance& op);
  void finish_host_op(uint32_t k, int64_t end_ns);

  // The bookkeeping of state fingerprints (track_state): a new kernel is live...
  void track_live(uint32_t k) {
    if (!options.track_state) return;
    if (k >= kernel_hashes.size()) {
      kernel_hashes.resize(k + 1);
      live_pos.resize(k + 1);
    }
    live_pos[k] = static_cast<uint32_t>(live_kernels.size());
    live_kernels.push_back(k);
    kernel_hashes[k].valid = false;
  }

  // ...until it is done (kernels never leave DONE). A done kernel that ran past the watchdog
  // stays in the state, and a done slot member counts towards its slot's completion.
  void on_done(uint32_t k) {
    if (!options.track_state) return;
    const uint32_t last = live_kernels.back();
    live_kernels[live_pos[k]] = last;
    live_pos[last] = live_pos[k];
    live_kernels.pop_back();
    const Kernel& kernel = kernels[k];
    if (kernel.index == NO_INDEX) return;
    if (is_communication(kernel.op.kind) && kernel.end_ns - kernel.start_ns > sc.semantics.timeout_ns) {
      timed_out.push_back(k);
    }
    if (is_collective(kernel.op.kind)) {
      ++comms[comm_id(kernel.op.group, kernel.rank)].slots[kernel.seq - 1].done;
    } else if (kernel.op.kind == OpKind::NEW_GROUP) {
      ++new_group_calls.slots[kernel.seq - 1].done;
    }
  }

  // -------------------------------------------------------------------------------------------
  // Streams.
  // Defined in sim/engine_streams.cc.

  // By name id (NO_NAME: a name never interned, so found nowhere).
  template <typename Pairs>
  static auto find_named(Pairs& pairs, uint32_t name) -> decltype(&pairs.front().second) {
    for (auto& [key, value] : pairs) {
      if (key == name) return &value;
    }
    return nullptr;
  }

  static const uint32_t* find_stream(const Rank& rank, uint32_t name) {
    static constexpr uint32_t MAIN = MAIN_STREAM;
    if (name == MAIN_NAME) return &MAIN;
    return find_named(rank.named_streams, name);
  }
  uint32_t add_stream(Rank& rank, uint32_t name);
  uint32_t named_stream(Rank& rank, uint32_t name);
  uint32_t pair_stream_name(uint32_t group, uint32_t a, uint32_t b);
  uint32_t comm_stream(uint32_t r, const OpInstance& op);
  void enqueue(uint32_t r, uint32_t s, uint32_t k);
  void link_synchronous(uint32_t r, uint32_t s, uint32_t c, uint32_t k, bool async);
  uint32_t current_stream(uint32_t t);
  void add_wait(WaitList& waits, uint32_t k);

  // -------------------------------------------------------------------------------------------
  // Collectives, NCCL groups, new_group.
  // Defined in sim/engine_collectives.cc.
  void issue_collective(uint32_t k);
  void join_slot(Comm& comm, uint32_t seq, size_t size, size_t position, uint32_t k);
  MismatchInfo slot_mismatch(uint32_t id, uint32_t seq) const;
  std::string p2p_difference(uint32_t send, uint32_t recv) const;
  void report_mismatches();
  // How kernels a and b of one collective slot disagree ("size", "split sizes", ...), or empty;
  // for split sizes, `split` (if given) gets the pair and both sizes.
  std::string collective_difference(uint32_t a, uint32_t b, MismatchInfo* split = nullptr) const;
  // all_to_all_single: its split sizes, kept in split_values when its kernel is made.
  uint32_t keep_splits(std::span<const int64_t> splits);
  std::span<const int64_t> send_splits(const OpInstance& op) const {
    const auto at = static_cast<size_t>(op.duration_ns);
    return {split_values.data() + at + 1, static_cast<size_t>(split_values[at])};
  }
  std::span<const int64_t> recv_splits(const OpInstance& op) const {
    const auto at = static_cast<size_t>(op.duration_ns);
    const auto n = static_cast<size_t>(split_values[at]);
    return {split_values.data() + at + 1 + n, n};
  }
  MismatchInfo mismatch_of(const std::string& field, uint32_t a, uint32_t b) const;
  void issue_nccl_group(uint32_t t, const std::vector<OpInstance>& ops);
  void issue_new_group(uint32_t t, const OpInstance& op);

  // -------------------------------------------------------------------------------------------
  // Point to point.
  // Defined in sim/engine_p2p.cc.
  void issue_p2p(uint32_t k);
  void match_receives(uint32_t group, uint32_t dst);
  void pair_p2p(uint32_t send, uint32_t recv);
  void collect_wildcard_options();
  void apply_wildcard(const Option& option, uint64_t step);

  // -------------------------------------------------------------------------------------------
  // Kernel progress.
  // Defined in sim/engine_progress.cc.
  void progress_rank(uint32_t r);
  bool startable(uint32_t k) const;
  bool start_is_eager(uint32_t r, uint32_t k) const;
  void collect_start_options();
  int64_t ready_time(uint32_t k, int32_t* cause = nullptr) const;
  void start_kernel(uint32_t k);
  void on_running(uint32_t k);
  void complete(uint32_t k, int64_t end_ns);
  void maybe_complete_group(uint32_t composite);
  void complete_collective(uint32_t comm, uint32_t seq);
  void try_complete_p2p(uint32_t k);
  int64_t p2p_cost(const Kernel& send) const;

  bool is_eager(const Kernel& send) const {
    return sc.semantics.sends_eagerly(send.op.size_bytes);
  }
  void terminate_rank(uint32_t r, RankStatus status, int64_t at_ns, uint32_t cause);

  // -------------------------------------------------------------------------------------------
  // Initialisation (`launch:`; docs/semantics.md, "Initialisation"). Deterministic and before
  // any program: every process calls init_process_group, a blocking rendezvous over the world.
  // A process whose rank is outside its own world size raises and never joins (NCCL:
  // "Invalid rank requested"); the others check in with the process of rank 0 (the TCPStore
  // master and NCCL bootstrap root), which rejects a different world size, backend or init
  // method and a rank that already checked in (NCCL: "mismatch in rank count", "rank R of N
  // ranks has already checked in") — a `mismatch`; a rank no process joins as leaves everyone
  // waiting — a `hang`. Returns whether the programs may run.
  // Defined in sim/engine_launch.cc.
  OpRecord init_record(uint32_t p) const;
  std::string thread_name_of(uint32_t r) const;
  bool run_init();
  bool end_init(const std::vector<uint32_t>& joined, bool ok);

  // -------------------------------------------------------------------------------------------
  // The event log (EngineOptions::log; docs/logging.md).
  // Defined in sim/engine_log.cc.
  static void append_ms(std::string& out, int64_t ns);
  void describe(std::string& out, const Kernel& kernel) const;
  std::string_view stream_name(const Kernel& kernel) const;
  static bool is_sync_point(OpKind kind);
  void log_issue(uint32_t k);
  void log_kernel(uint32_t k, std::string_view what, int64_t at_ns);
  void log_slot_matched(const CollSlot& slot);
  void log_outcome();

  // -------------------------------------------------------------------------------------------
  // The end of an execution.
  // Defined in sim/engine_result.cc.
  OpRecord record_of(uint32_t k) const;
  void finish();
  void find_timeouts();
  void sort_stuck();
  void queued_behind(uint32_t k, StuckOp& stuck) const;
  void explain_wait(const Kernel& kernel, StuckOp& stuck) const;
};

}  // namespace lockstep::sim

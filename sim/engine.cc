#include "sim/engine.h"

#include <algorithm>
#include <cassert>
#include <deque>
#include <string>
#include <unordered_map>
#include <utility>

#include <fmt/format.h>

#include "sim/cost.h"
#include "sim/interpreter.h"

namespace lockstep::sim {

std::string_view rank_status_name(RankStatus status) {
  switch (status) {
    case RankStatus::RUNNING: return "running";
    case RankStatus::BLOCKED: return "blocked";
    case RankStatus::FINISHED: return "finished";
    case RankStatus::EXITED: return "exited";
    case RankStatus::CRASHED: return "crashed";
  }
  return "?";
}

std::string unsupported_semantics(const Scenario& scenario) {
  if (scenario.semantics.comm_concurrency != 0) {
    return fmt::format("semantics comm_concurrency: {} is not modelled yet (only unlimited, 0)",
                       scenario.semantics.comm_concurrency);
  }
  if (scenario.semantics.p2p_comm == P2pComm::PAIR) return "semantics p2p_comm: pair is not modelled yet";
  return {};
}

namespace {

constexpr uint32_t NO_STREAM = UINT32_MAX;
constexpr uint32_t MAIN_STREAM = 0;

// An issued operation. Device ops are kernels on a stream; host ops (sleep) have no stream.
struct Kernel {
  uint32_t rank = 0;
  uint32_t thread = 0;        // global thread index
  uint32_t stream = NO_STREAM;
  uint32_t index = 0;         // position in the rank's issue order
  uint32_t seq = 0;
  OpInstance op;
  KernelState state = KernelState::QUEUED;
  int32_t match = -1;         // p2p: matched kernel
  std::vector<uint32_t> deps; // kernels of the same rank that must be done first
  int64_t issue_ns = 0;
  int64_t start_ns = -1;
  int64_t end_ns = -1;
};

struct Stream {
  std::string name;
  std::vector<uint32_t> kernels;        // in enqueue order
  size_t head = 0;                      // first kernel not done
  std::vector<uint32_t> pending_waits;  // kernels the next enqueued kernel must wait for
};

enum class ThreadState : uint8_t { RUNNABLE, BLOCKED, DONE };

struct Thread {
  uint32_t rank = 0;
  std::string name;
  std::unique_ptr<ProgramFiber> fiber;
  ThreadState state = ThreadState::RUNNABLE;
  bool ending = false;             // blocked at its end, waiting for the rank's GPU work
  std::vector<uint32_t> waits;     // kernels it is blocked on
  int64_t clock_ns = 0;
};

struct Rank {
  std::vector<uint32_t> threads;   // global thread indices
  std::vector<Stream> streams;     // streams[0] is main
  std::vector<uint32_t> stream_of_group;  // group -> stream index, NO_STREAM until used
  std::vector<uint32_t> coll_seq;  // per group: collectives issued
  RankStatus status = RankStatus::RUNNING;
  uint32_t live_threads = 0;
  uint32_t issued = 0;
  int64_t end_ns = 0;
};

// The k-th collective of a communicator.
struct CollSlot {
  std::vector<int32_t> kernels;  // per member position, -1 until issued
  uint32_t issued = 0;
  uint32_t running = 0;
  int32_t first = -1;            // the first kernel issued, the reference for mismatches
};

struct Comm {
  std::vector<CollSlot> slots;   // slots[seq - 1]
};

uint64_t p2p_key(uint32_t group, uint32_t src, uint32_t dst) {
  return (static_cast<uint64_t>(group) << 42) | (static_cast<uint64_t>(src) << 21) | dst;
}

}  // namespace

struct Engine::Impl {
  const Scenario& sc;
  EngineOptions options;
  StackPool stacks;
  LinkModel link;
  std::vector<std::vector<int32_t>> member_pos;  // per group: rank -> position in its comm, -1
  std::vector<uint32_t> comm_base;               // per group: id of its first communicator
  uint32_t comm_count = 0;

  // Per-execution state.
  Strategy* strategy = nullptr;
  std::vector<Rank> ranks;
  std::vector<Thread> threads;
  std::vector<Kernel> kernels;
  std::vector<Comm> comms;  // per communicator (comm_id)
  std::unordered_map<uint64_t, std::deque<uint32_t>> send_queue;  // (group, src, dst) unmatched
  std::unordered_map<uint64_t, std::deque<uint32_t>> recv_queue;  // (group, 0, dst) unmatched
  std::unordered_map<uint64_t, uint32_t> p2p_sent;                // (group, src, dst) count
  std::deque<uint32_t> ready;        // eager runnable threads
  std::deque<uint32_t> dirty_ranks;  // ranks whose kernels/threads need re-examination
  std::vector<bool> dirty_flag;
  std::vector<Option> options_buf;
  ExecutionResult result;
  bool stopped = false;
  uint64_t ops_issued = 0;

  Impl(const Scenario& scenario, EngineOptions opts)
      : sc(scenario), options(opts), stacks(opts.limits.fiber_stack_bytes) {
    member_pos.resize(sc.groups.size());
    comm_base.resize(sc.groups.size());
    uint32_t total = 0;
    for (size_t g = 0; g < sc.groups.size(); ++g) {
      comm_base[g] = total;
      total += static_cast<uint32_t>(sc.groups[g].comms.size());
      member_pos[g].assign(static_cast<size_t>(sc.world), -1);
      for (const std::vector<int32_t>& comm : sc.groups[g].comms) {
        for (size_t i = 0; i < comm.size(); ++i) member_pos[g][static_cast<size_t>(comm[i])] = static_cast<int32_t>(i);
      }
    }
    comm_count = total;
  }

  uint32_t comm_id(uint32_t group, uint32_t rank) const {
    return comm_base[group] + static_cast<uint32_t>(sc.groups[group].comm_of_rank[rank]);
  }
  const std::vector<int32_t>& members(uint32_t group, uint32_t rank) const {
    return *sc.groups[group].comm_for(static_cast<int32_t>(rank));
  }

  // -------------------------------------------------------------------------------------------
  // Setup and the main loop.

  void reset() {
    threads.clear();  // unwinds suspended fibers
    ranks.assign(static_cast<size_t>(sc.world), Rank{});
    kernels.clear();
    comms.assign(comm_count, Comm{});
    send_queue.clear();
    recv_queue.clear();
    p2p_sent.clear();
    ready.clear();
    dirty_ranks.clear();
    dirty_flag.assign(static_cast<size_t>(sc.world), false);
    result = ExecutionResult{};
    stopped = false;
    ops_issued = 0;

    for (int32_t r = 0; r < sc.world; ++r) {
      Rank& rank = ranks[static_cast<size_t>(r)];
      rank.streams.push_back(Stream{"main", {}, 0, {}});
      rank.stream_of_group.assign(sc.groups.size(), NO_STREAM);
      rank.coll_seq.assign(sc.groups.size(), 0);
      for (const ThreadDef& def : sc.program_of(r)) {
        Thread thread;
        thread.rank = static_cast<uint32_t>(r);
        thread.name = def.name;
        thread.fiber = std::make_unique<ProgramFiber>(sc, def.body, r, stacks);
        rank.threads.push_back(static_cast<uint32_t>(threads.size()));
        threads.push_back(std::move(thread));
        ++rank.live_threads;
      }
    }
  }

  ExecutionResult run(Strategy& chooser) {
    strategy = &chooser;
    reset();
    for (uint32_t t = 0; t < threads.size(); ++t) {
      advance_fiber(t);
      if (stopped) break;
      schedule_thread(t);
    }
    while (!stopped) {
      drain();
      if (stopped) break;
      if (!choose_and_apply()) break;
    }
    finish();
    threads.clear();
    return std::move(result);
  }

  // Runs everything that needs no choice: eager thread steps and kernel progress.
  void drain() {
    while (!stopped && (!ready.empty() || !dirty_ranks.empty())) {
      while (!dirty_ranks.empty() && !stopped) {
        const uint32_t r = dirty_ranks.front();
        dirty_ranks.pop_front();
        dirty_flag[r] = false;
        progress_rank(r);
      }
      if (!ready.empty() && !stopped) {
        const uint32_t t = ready.front();
        ready.pop_front();
        // A burst: step the thread until it blocks or ends.
        while (!stopped && threads[t].state == ThreadState::RUNNABLE && is_eager(t)) {
          step_thread(t);
        }
      }
    }
  }

  // A thread steps without a choice when it is the only unfinished thread of its rank.
  bool is_eager(uint32_t t) const { return ranks[threads[t].rank].live_threads == 1; }

  void schedule_thread(uint32_t t) {
    if (threads[t].state == ThreadState::RUNNABLE && is_eager(t)) ready.push_back(t);
  }

  void mark_dirty(uint32_t r) {
    if (!dirty_flag[r]) {
      dirty_flag[r] = true;
      dirty_ranks.push_back(r);
    }
  }

  bool choose_and_apply() {
    options_buf.clear();
    for (uint32_t t = 0; t < threads.size(); ++t) {
      const Thread& thread = threads[t];
      if (thread.state == ThreadState::RUNNABLE && !is_eager(t)) {
        const Rank& rank = ranks[thread.rank];
        const int32_t local = static_cast<int32_t>(
            std::find(rank.threads.begin(), rank.threads.end(), t) - rank.threads.begin());
        options_buf.push_back(Option{ChoiceKind::THREAD, static_cast<int32_t>(thread.rank), local,
                                     static_cast<int32_t>(t), thread.clock_ns});
      }
    }
    collect_wildcard_options();
    if (options_buf.empty()) return false;
    size_t pick = 0;
    if (options_buf.size() > 1) {
      pick = strategy->choose(ChoicePoint{options_buf, result.choice_points});
      assert(pick < options_buf.size());
      ++result.choice_points;
    }
    const Option chosen = options_buf[pick];
    if (chosen.kind == ChoiceKind::THREAD) {
      step_thread(static_cast<uint32_t>(chosen.detail));
    } else if (chosen.kind == ChoiceKind::MATCH) {
      apply_wildcard(chosen);
    }
    return true;
  }

  // -------------------------------------------------------------------------------------------
  // Host threads.

  void advance_fiber(uint32_t t) {
    Thread& thread = threads[t];
    thread.fiber->advance();
    switch (thread.fiber->state()) {
      case ProgramFiber::State::READY:
        break;
      case ProgramFiber::State::FINISHED:
        begin_thread_end(t);
        break;
      case ProgramFiber::State::FAILED:
        result.end = ExecutionEnd::ERROR;
        result.error = thread.fiber->failure();
        stopped = true;
        break;
      case ProgramFiber::State::NOT_STARTED:
        assert(false);
        break;
    }
  }

  // At its end a thread waits for all of its rank's GPU work (a process waits before exit).
  void begin_thread_end(uint32_t t) {
    Thread& thread = threads[t];
    Rank& rank = ranks[thread.rank];
    thread.ending = true;
    thread.waits.clear();
    for (const Stream& stream : rank.streams) {
      if (!stream.kernels.empty()) thread.waits.push_back(stream.kernels.back());
    }
    block_thread(t);
  }

  void block_thread(uint32_t t) {
    Thread& thread = threads[t];
    thread.state = ThreadState::BLOCKED;
    try_unblock(t);
  }

  // Wakes a blocked thread whose waits are all done.
  void try_unblock(uint32_t t) {
    Thread& thread = threads[t];
    if (thread.state != ThreadState::BLOCKED) return;
    for (uint32_t k : thread.waits) {
      if (kernels[k].state != KernelState::DONE) return;
      thread.clock_ns = std::max(thread.clock_ns, kernels[k].end_ns);
    }
    thread.waits.clear();
    if (thread.ending) {
      thread.state = ThreadState::DONE;
      Rank& rank = ranks[thread.rank];
      rank.end_ns = std::max(rank.end_ns, thread.clock_ns);
      if (--rank.live_threads == 0) {
        rank.status = RankStatus::FINISHED;
      } else {
        for (uint32_t other : rank.threads) schedule_thread(other);
      }
      return;
    }
    thread.state = ThreadState::RUNNABLE;
    advance_fiber(t);
    schedule_thread(t);
  }

  // Applies the thread's pending operation, then advances its program.
  void step_thread(uint32_t t) {
    Thread& thread = threads[t];
    assert(thread.state == ThreadState::RUNNABLE && thread.fiber->state() == ProgramFiber::State::READY);
    if (++ops_issued > options.limits.max_ops) {
      result.end = ExecutionEnd::LIMIT;
      result.error = Diagnostic{sc.path, {}, Severity::ERROR,
                                fmt::format("execution exceeds the limit of {} operations",
                                            options.limits.max_ops)};
      stopped = true;
      return;
    }
    const OpInstance& op = thread.fiber->pending();
    ++result.events;
    const uint32_t k = issue(t, op);
    if (stopped) return;
    if (op.kind == OpKind::BARRIER) {
      thread.waits.assign(1, k);
      block_thread(t);
      return;
    }
    advance_fiber(t);
  }

  // -------------------------------------------------------------------------------------------
  // Issuing operations.

  uint32_t stream_for_group(Rank& rank, uint32_t group) {
    uint32_t& s = rank.stream_of_group[group];
    if (s == NO_STREAM) {
      s = static_cast<uint32_t>(rank.streams.size());
      rank.streams.push_back(Stream{"comm:" + sc.groups[group].name, {}, 0, {}});
    }
    return s;
  }

  void enqueue(Rank& rank, uint32_t s, uint32_t k) {
    Stream& stream = rank.streams[s];
    for (uint32_t w : stream.pending_waits) {
      if (kernels[w].state != KernelState::DONE) kernels[k].deps.push_back(w);
    }
    stream.pending_waits.clear();
    kernels[k].stream = s;
    stream.kernels.push_back(k);
  }

  uint32_t issue(uint32_t t, const OpInstance& op) {
    Thread& thread = threads[t];
    const uint32_t r = thread.rank;
    Rank& rank = ranks[r];
    const uint32_t k = static_cast<uint32_t>(kernels.size());
    Kernel kernel;
    kernel.rank = r;
    kernel.thread = t;
    kernel.index = rank.issued++;
    kernel.op = op;
    kernel.issue_ns = thread.clock_ns;
    kernels.push_back(std::move(kernel));

    if (op.kind == OpKind::SLEEP) {
      thread.clock_ns += op.duration_ns;
      Kernel& sleep = kernels[k];
      sleep.state = KernelState::DONE;
      sleep.start_ns = sleep.issue_ns;
      sleep.end_ns = thread.clock_ns;
      return k;
    }
    if (op.kind == OpKind::COMPUTE) {
      enqueue(rank, MAIN_STREAM, k);
      mark_dirty(r);
      return k;
    }
    // A synchronous communication op: its stream waits for prior work on main, and main
    // waits for it.
    const uint32_t s = stream_for_group(rank, op.group);
    Stream& main = rank.streams[MAIN_STREAM];
    if (!main.kernels.empty()) rank.streams[s].pending_waits.push_back(main.kernels.back());
    enqueue(rank, s, k);
    rank.streams[MAIN_STREAM].pending_waits.push_back(k);
    if (is_collective(op.kind)) {
      issue_collective(k);
    } else {
      issue_p2p(k);
    }
    mark_dirty(r);
    return k;
  }

  void issue_collective(uint32_t k) {
    Kernel& kernel = kernels[k];
    const uint32_t group = kernel.op.group;
    Rank& rank = ranks[kernel.rank];
    kernel.seq = ++rank.coll_seq[group];
    Comm& comm = comms[comm_id(group, kernel.rank)];
    if (comm.slots.size() < kernel.seq) comm.slots.resize(kernel.seq);
    CollSlot& slot = comm.slots[kernel.seq - 1];
    if (slot.kernels.empty()) slot.kernels.assign(members(group, kernel.rank).size(), -1);
    slot.kernels[static_cast<size_t>(member_pos[group][kernel.rank])] = static_cast<int32_t>(k);
    ++slot.issued;
    if (slot.first < 0) {
      slot.first = static_cast<int32_t>(k);
      return;
    }
    const Kernel& ref = kernels[static_cast<size_t>(slot.first)];
    const std::string field = collective_difference(ref.op, kernel.op);
    if (!field.empty()) report_mismatch(field, static_cast<uint32_t>(slot.first), k);
  }

  static std::string collective_difference(const OpInstance& a, const OpInstance& b) {
    if (a.kind != b.kind) return "kind";
    if (a.size_bytes != b.size_bytes) return "size";
    if (a.dtype != b.dtype) return "dtype";
    if (a.root != b.root) return "root";
    const std::string_view tag_a = a.stmt ? std::string_view(a.stmt->tag) : std::string_view();
    const std::string_view tag_b = b.stmt ? std::string_view(b.stmt->tag) : std::string_view();
    if (tag_a != tag_b) return "tag";
    return {};
  }

  void report_mismatch(const std::string& field, uint32_t a, uint32_t b) {
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
    result.mismatch = std::move(info);
    result.end = ExecutionEnd::MISMATCH;
    stopped = true;
  }

  void issue_p2p(uint32_t k) {
    Kernel& kernel = kernels[k];
    const uint32_t group = kernel.op.group;
    const uint32_t me = kernel.rank;
    if (kernel.op.kind == OpKind::SEND) {
      const uint32_t dst = static_cast<uint32_t>(kernel.op.peer);
      kernel.seq = ++p2p_sent[p2p_key(group, me, dst)];
      send_queue[p2p_key(group, me, dst)].push_back(k);
      match_receives(group, dst);
    } else {
      recv_queue[p2p_key(group, 0, me)].push_back(k);
      match_receives(group, me);
    }
  }

  // Receives at `dst` on `group` match in issue order; a named receive takes the oldest
  // unmatched send from its source. A wildcard at the head waits for a choice.
  void match_receives(uint32_t group, uint32_t dst) {
    auto it = recv_queue.find(p2p_key(group, 0, dst));
    if (it == recv_queue.end()) return;
    std::deque<uint32_t>& receives = it->second;
    while (!receives.empty() && !stopped) {
      const uint32_t recv = receives.front();
      const int32_t src = kernels[recv].op.peer;
      if (src < 0) return;
      auto sends = send_queue.find(p2p_key(group, static_cast<uint32_t>(src), dst));
      if (sends == send_queue.end() || sends->second.empty()) return;
      const uint32_t send = sends->second.front();
      sends->second.pop_front();
      receives.pop_front();
      pair_p2p(send, recv);
    }
  }

  void pair_p2p(uint32_t send, uint32_t recv) {
    kernels[send].match = static_cast<int32_t>(recv);
    kernels[recv].match = static_cast<int32_t>(send);
    kernels[recv].seq = kernels[send].seq;
    if (kernels[send].op.size_bytes != kernels[recv].op.size_bytes) {
      report_mismatch("size", send, recv);
      return;
    }
    if (kernels[send].op.dtype != kernels[recv].op.dtype) {
      report_mismatch("dtype", send, recv);
      return;
    }
    try_complete_p2p(send);
  }

  void collect_wildcard_options() {
    for (auto& [key, receives] : recv_queue) {
      if (receives.empty()) continue;
      const Kernel& recv = kernels[receives.front()];
      if (recv.op.peer >= 0) continue;
      const uint32_t group = recv.op.group;
      for (int32_t src : members(group, recv.rank)) {
        if (static_cast<uint32_t>(src) == recv.rank) continue;
        auto sends = send_queue.find(p2p_key(group, static_cast<uint32_t>(src), recv.rank));
        if (sends == send_queue.end() || sends->second.empty()) continue;
        options_buf.push_back(Option{ChoiceKind::MATCH, static_cast<int32_t>(recv.rank),
                                     static_cast<int32_t>(group), src,
                                     kernels[sends->second.front()].issue_ns});
      }
    }
    // recv_queue is hashed: order the options deterministically.
    std::sort(options_buf.begin(), options_buf.end(), [](const Option& a, const Option& b) {
      return std::tie(a.kind, a.rank, a.thread, a.detail) < std::tie(b.kind, b.rank, b.thread, b.detail);
    });
  }

  void apply_wildcard(const Option& option) {
    const uint32_t group = static_cast<uint32_t>(option.thread);
    const uint32_t dst = static_cast<uint32_t>(option.rank);
    const uint32_t src = static_cast<uint32_t>(option.detail);
    std::deque<uint32_t>& receives = recv_queue[p2p_key(group, 0, dst)];
    std::deque<uint32_t>& sends = send_queue[p2p_key(group, src, dst)];
    const uint32_t recv = receives.front();
    const uint32_t send = sends.front();
    receives.pop_front();
    sends.pop_front();
    ++result.events;
    pair_p2p(send, recv);
    match_receives(group, dst);
    mark_dirty(dst);
    mark_dirty(src);
  }

  // -------------------------------------------------------------------------------------------
  // Kernel progress.

  // Starts every startable stream head of the rank, and wakes threads whose waits are done.
  void progress_rank(uint32_t r) {
    Rank& rank = ranks[r];
    bool changed = true;
    while (changed && !stopped) {
      changed = false;
      for (size_t s = 0; s < rank.streams.size(); ++s) {
        Stream& stream = rank.streams[s];
        if (stream.head >= stream.kernels.size()) continue;
        const uint32_t k = stream.kernels[stream.head];
        Kernel& kernel = kernels[k];
        if (kernel.state == KernelState::DONE) {
          ++stream.head;
          changed = true;
          continue;
        }
        if (kernel.state == KernelState::QUEUED && deps_done(kernel)) {
          start_kernel(k);
          changed = true;
        }
      }
    }
    for (uint32_t t : rank.threads) try_unblock(t);
  }

  bool deps_done(const Kernel& kernel) const {
    for (uint32_t d : kernel.deps) {
      if (kernels[d].state != KernelState::DONE) return false;
    }
    return true;
  }

  void start_kernel(uint32_t k) {
    Kernel& kernel = kernels[k];
    const Rank& rank = ranks[kernel.rank];
    const Stream& stream = rank.streams[kernel.stream];
    int64_t start = kernel.issue_ns;
    if (stream.head > 0) start = std::max(start, kernels[stream.kernels[stream.head - 1]].end_ns);
    for (uint32_t d : kernel.deps) start = std::max(start, kernels[d].end_ns);
    kernel.state = KernelState::RUNNING;
    kernel.start_ns = start;
    ++result.events;
    if (kernel.op.kind == OpKind::COMPUTE) {
      complete(k, start + kernel.op.duration_ns);
    } else if (is_collective(kernel.op.kind)) {
      const uint32_t comm = comm_id(kernel.op.group, kernel.rank);
      CollSlot& slot = comms[comm].slots[kernel.seq - 1];
      if (++slot.running == slot.kernels.size()) complete_collective(comm, kernel.seq);
    } else {
      try_complete_p2p(k);
    }
  }

  void complete(uint32_t k, int64_t end_ns) {
    Kernel& kernel = kernels[k];
    kernel.state = KernelState::DONE;
    kernel.end_ns = end_ns;
    ++result.events;
    mark_dirty(kernel.rank);
  }

  void complete_collective(uint32_t comm, uint32_t seq) {
    CollSlot& slot = comms[comm].slots[seq - 1];
    int64_t start = 0;
    for (int32_t k : slot.kernels) start = std::max(start, kernels[static_cast<size_t>(k)].start_ns);
    const Kernel& any = kernels[static_cast<size_t>(slot.kernels[0])];
    const int64_t end = start + comm_cost_ns(any.op.kind, any.op.size_bytes,
                                             static_cast<int32_t>(slot.kernels.size()), link);
    for (int32_t k : slot.kernels) complete(static_cast<uint32_t>(k), end);
  }

  // Completes a matched send/recv pair when the semantics allow.
  void try_complete_p2p(uint32_t k) {
    Kernel& kernel = kernels[k];
    if (kernel.match < 0) {
      if (kernel.op.kind == OpKind::SEND && kernel.state == KernelState::RUNNING && is_eager(kernel)) {
        complete(k, kernel.start_ns + comm_cost_ns(OpKind::SEND, kernel.op.size_bytes, 2, link));
      }
      return;
    }
    const uint32_t send = kernel.op.kind == OpKind::SEND ? k : static_cast<uint32_t>(kernel.match);
    const uint32_t recv = kernel.op.kind == OpKind::SEND ? static_cast<uint32_t>(kernel.match) : k;
    Kernel& s = kernels[send];
    Kernel& r = kernels[recv];
    const int64_t cost = comm_cost_ns(OpKind::SEND, s.op.size_bytes, 2, link);
    if (is_eager(s)) {
      if (s.state == KernelState::RUNNING) complete(send, s.start_ns + cost);
      if (r.state == KernelState::RUNNING && s.start_ns >= 0) {
        complete(recv, std::max(r.start_ns, s.start_ns + cost));
      }
      return;
    }
    if (s.state == KernelState::RUNNING && r.state == KernelState::RUNNING) {
      const int64_t end = std::max(s.start_ns, r.start_ns) + cost;
      complete(send, end);
      complete(recv, end);
    }
  }

  bool is_eager(const Kernel& send) const {
    return sc.semantics.p2p == P2pMode::EAGER && send.op.size_bytes <= sc.semantics.eager_limit_bytes;
  }

  // -------------------------------------------------------------------------------------------
  // The end of an execution.

  OpRecord record_of(uint32_t k) const {
    const Kernel& kernel = kernels[k];
    OpRecord rec;
    rec.index = kernel.index;
    rec.op = kernel.op;
    rec.thread = threads.empty() ? std::string() : threads[kernel.thread].name;
    if (kernel.stream != NO_STREAM) rec.stream = ranks[kernel.rank].streams[kernel.stream].name;
    rec.seq = kernel.seq;
    rec.state = kernel.state;
    rec.matched_peer = kernel.match >= 0 ? static_cast<int32_t>(kernels[static_cast<size_t>(kernel.match)].rank) : -1;
    rec.issue_ns = kernel.issue_ns;
    rec.start_ns = kernel.start_ns;
    rec.end_ns = kernel.end_ns;
    return rec;
  }

  void finish() {
    const size_t world = ranks.size();
    result.rank_status.resize(world);
    result.rank_end_ns.resize(world);
    bool all_finished = true;
    for (size_t r = 0; r < world; ++r) {
      RankStatus status = ranks[r].status;
      if (status == RankStatus::RUNNING) {
        bool blocked = false;
        for (uint32_t t : ranks[r].threads) blocked |= threads[t].state == ThreadState::BLOCKED;
        if (blocked) status = RankStatus::BLOCKED;
      }
      result.rank_status[r] = status;
      result.rank_end_ns[r] = ranks[r].end_ns;
      if (status != RankStatus::FINISHED && status != RankStatus::EXITED) all_finished = false;
    }
    if (options.record_ops) {
      result.ops.assign(world, {});
      for (uint32_t k = 0; k < kernels.size(); ++k) result.ops[kernels[k].rank].push_back(record_of(k));
    }
    if (stopped) return;
    if (all_finished) {
      result.end = ExecutionEnd::COMPLETED;
      find_timeouts();
      return;
    }
    result.end = ExecutionEnd::STUCK;
    for (uint32_t k = 0; k < kernels.size(); ++k) {
      const Kernel& kernel = kernels[k];
      if (kernel.state != KernelState::RUNNING) continue;
      StuckOp stuck;
      stuck.rank = static_cast<int32_t>(kernel.rank);
      stuck.thread = threads.empty() ? std::string() : threads[kernel.thread].name;
      stuck.op = record_of(k);
      explain_wait(kernel, stuck);
      result.stuck.push_back(std::move(stuck));
    }
    std::stable_sort(result.stuck.begin(), result.stuck.end(), [](const StuckOp& a, const StuckOp& b) {
      return std::tie(a.rank, a.op.index) < std::tie(b.rank, b.op.index);
    });
  }

  // A communication kernel that ran (waiting for its peers) longer than the watchdog allows.
  // PyTorch's watchdog fires on such an op; the ranks it waited for are those that started last.
  void find_timeouts() {
    const int64_t limit = sc.semantics.timeout_ns;
    for (uint32_t k = 0; k < kernels.size(); ++k) {
      const Kernel& kernel = kernels[k];
      if (kernel.stream == NO_STREAM || kernel.op.kind == OpKind::COMPUTE) continue;
      if (kernel.end_ns - kernel.start_ns <= limit) continue;
      StuckOp late;
      late.rank = static_cast<int32_t>(kernel.rank);
      late.thread = threads.empty() ? std::string() : threads[kernel.thread].name;
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
    if (!result.stuck.empty()) result.end = ExecutionEnd::TIMEOUT;
  }

  // Whom a running, unfinished kernel waits for.
  void explain_wait(const Kernel& kernel, StuckOp& stuck) const {
    auto add = [&](int32_t r, bool never) {
      stuck.waiting_for.push_back(r);
      if (never) stuck.never_issued.push_back(r);
    };
    const uint32_t group = kernel.op.group;
    if (is_collective(kernel.op.kind)) {
      const CollSlot& slot = comms[comm_id(group, kernel.rank)].slots[kernel.seq - 1];
      for (size_t i = 0; i < slot.kernels.size(); ++i) {
        const int32_t member = members(group, kernel.rank)[i];
        if (static_cast<uint32_t>(member) == kernel.rank) continue;
        if (slot.kernels[i] < 0) {
          add(member, true);
        } else if (kernels[static_cast<size_t>(slot.kernels[i])].state != KernelState::RUNNING) {
          add(member, false);
        }
      }
      return;
    }
    if (kernel.match >= 0) {
      const Kernel& peer = kernels[static_cast<size_t>(kernel.match)];
      add(static_cast<int32_t>(peer.rank), false);
      return;
    }
    if (kernel.op.peer >= 0) {
      // Unmatched: has the peer issued an op that could pair with this one (queued behind
      // earlier ones), or never?
      const uint32_t peer = static_cast<uint32_t>(kernel.op.peer);
      bool issued = false;
      if (kernel.op.kind == OpKind::SEND) {
        const auto it = recv_queue.find(p2p_key(group, 0, peer));
        if (it != recv_queue.end()) {
          for (uint32_t recv : it->second) {
            const int32_t from = kernels[recv].op.peer;
            issued |= from < 0 || static_cast<uint32_t>(from) == kernel.rank;
          }
        }
      } else {
        const auto it = send_queue.find(p2p_key(group, peer, kernel.rank));
        issued = it != send_queue.end() && !it->second.empty();
      }
      add(kernel.op.peer, !issued);
      return;
    }
    for (int32_t member : members(group, kernel.rank)) {
      if (static_cast<uint32_t>(member) != kernel.rank) add(member, true);
    }
  }
};

Engine::Engine(const Scenario& scenario, EngineOptions options)
    : impl_(std::make_unique<Impl>(scenario, options)) {}

Engine::~Engine() = default;

ExecutionResult Engine::run(Strategy& strategy) { return impl_->run(strategy); }

}  // namespace lockstep::sim

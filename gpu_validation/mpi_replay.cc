// lockstep-mpi-replay PLAN OUTDIR STALL_SECONDS: one rank of `lockstep replay --mpi`
// (docs/replay.md), started by mpirun, one process per rank.
//
// It runs its rank's ops of the plan (gpu_validation/replay_plan.h) with nonblocking MPI on real
// buffers. Under granted order (the default) it issues an op only once the coordinator granted
// its step of the global issue order and the ops its host blocks on completed, and reports each
// issue back (grant_channel.h); under free order as soon as its host would. An issued op is
// posted once the ops it depends on completed (lockstep's streams, synchronous
// ops, host blocking, NCCL groups, as replay_coordinator.cc derives them), in issue order per
// communicator, and completed by polling MPI_Test. Inputs are seeded so that every result is
// exactly predictable, and every completed op's data is checked. The watchdog is the polling loop
// itself: when ops are outstanding and nothing progressed for STALL_SECONDS, the rank writes its
// frontier (the ops it is stuck in) to OUTDIR/frontier.RANK and keeps polling; the launcher kills
// every process once each rank has reported. Reports go through files, never through MPI.
#include <mpi.h>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <deque>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "gpu_validation/grant_channel.h"
#include "gpu_validation/replay_plan.h"
#include "gpu_validation/watchdog.h"

namespace lockstep::gpu {
namespace {

using Clock = std::chrono::steady_clock;

uint64_t mask_of(uint32_t width) { return width >= 8 ? ~uint64_t{0} : (uint64_t{1} << (8 * width)) - 1; }

// Which elements carry seeded data: every stride-th of the op's elements (about 4,096 of them,
// so that filling and checking 100 MiB costs nothing next to moving it); the others stay zero.
// Members that disagree on the size disagree on the stride, which shows as wrong data too.
int64_t stride_of(int64_t count) { return count > 4096 ? count / 4096 : 1; }

// The seeded value of element i of rank r's contribution to an op, small enough that the sum
// over `members` never wraps in `width` bytes. The dtype and the tag are part of it, so a dtype
// mismatch of equal width, or two ops with different tags paired, still shows as wrong data.
uint64_t seeded(int32_t rank, uint32_t seq, int64_t i, uint32_t dtype, uint32_t tag, uint32_t width, int64_t members) {
  const uint64_t limit = std::max<uint64_t>(1, std::min<uint64_t>(mask_of(width), uint64_t{1} << 30) /
                                                   static_cast<uint64_t>(std::max<int64_t>(1, members)));
  return seeded_value(rank, seq, i, dtype, tag, limit);
}

MPI_Datatype mpi_type(uint32_t width) {
  switch (width) {
    case 1: return MPI_UINT8_T;
    case 2: return MPI_UINT16_T;
    case 4: return MPI_UINT32_T;
    default: return MPI_UINT64_T;
  }
}

struct Buffer {
  std::vector<unsigned char> bytes;
  uint32_t width = 1;
  void resize(int64_t elements, uint32_t w) {
    width = w;
    bytes.assign(static_cast<size_t>(elements) * w, 0);
  }
  void set(int64_t i, uint64_t v) { std::memcpy(&bytes[static_cast<size_t>(i) * width], &v, width); }  // little endian
  uint64_t get(int64_t i) const {
    uint64_t v = 0;
    std::memcpy(&v, &bytes[static_cast<size_t>(i) * width], width);
    return v;
  }
  int64_t size() const { return static_cast<int64_t>(bytes.size() / width); }
  void* data() { return bytes.empty() ? nullptr : bytes.data(); }
};

struct OpState {
  bool issued = false;  // the host issued it (granted, and what it blocks on completed)
  bool posted = false;
  bool done = false;
  bool failed = false;  // a problem is recorded: its data is not checked
  MPI_Request request = MPI_REQUEST_NULL;
  Buffer in, out;
  std::vector<int32_t> gathered;  // new_group: every rank's group id
  // all_to_all_single: elements to and from each member, and where each member's part starts
  std::vector<int> send_counts, send_displs, recv_counts, recv_displs;
};

// The counts and displacements of an all_to_all_single's parts, in elements of `width` bytes;
// false where a count does not fit an MPI count.
bool split_counts(const std::vector<int64_t>& splits, uint32_t width, std::vector<int>& counts,
                  std::vector<int>& displs, int64_t& total) {
  counts.clear();
  displs.clear();
  total = 0;
  for (int64_t bytes : splits) {
    const int64_t elements = bytes / width;
    if (elements > INT32_MAX || total > INT32_MAX) return false;
    counts.push_back(static_cast<int>(elements));
    displs.push_back(static_cast<int>(total));
    total += elements;
  }
  return total <= INT32_MAX;
}

// The seeded element e of what `sender` sends to member `to` in an all_to_all_single: each part
// is numbered from its receiver's place, so a receiver checks what it got without knowing the
// sender's other parts.
int64_t split_element(int64_t to, int64_t e) { return (to << 32) + e; }

class Worker {
 public:
  Worker(const Plan& plan, int32_t rank, std::string dir, double stall_s, GrantClient& grants)
      : plan_(plan), rank_(rank), ops_(plan.ranks[static_cast<size_t>(rank)]), dir_(std::move(dir)), stall_s_(stall_s),
        grants_(grants) {
    state_.resize(ops_.size());
    frontier_.rank = rank;
    frontier_.pid = static_cast<int64_t>(::getpid());
    frontier_.total = static_cast<uint32_t>(ops_.size());
  }

  // Creates a communicator per group (MPI_Comm_split over every rank, in group order).
  void create_comms() {
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    for (const PlanGroup& g : plan_.groups) {
      const int32_t c = g.comm_of_rank[static_cast<size_t>(rank_)];
      MPI_Comm comm = MPI_COMM_NULL;
      MPI_Comm_split(MPI_COMM_WORLD, c >= 0 ? c : MPI_UNDEFINED, rank_, &comm);
      if (comm != MPI_COMM_NULL) MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
      comms_.push_back(comm);
      members_.push_back(g.members_with(rank_));
    }
    MPI_Comm_dup(MPI_COMM_WORLD, &new_group_comm_);
    MPI_Comm_set_errhandler(new_group_comm_, MPI_ERRORS_RETURN);
  }

  void run() {
    report(FrontierStatus::RUNNING);
    const Clock::time_point start = Clock::now();
    StallWatchdog watchdog(stall_s_);
    PollBackoff backoff(50, 2000);  // a stuck rank polls every 2 ms: next to no CPU
    size_t completed = 0;
    while (completed < ops_.size()) {
      bool progress = issue_granted();
      progress = post_ready() || progress;
      if (stopped_) return idle();
      // Each MPI_Test also moves data (OpenMPI progresses transfers inside it): a burst of
      // them per poll keeps large transfers moving while the loop sleeps between polls.
      bool outstanding = false;
      for (int burst = 0; burst < 16; ++burst) {
        outstanding = false;
        bool completed_one = false;
        for (size_t i = 0; i < ops_.size(); ++i) {
          OpState& s = state_[i];
          if (!s.posted || s.done) continue;
          int flag = 0;
          MPI_Status status;
          const int rc = s.request == MPI_REQUEST_NULL ? MPI_SUCCESS : MPI_Test(&s.request, &flag, &status);
          if (s.request == MPI_REQUEST_NULL && rc == MPI_SUCCESS) flag = 1;
          if (rc != MPI_SUCCESS) {
            fail(i, "MPI error: " + error_string(rc));
            flag = 1;
          } else if (flag && !s.failed) {
            check(i, status);
          }
          if (flag) {
            finish(i);
            ++completed;
            completed_one = true;
          } else {
            outstanding = true;
          }
        }
        test_eager();
        if (completed_one || !outstanding) {
          progress = progress || completed_one;
          break;
        }
      }
      frontier_.completed = static_cast<uint32_t>(completed);
      outstanding = outstanding || next_issue_ < ops_.size();  // waiting for a grant or a host block
      const double now = std::chrono::duration<double>(Clock::now() - start).count();
      switch (watchdog.observe(now, progress, outstanding)) {
        case StallWatchdog::Action::REPORT_STUCK: report_stuck(); break;
        case StallWatchdog::Action::REPORT_RUNNING: report(FrontierStatus::RUNNING); break;
        case StallWatchdog::Action::NONE: break;
      }
      // Sleeps until the next poll, or until a grant arrives.
      if (grants_.wait(backoff.next_us(progress))) backoff.next_us(true);
    }
    report(failures_.empty() ? FrontierStatus::COMPLETED : FrontierStatus::FAILED, failures_);
    // Eager sends nobody received: their data would sit in the receiver's buffer; let them go.
    for (MPI_Request& r : eager_) {
      if (r != MPI_REQUEST_NULL) {
        MPI_Cancel(&r);
        MPI_Request_free(&r);
      }
    }
  }

 private:
  void finish(size_t i) {
    OpState& s = state_[i];
    s.done = true;
    s.in.bytes.clear();
    s.in.bytes.shrink_to_fit();
    s.out.bytes.clear();
    s.out.bytes.shrink_to_fit();
    if (slot_of(i)) --in_flight_;
  }

  // Issues the rank's next ops while their steps are granted and what their host blocks on
  // completed; reports the last one issued to the coordinator.
  bool issue_granted() {
    bool any = false;
    uint32_t last = 0;
    while (next_issue_ < ops_.size() && !stopped_) {
      const PlanOp& op = ops_[next_issue_];
      if (!grants_.granted(op.step)) break;
      bool open = true;
      for (const uint32_t g : op.gates) open = open && state_[g].done;
      if (!open) break;
      state_[next_issue_++].issued = true;
      last = op.step;
      any = true;
    }
    if (any) grants_.issued(last);
    return any;
  }

  bool slot_of(size_t i) const { return plan_.comm_concurrency > 0 && holds_slot(ops_, i); }

  // Eager sends complete when posted; their requests are tested here for MPI's sake only.
  void test_eager() {
    for (MPI_Request& r : eager_) {
      if (r == MPI_REQUEST_NULL) continue;
      int flag = 0;
      MPI_Test(&r, &flag, MPI_STATUS_IGNORE);
    }
  }

  // Posts every op whose dependencies completed; per communicator in issue order; under
  // comm_concurrency K, at most K slot holders in flight, granted in the model's start order.
  bool post_ready() {
    bool progress = false;
    std::vector<char> coll_blocked(plan_.groups.size(), 0), p2p_blocked(plan_.groups.size(), 0);
    bool new_group_blocked = false;
    for (size_t i = 0; i < next_issue_ && !stopped_; ++i) {
      const PlanOp& op = ops_[i];
      if (state_[i].posted) continue;
      bool ready = true;
      for (uint32_t d : op.deps) ready = ready && state_[d].done;
      if (ready && slot_of(i) && (in_flight_ >= plan_.comm_concurrency || op.start != next_start_)) ready = false;
      char* order = nullptr;
      bool* ng = nullptr;
      if (op.kind == PlanKind::SEND || op.kind == PlanKind::RECV) order = &p2p_blocked[op.group];
      else if (op.kind == PlanKind::NEW_GROUP) ng = &new_group_blocked;
      else if (plan_kind_communicates(op.kind)) order = &coll_blocked[op.group];
      if ((order != nullptr && *order) || (ng != nullptr && *ng)) ready = false;
      if (!ready) {
        if (order != nullptr) *order = 1;
        if (ng != nullptr) *ng = true;
        continue;
      }
      post(i);
      progress = true;
    }
    return progress;
  }

  void post(size_t i) {
    const PlanOp& op = ops_[i];
    OpState& s = state_[i];
    s.posted = true;
    if (slot_of(i)) {
      ++in_flight_;
      ++next_start_;
    }
    if (op.kind == PlanKind::LOCAL) return;  // no request: the polling loop completes it
    if (op.kind == PlanKind::EXIT || op.kind == PlanKind::CRASH) {
      stopped_ = true;
      frontier_.ops.clear();
      report(op.kind == PlanKind::EXIT ? FrontierStatus::EXITED : FrontierStatus::CRASHED);
      return;
    }
    if (op.kind == PlanKind::NEW_GROUP) {
      s.in.resize(1, 4);
      s.in.set(0, op.new_group);
      s.out.resize(plan_.world, 4);
      const int rc = MPI_Iallgather(s.in.data(), 1, MPI_UINT32_T, s.out.data(), 1, MPI_UINT32_T, new_group_comm_, &s.request);
      if (rc != MPI_SUCCESS) fail(i, "MPI error when posting: " + error_string(rc));
      return;
    }
    MPI_Comm comm = comms_[op.group];
    const std::vector<int32_t>& members = members_[op.group];
    const auto n = static_cast<int64_t>(members.size());
    const int me = index_in(members, rank_);
    const uint32_t w = op.dtype_bytes;
    const MPI_Datatype t = mpi_type(w);
    const int64_t count = op.size_bytes / w;
    const int64_t piece = n > 0 ? count / n : 0;
    const int root = index_in(members, op.root);
    const int64_t stride = stride_of(count);
    auto fill = [&](Buffer& b, int64_t elements, int32_t who, uint32_t seq) {
      b.resize(elements, w);
      for (int64_t e = 0; e < elements; e += stride) b.set(e, seeded(who, seq, e, op.dtype, op.tag, w, n));
    };
    if (comm == MPI_COMM_NULL || me < 0) {
      fail(i, "this rank is not a member of the op's communicator");
      s.request = MPI_REQUEST_NULL;
      return;
    }
    if (count > INT32_MAX) {
      fail(i, "more elements than an MPI count holds");
      return;
    }
    const int c = static_cast<int>(count), p = static_cast<int>(piece);
    int rc = MPI_SUCCESS;
    switch (op.kind) {
      case PlanKind::ALLREDUCE:
        fill(s.in, count, rank_, op.seq);
        s.out.resize(count, w);
        rc = MPI_Iallreduce(s.in.data(), s.out.data(), c, t, MPI_SUM, comm, &s.request);
        break;
      case PlanKind::BARRIER: rc = MPI_Ibarrier(comm, &s.request); break;
      case PlanKind::BROADCAST:
        if (me == root) fill(s.out, count, rank_, op.seq);
        else s.out.resize(count, w);
        rc = MPI_Ibcast(s.out.data(), c, t, root, comm, &s.request);
        break;
      case PlanKind::REDUCE:
        fill(s.in, count, rank_, op.seq);
        s.out.resize(me == root ? count : 0, w);
        rc = MPI_Ireduce(s.in.data(), s.out.data(), c, t, MPI_SUM, root, comm, &s.request);
        break;
      case PlanKind::ALLGATHER:
        fill(s.in, piece, rank_, op.seq);
        s.out.resize(n * piece, w);
        rc = MPI_Iallgather(s.in.data(), p, t, s.out.data(), p, t, comm, &s.request);
        break;
      case PlanKind::REDUCE_SCATTER:
        fill(s.in, n * piece, rank_, op.seq);
        s.out.resize(piece, w);
        rc = MPI_Ireduce_scatter_block(s.in.data(), s.out.data(), p, t, MPI_SUM, comm, &s.request);
        break;
      case PlanKind::ALL_TO_ALL:
        fill(s.in, n * piece, rank_, op.seq);
        s.out.resize(n * piece, w);
        rc = MPI_Ialltoall(s.in.data(), p, t, s.out.data(), p, t, comm, &s.request);
        break;
      case PlanKind::ALL_TO_ALL_SINGLE: {
        int64_t sent = 0, received = 0;
        if (!split_counts(op.send_splits, w, s.send_counts, s.send_displs, sent) ||
            !split_counts(op.recv_splits, w, s.recv_counts, s.recv_displs, received) ||
            s.send_counts.size() != static_cast<size_t>(n) || s.recv_counts.size() != static_cast<size_t>(n)) {
          fail(i, "split sizes that MPI cannot express (one per member, each within an MPI count)");
          return;
        }
        // Every element: the receiver checks a sample of its own choosing.
        s.in.resize(sent, w);
        for (int64_t j = 0; j < n; ++j) {
          const auto at = static_cast<size_t>(j);
          for (int64_t e = 0; e < s.send_counts[at]; ++e) {
            s.in.set(s.send_displs[at] + e, seeded(rank_, op.seq, split_element(j, e), op.dtype, op.tag, w, n));
          }
        }
        s.out.resize(received, w);
        rc = MPI_Ialltoallv(s.in.data(), s.send_counts.data(), s.send_displs.data(), t, s.out.data(),
                            s.recv_counts.data(), s.recv_displs.data(), t, comm, &s.request);
        break;
      }
      case PlanKind::ALLGATHER_V: {
        // This rank's part (its own entry of recv_splits) to every member, each member's part
        // into its place. Every element is seeded: the receivers check samples.
        int64_t received = 0;
        if (!split_counts(op.recv_splits, w, s.recv_counts, s.recv_displs, received) ||
            s.recv_counts.size() != static_cast<size_t>(n)) {
          fail(i, "split sizes that MPI cannot express (one per member, each within an MPI count)");
          return;
        }
        const int mine = s.recv_counts[static_cast<size_t>(me)];
        s.in.resize(mine, w);
        for (int64_t e = 0; e < mine; ++e) s.in.set(e, seeded(rank_, op.seq, e, op.dtype, op.tag, w, n));
        s.out.resize(received, w);
        rc = MPI_Iallgatherv(s.in.data(), mine, t, s.out.data(), s.recv_counts.data(), s.recv_displs.data(), t, comm,
                             &s.request);
        break;
      }
      case PlanKind::GATHER:
        fill(s.in, piece, rank_, op.seq);
        s.out.resize(me == root ? n * piece : 0, w);
        rc = MPI_Igather(s.in.data(), p, t, s.out.data(), p, t, root, comm, &s.request);
        break;
      case PlanKind::SCATTER:
        if (me == root) fill(s.in, n * piece, rank_, op.seq);
        s.out.resize(piece, w);
        rc = MPI_Iscatter(s.in.data(), p, t, s.out.data(), p, t, root, comm, &s.request);
        break;
      case PlanKind::SEND:
        if (op.eager) {
          // Eager: the data goes out from a buffer of its own and the send is complete now,
          // whether or not anyone receives it (p2p: eager, within eager_limit).
          eager_buffers_.emplace_back();
          fill(eager_buffers_.back(), count, rank_, 0);
          eager_.push_back(MPI_REQUEST_NULL);
          rc = MPI_Isend(eager_buffers_.back().data(), c, t, index_in(members, op.peer), 0, comm, &eager_.back());
          break;
        }
        fill(s.in, count, rank_, 0);
        // Synchronous send: completes only once the receive matched it (rendezvous).
        rc = MPI_Issend(s.in.data(), c, t, index_in(members, op.peer), 0, comm, &s.request);
        break;
      case PlanKind::RECV:
        s.out.resize(count, w);
        {
          // A wildcard takes the sender the schedule matched it with; unmatched, any.
          const int32_t from = op.peer >= 0 ? op.peer : op.match;
          rc = MPI_Irecv(s.out.data(), c, t, from >= 0 ? index_in(members, from) : MPI_ANY_SOURCE, 0, comm, &s.request);
        }
        break;
      default: break;
    }
    if (rc != MPI_SUCCESS) {
      fail(i, "MPI error when posting: " + error_string(rc));
      s.request = MPI_REQUEST_NULL;
    }
  }

  // Checks the data of a completed op against the seeded inputs every member gave.
  void check(size_t i, const MPI_Status& status) {
    const PlanOp& op = ops_[i];
    OpState& s = state_[i];
    if (op.kind == PlanKind::NEW_GROUP) {
      for (int32_t r = 0; r < plan_.world; ++r) {
        if (s.out.get(r) != op.new_group) {
          fail(i, "mismatch: rank " + std::to_string(r) + " created group " + plan_.groups[s.out.get(r) % plan_.groups.size()].name +
                      " in the same new_group call");
          return;
        }
      }
      return;
    }
    if (!plan_kind_communicates(op.kind) || op.kind == PlanKind::BARRIER || op.kind == PlanKind::SEND) return;
    const std::vector<int32_t>& members = members_[op.group];
    const auto n = static_cast<int64_t>(members.size());
    const int me = index_in(members, rank_);
    const uint64_t mask = mask_of(op.dtype_bytes);
    const int64_t count = op.size_bytes / op.dtype_bytes;
    const int64_t piece = n > 0 ? count / n : 0;
    const int64_t stride = stride_of(count);
    const uint32_t w = op.dtype_bytes;
    auto v = [&](int32_t who, uint32_t seq, int64_t e) {
      return e % stride == 0 ? seeded(who, seq, e, op.dtype, op.tag, w, n) : uint64_t{0};
    };
    auto sum = [&](int64_t e) {
      uint64_t total = 0;
      for (int32_t m : members) total += v(m, op.seq, e);
      return total & mask;
    };
    auto expect = [&](int64_t at, uint64_t want) {
      const uint64_t got = s.out.get(at);
      if (got == (want & mask)) return true;
      fail(i, "wrong data: element " + std::to_string(at) + " is " + std::to_string(got) + ", expected " +
                  std::to_string(want & mask));
      return false;
    };
    const int root = index_in(members, op.root);
    switch (op.kind) {
      case PlanKind::ALLREDUCE:
        for (int64_t e = 0; e < count; e += stride) if (!expect(e, sum(e))) return;
        break;
      case PlanKind::REDUCE:
        if (me == root) for (int64_t e = 0; e < count; e += stride) if (!expect(e, sum(e))) return;
        break;
      case PlanKind::BROADCAST:
        for (int64_t e = 0; e < count; e += stride) if (!expect(e, v(op.root, op.seq, e))) return;
        break;
      case PlanKind::ALLGATHER:
        for (int64_t j = 0; j < n; ++j)
          for (int64_t e = 0; e < piece; e += stride) if (!expect(j * piece + e, v(members[static_cast<size_t>(j)], op.seq, e))) return;
        break;
      case PlanKind::GATHER:
        if (me == root)
          for (int64_t j = 0; j < n; ++j)
            for (int64_t e = 0; e < piece; e += stride) if (!expect(j * piece + e, v(members[static_cast<size_t>(j)], op.seq, e))) return;
        break;
      case PlanKind::REDUCE_SCATTER:
        for (int64_t e = 0; e < piece; e += stride) if (!expect(e, sum(me * piece + e))) return;
        break;
      case PlanKind::ALL_TO_ALL:
        for (int64_t j = 0; j < n; ++j)
          for (int64_t e = 0; e < piece; e += stride)
            if (!expect(j * piece + e, v(members[static_cast<size_t>(j)], op.seq, me * piece + e))) return;
        break;
      case PlanKind::SCATTER:
        for (int64_t e = 0; e < piece; e += stride) if (!expect(e, v(op.root, op.seq, me * piece + e))) return;
        break;
      case PlanKind::ALL_TO_ALL_SINGLE:
        for (int64_t j = 0; j < n; ++j) {
          const auto at = static_cast<size_t>(j);
          const int64_t part = s.recv_counts[at];
          for (int64_t e = 0; e < part; e += stride_of(part)) {
            const uint64_t want = seeded(members[at], op.seq, split_element(me, e), op.dtype, op.tag, w, n);
            if (!expect(s.recv_displs[at] + e, want)) return;
          }
        }
        break;
      case PlanKind::ALLGATHER_V:
        for (int64_t j = 0; j < n; ++j) {
          const auto at = static_cast<size_t>(j);
          const int64_t part = s.recv_counts[at];
          for (int64_t e = 0; e < part; e += stride_of(part)) {
            if (!expect(s.recv_displs[at] + e, seeded(members[at], op.seq, e, op.dtype, op.tag, w, n))) return;
          }
        }
        break;
      case PlanKind::RECV: {
        int got = 0;
        MPI_Get_count(&status, mpi_type(op.dtype_bytes), &got);
        if (got != count) {
          fail(i, "wrong size: received " + std::to_string(got) + " elements, expected " + std::to_string(count));
          return;
        }
        const int32_t source = members[static_cast<size_t>(status.MPI_SOURCE)];
        for (int64_t e = 0; e < count; e += stride) if (!expect(e, v(source, 0, e))) return;
        break;
      }
      default: break;
    }
  }

  void fail(size_t i, const std::string& problem) {
    state_[i].failed = true;
    FrontierOp f = frontier_op(i);
    f.problem = problem;
    failures_.push_back(std::move(f));
  }

  FrontierOp frontier_op(size_t i) const {
    const PlanOp& op = ops_[i];
    return FrontierOp{op.index, op.name, plan_.groups[op.group].name, op.seq, op.peer, {}};
  }

  void report_stuck() {
    std::vector<FrontierOp> ops = failures_;
    for (size_t i = 0; i < ops_.size(); ++i) {
      if (state_[i].posted && !state_[i].done) ops.push_back(frontier_op(i));
    }
    if (next_issue_ < ops_.size()) {
      frontier_.next = FrontierNext{ops_[next_issue_].step, grants_.granted(ops_[next_issue_].step), frontier_op(next_issue_)};
    }
    report(failures_.empty() ? FrontierStatus::STUCK : FrontierStatus::FAILED, ops);
    frontier_.next.reset();
  }

  void report(FrontierStatus status, const std::vector<FrontierOp>& ops = {}) {
    frontier_.status = status;
    frontier_.ops = ops;
    write_frontier(dir_, frontier_);
  }

  // After exit or crash: the process is gone for its peers; it stops calling MPI and waits to
  // be killed by the launcher.
  [[noreturn]] void idle() {
    for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
  }

  static std::string error_string(int rc) {
    char text[MPI_MAX_ERROR_STRING] = {};
    int length = 0;
    MPI_Error_string(rc, text, &length);
    return std::string(text, static_cast<size_t>(length));
  }

  const Plan& plan_;
  int32_t rank_;
  const std::vector<PlanOp>& ops_;
  std::string dir_;
  double stall_s_;
  GrantClient& grants_;
  size_t next_issue_ = 0;  // the first op not issued
  std::vector<OpState> state_;
  std::vector<MPI_Comm> comms_;
  std::vector<std::vector<int32_t>> members_;
  MPI_Comm new_group_comm_ = MPI_COMM_NULL;
  Frontier frontier_;
  std::vector<FrontierOp> failures_;
  bool stopped_ = false;
  int64_t in_flight_ = 0;    // comm_concurrency: slot holders posted and not completed
  uint32_t next_start_ = 0;  // comm_concurrency: the start order's next place
  std::deque<Buffer> eager_buffers_;  // stable addresses while MPI reads them
  std::deque<MPI_Request> eager_;
};

}  // namespace
}  // namespace lockstep::gpu

int main(int argc, char** argv) {
  using namespace lockstep::gpu;
  const std::optional<Plan> plan = worker_plan(argc, argv, "lockstep-mpi-replay", "lockstep replay --mpi");
  if (!plan) return 2;
  std::string error;
  MPI_Init(&argc, &argv);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size != plan->world) {
    std::fprintf(stderr, "lockstep-mpi-replay: the plan has %d ranks, mpirun started %d\n", plan->world, size);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  // Granted order: connect to the coordinator (lockstep replay) before the first op.
  GrantClient grants;
  if (plan->order == IssueOrder::GRANTED && !grants.connect(argv[2], rank, 60, error)) {
    std::fprintf(stderr, "lockstep-mpi-replay: rank %d: %s\n", rank, error.c_str());
    Frontier f;
    f.rank = rank;
    f.pid = static_cast<int64_t>(::getpid());
    f.status = FrontierStatus::FAILED;
    f.ops.push_back(FrontierOp{0, "setup", "world", 0, -1, "issue grants: " + error});
    write_frontier(argv[2], f);
    MPI_Finalize();
    return 1;
  }
  Worker worker(*plan, rank, argv[2], std::atof(argv[3]), grants);
  worker.create_comms();
  worker.run();
  MPI_Finalize();
  return 0;
}

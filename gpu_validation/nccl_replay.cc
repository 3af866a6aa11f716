// lockstep-nccl-replay PLAN OUTDIR STALL_SECONDS: one rank of `lockstep replay --nccl`
// (docs/replay.md), one process per rank: started by lockstep itself on this machine
// (LOCKSTEP_RANK, LOCKSTEP_WORLD, LOCKSTEP_LOCAL_RANK, LOCKSTEP_LOCAL_SIZE), or by mpirun or
// srun across nodes (their OMPI_COMM_WORLD_* or SLURM_* variables). OUTDIR must be shared by
// every rank: the frontiers go through it. The NCCL unique id goes by MPI_Bcast when an MPI
// launcher started the ranks and the worker was built with MPI (as nccl-tests does), else
// through OUTDIR/nccl-id (id_exchange.h). MPI does nothing else: reports never go through
// anything that may be stuck.
//
// Under granted order (the default) an op is issued only once the coordinator granted its step
// of the global issue order (grant_channel.h), and each issue is reported back.
//
// The rank's ops run as the host would issue them: in issue order, each on the CUDA stream of
// its lockstep stream (ops of one stream are ordered by CUDA; a dependency on another stream is
// a cudaStreamWaitEvent; one on a blocking op -- barrier, sync, new_group -- makes the host wait
// for it first). NCCL groups are ncclGroupStart/End around their ops. Communicators are
// nonblocking (config.blocking = 0): the host never blocks inside NCCL. The GPU decides what
// runs when, so comm_concurrency is not emulated here: CUDA_DEVICE_MAX_CONNECTIONS and
// NCCL_LAUNCH_ORDER_IMPLICIT act for real.
//
// The watchdog: the poll loop queries every op's event and every communicator's async error;
// ops outstanding and nothing completed for STALL_SECONDS: the frontier says stuck (and running
// again if something completes after all). A watchdog thread covers the loop itself: should a
// CUDA or NCCL call block it for longer, the thread reports the frontier as it stood. On
// OUTDIR/stop (written by the launcher once every rank reported) every communicator is aborted
// in one group call, memory is freed and the process exits.
#include <cuda_runtime.h>
#include <nccl.h>

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "gpu_validation/grant_channel.h"
#include "gpu_validation/id_exchange.h"
#include "gpu_validation/replay_plan.h"
#include "gpu_validation/watchdog.h"
#ifdef LOCKSTEP_NCCL_WITH_MPI
#include "gpu_validation/id_exchange_mpi.h"
#endif

namespace lockstep::gpu {
namespace {

using Clock = std::chrono::steady_clock;

int env_int(std::initializer_list<const char*> names, int fallback) {
  for (const char* name : names) {
    if (const char* v = std::getenv(name); v != nullptr && *v != 0) return std::atoi(v);
  }
  return fallback;
}

bool exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

// Element widths as NCCL types with exact integer sums: 1, 4 and 8 bytes as unsigned integers;
// 2 bytes as fp16 holding small integers (exact up to 2048).
ncclDataType_t nccl_type(uint32_t width) {
  switch (width) {
    case 1: return ncclUint8;
    case 2: return ncclFloat16;
    case 4: return ncclUint32;
    default: return ncclUint64;
  }
}

uint64_t limit_of(uint32_t width, int64_t members) {
  const uint64_t top = width == 1 ? 255 : width == 2 ? 2048 : uint64_t{1} << 30;
  return std::max<uint64_t>(1, top / static_cast<uint64_t>(std::max<int64_t>(1, members)));
}

uint16_t half_of(uint64_t v) {  // 0 < v <= 2048, exactly
  int e = 0;
  while ((uint64_t{2} << e) <= v) ++e;
  const uint64_t mantissa = (v - (uint64_t{1} << e)) << (10 - e);
  return static_cast<uint16_t>(((e + 15) << 10) | mantissa);
}

uint64_t from_half(uint16_t h) {
  const int e = ((h >> 10) & 0x1f) - 15;
  if (((h >> 10) & 0x1f) == 0 || e < 0) return 0;
  return (uint64_t{1} << e) + ((static_cast<uint64_t>(h & 0x3ff)) >> (10 - e));
}

// Every stride-th element carries seeded data: at most 4,096 of them per op.
int64_t stride_of(int64_t count) { return count > 4096 ? (count + 4095) / 4096 : 1; }

struct OpState {
  bool launched = false;
  bool done = false;
  bool failed = false;
  cudaEvent_t event = nullptr;
  void* in = nullptr;
  void* out = nullptr;
  std::vector<uint64_t> expected;  // at every stride-th element of `out` the worker checks
  int64_t out_count = 0;           // elements in `out`
  int64_t stride = 1;
  size_t staging = 0;              // this op's place in the pinned staging arena
};

class NcclWorker {
 public:
  NcclWorker(const Plan& plan, int32_t rank, std::string dir, double stall_s, GrantClient& grants)
      : plan_(plan), rank_(rank), ops_(plan.ranks[static_cast<size_t>(rank)]), dir_(std::move(dir)), stall_s_(stall_s),
        grants_(grants) {
    state_.resize(ops_.size());
    frontier_.rank = rank;
    frontier_.pid = static_cast<int64_t>(::getpid());
    frontier_.total = static_cast<uint32_t>(ops_.size());
  }

  // A failure before any op ran (no device, NCCL init): reported on the rank's first op.
  int setup_failed(const std::string& problem) {
    FrontierOp f{0, "setup", "world", 0, -1, problem};
    report(FrontierStatus::FAILED, {f});
    std::fprintf(stderr, "lockstep-nccl-replay: rank %d: %s\n", rank_, problem.c_str());
    return 1;
  }

  bool init(int local_rank, int local_size, IdExchange exchange, std::string& problem) {
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
      problem = "no CUDA device visible (the NCCL replay needs a GPU)";
      return false;
    }
    if (local_size > devices) {
      // Several ranks per GPU: NCCL refuses two ranks of a communicator on one device of one
      // host, so each process claims a host of its own and they talk through sockets on lo.
      const std::string host = "lockstep-replay-" + std::to_string(rank_);
      ::setenv("NCCL_HOSTID", host.c_str(), 0);
      ::setenv("NCCL_SOCKET_IFNAME", "lo", 0);
      ::setenv("NCCL_NET", "Socket", 0);
    }
    if (!cuda(cudaSetDevice(local_rank % devices), "cudaSetDevice", problem)) return false;
    // The unique id: rank 0's, by MPI_Bcast under an MPI launcher, else through the folder.
    ncclUniqueId id;
    IdBlob blob{};
    static_assert(sizeof id.internal == sizeof blob);
    if (rank_ == 0) {
      if (!nccl(ncclGetUniqueId(&id), "ncclGetUniqueId", problem)) return false;
      std::memcpy(blob.data(), id.internal, blob.size());
    }
#ifdef LOCKSTEP_NCCL_WITH_MPI
    const bool by_mpi = exchange == IdExchange::MPI;
#else
    const bool by_mpi = false;
    (void)exchange;
#endif
    if (by_mpi) {
#ifdef LOCKSTEP_NCCL_WITH_MPI
      if (!exchange_id_by_mpi(blob, problem)) return false;
#endif
    } else if (!exchange_id_by_file(dir_, rank_, blob, 60, problem)) {
      return false;
    }
    std::memcpy(id.internal, blob.data(), blob.size());
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    if (!nccl(ncclCommInitRankConfig(&world_, plan_.world, id, rank_, &config), "ncclCommInitRankConfig", problem) ||
        !settle(world_, "ncclCommInitRankConfig", problem)) {
      return false;
    }
    // One communicator per group, split from the world (every rank calls every split), and one
    // for new_group's rendezvous.
    for (const PlanGroup& g : plan_.groups) {
      const int32_t c = g.comm_of_rank[static_cast<size_t>(rank_)];
      ncclComm_t comm = nullptr;
      ncclConfig_t split = NCCL_CONFIG_INITIALIZER;
      split.blocking = 0;
      if (!nccl(ncclCommSplit(world_, c >= 0 ? c : NCCL_SPLIT_NOCOLOR, rank_, &comm, &split), "ncclCommSplit", problem) ||
          !settle(world_, "ncclCommSplit", problem) || (comm != nullptr && !settle(comm, "ncclCommSplit", problem))) {
        return false;
      }
      comms_.push_back(comm);
      members_.push_back(g.members_with(rank_));
    }
    if (!cuda(cudaStreamCreateWithFlags(&copy_stream_, cudaStreamNonBlocking), "cudaStreamCreate", problem)) return false;
    // Pinned staging for the seeded elements in and the checked elements out (at most 4,097 of
    // each per op): copies from pageable memory would make the host wait for the stream.
    size_t arena = 0;
    for (size_t i = 0; i < ops_.size(); ++i) {
      if (!cuda(cudaEventCreateWithFlags(&state_[i].event, cudaEventDisableTiming), "cudaEventCreate", problem)) return false;
      state_[i].staging = arena;
      arena += 2 * 4100 * 8;
    }
    if (!cuda(cudaMallocHost(reinterpret_cast<void**>(&arena_), std::max<size_t>(arena, 8)), "cudaMallocHost", problem)) {
      return false;
    }
    return true;
  }

  void run() {
    report(FrontierStatus::RUNNING);
    std::thread guard([this] { guard_loop(); });
    const Clock::time_point start = Clock::now();
    StallWatchdog watchdog(stall_s_);
    PollBackoff backoff(50, 2000);
    size_t completed = 0, next = 0;
    Clock::time_point last_stop_check = start;
    while (!stop_.load()) {
      heartbeat_.store(seconds_since(start));
      bool progress = false;
      // Launch in issue order while the steps are granted and the host would not block.
      bool launched_any = false;
      uint32_t last_step = 0;
      while (next < ops_.size() && !stopped_ && grants_.granted(ops_[next].step) && host_ready(next)) {
        launch(next);
        next = launched_through(next);
        last_step = ops_[next - 1].step;
        next_issue_.store(next);
        launched_any = true;
        progress = true;
      }
      if (launched_any) grants_.issued(last_step);
      bool outstanding = false;
      for (size_t i = 0; i < ops_.size(); ++i) {
        OpState& s = state_[i];
        if (!s.launched || s.done) continue;
        const cudaError_t q = cudaEventQuery(s.event);
        if (q == cudaSuccess) {
          if (!s.failed) check(i);
          s.done = true;
          ++completed;
          progress = true;
        } else if (q != cudaErrorNotReady) {
          fail(i, std::string("CUDA error: ") + cudaGetErrorString(q));
          s.done = true;
          ++completed;
        } else {
          outstanding = true;
        }
      }
      poll_async_errors();
      {
        std::lock_guard<std::mutex> lock(mutex_);
        frontier_.completed = static_cast<uint32_t>(completed);
      }
      if (completed == ops_.size() && next == ops_.size()) {
        report(failures_.empty() ? FrontierStatus::COMPLETED : FrontierStatus::FAILED, failures_);
        break;
      }
      outstanding = outstanding || next < ops_.size();  // waiting for a grant or a host block
      switch (watchdog.observe(seconds_since(start), progress, outstanding)) {
        case StallWatchdog::Action::REPORT_STUCK: report_stuck(); break;
        case StallWatchdog::Action::REPORT_RUNNING: report(FrontierStatus::RUNNING); break;
        case StallWatchdog::Action::NONE: break;
      }
      if (std::chrono::duration<double>(Clock::now() - last_stop_check).count() > 0.1) {
        last_stop_check = Clock::now();
        if (exists(dir_ + "/stop")) stop_.store(true);
      }
      // Sleeps until the next poll, or until a grant arrives.
      if (grants_.wait(backoff.next_us(progress))) backoff.next_us(true);
    }
    // Completed: wait for the launcher's stop only if some rank is stuck; a finished rank may
    // also just leave (ncclCommDestroy waits for peers' pending work, so abort instead).
    done_.store(true);
    guard.join();
    shutdown();
  }

 private:
  static double seconds_since(Clock::time_point start) {
    return std::chrono::duration<double>(Clock::now() - start).count();
  }

  bool cuda(cudaError_t status, const char* call, std::string& problem) {
    if (status == cudaSuccess) return true;
    problem = std::string(call) + ": " + cudaGetErrorString(status);
    return false;
  }

  bool nccl(ncclResult_t status, const char* call, std::string& problem) {
    if (status == ncclSuccess || status == ncclInProgress) return true;
    problem = std::string(call) + ": " + ncclGetErrorString(status);
    return false;
  }

  // Waits for a nonblocking communicator's pending call (init, split) to finish.
  bool settle(ncclComm_t comm, const char* call, std::string& problem) {
    const Clock::time_point start = Clock::now();
    for (;;) {
      ncclResult_t state = ncclSuccess;
      if (ncclCommGetAsyncError(comm, &state) != ncclSuccess) state = ncclInternalError;
      if (state == ncclSuccess) return true;
      if (state != ncclInProgress) {
        problem = std::string(call) + ": " + ncclGetErrorString(state);
        return false;
      }
      if (std::chrono::duration<double>(Clock::now() - start).count() > 120) {
        problem = std::string(call) + ": still in progress after 120 s";
        return false;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }

  // Whether the host issues op i now: every op it blocks on (a barrier, sync or new_group of its
  // thread) has completed, and every dependency was launched (always so in issue order).
  bool host_ready(size_t i) const {
    for (uint32_t g : ops_[i].gates) {
      if (!state_[g].done) return false;
    }
    for (uint32_t d : ops_[i].deps) {
      if (!state_[d].launched) return false;
    }
    return true;
  }

  // The index after op i's NCCL group (or after i).
  size_t launched_through(size_t i) const {
    size_t j = i + 1;
    while (ops_[i].batch >= 0 && j < ops_.size() && ops_[j].batch == ops_[i].batch) ++j;
    return j;
  }

  cudaStream_t stream_of(const std::string& name) {
    auto it = streams_.find(name);
    if (it != streams_.end()) return it->second;
    cudaStream_t s = nullptr;
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    streams_[name] = s;
    return s;
  }

  // Launches op i (and the rest of its NCCL group), each on its stream after its dependencies.
  void launch(size_t i) {
    const size_t end = launched_through(i);
    const bool group = ops_[i].batch >= 0;
    if (group) ncclGroupStart();
    for (size_t k = i; k < end; ++k) {
      const PlanOp& op = ops_[k];
      OpState& s = state_[k];
      s.launched = true;
      if (op.kind == PlanKind::EXIT || op.kind == PlanKind::CRASH) {
        // The rank leaves: it never calls NCCL again (its peers never hear from it).
        stopped_ = true;
        report(op.kind == PlanKind::EXIT ? FrontierStatus::EXITED : FrontierStatus::CRASHED);
        s.done = true;
        break;
      }
      cudaStream_t stream = stream_of(op.stream);
      for (uint32_t d : op.deps) {
        if (ops_[d].stream != op.stream && state_[d].event != nullptr) cudaStreamWaitEvent(stream, state_[d].event, 0);
      }
      if (plan_kind_communicates(op.kind)) post(k, stream);
      cudaEventRecord(s.event, stream);
    }
    if (group) {
      const ncclResult_t r = ncclGroupEnd();
      if (r != ncclSuccess && r != ncclInProgress) fail(i, std::string("ncclGroupEnd: ") + ncclGetErrorString(r));
    }
  }

  void post(size_t i, cudaStream_t stream) {
    const PlanOp& op = ops_[i];
    OpState& s = state_[i];
    if (op.kind == PlanKind::NEW_GROUP) {
      // A rendezvous of every world rank: an all-gather of the group's id over the world.
      s.expected.assign(static_cast<size_t>(plan_.world), op.new_group);
      s.out_count = plan_.world;
      s.stride = 1;
      if (!alloc(i, static_cast<int64_t>(plan_.world) * 4, stream)) return;
      const uint32_t id = op.new_group;
      std::memcpy(arena_ + s.staging, &id, 4);
      cudaMemcpyAsync(s.in, arena_ + s.staging, 4, cudaMemcpyHostToDevice, stream);
      result(i, ncclAllGather(s.in, s.out, 1, ncclUint32, world_, stream), "ncclAllGather");
      return;
    }
    ncclComm_t comm = comms_[op.group];
    const std::vector<int32_t>& members = members_[op.group];
    const auto n = static_cast<int64_t>(members.size());
    const int me = index_in(members, rank_);
    if (comm == nullptr || me < 0) {
      fail(i, "this rank is not a member of the op's communicator");
      return;
    }
    const uint32_t w = op.dtype_bytes;
    const ncclDataType_t t = nccl_type(w);
    const int64_t count = op.kind == PlanKind::BARRIER ? 1 : op.size_bytes / w;
    const int64_t piece = n > 0 ? count / n : 0;
    const int root = index_in(members, op.root);
    const uint64_t limit = limit_of(w, n);
    const int64_t stride = stride_of(count);
    auto v = [&](int32_t who, uint32_t seq, int64_t e) {
      return e % stride == 0 ? seeded_value(who, seq, e, op.dtype, op.tag, limit) : uint64_t{0};
    };
    auto sum = [&](int64_t e) {
      uint64_t total = 0;
      for (int32_t m : members) total += v(m, op.seq, e);
      return total;
    };
    int64_t in_count = 0, out_count = 0;
    switch (op.kind) {
      case PlanKind::ALLREDUCE: case PlanKind::BARRIER:
        in_count = out_count = count;
        for (int64_t e = 0; e < count; e += stride) s.expected.push_back(sum(e));
        break;
      case PlanKind::REDUCE:
        in_count = count;
        out_count = me == root ? count : 0;
        if (me == root) for (int64_t e = 0; e < count; e += stride) s.expected.push_back(sum(e));
        break;
      case PlanKind::BROADCAST:
        in_count = out_count = count;
        for (int64_t e = 0; e < count; e += stride) s.expected.push_back(v(op.root, op.seq, e));
        break;
      case PlanKind::ALLGATHER:
        in_count = piece;
        out_count = n * piece;
        for (int64_t e = 0; e < out_count; e += stride) s.expected.push_back(v(members[static_cast<size_t>(e / std::max<int64_t>(1, piece))], op.seq, e % std::max<int64_t>(1, piece)));
        break;
      case PlanKind::GATHER:
        in_count = piece;
        out_count = me == root ? n * piece : 0;
        for (int64_t e = 0; e < out_count; e += stride) s.expected.push_back(v(members[static_cast<size_t>(e / std::max<int64_t>(1, piece))], op.seq, e % std::max<int64_t>(1, piece)));
        break;
      case PlanKind::REDUCE_SCATTER:
        in_count = n * piece;
        out_count = piece;
        for (int64_t e = 0; e < piece; e += stride) s.expected.push_back(sum(me * piece + e));
        break;
      case PlanKind::ALL_TO_ALL:
        in_count = out_count = n * piece;
        for (int64_t e = 0; e < out_count; e += stride) {
          const int64_t j = e / std::max<int64_t>(1, piece);
          s.expected.push_back(v(members[static_cast<size_t>(j)], op.seq, me * piece + e % std::max<int64_t>(1, piece)));
        }
        break;
      case PlanKind::ALL_TO_ALL_SINGLE:
        // Parts of any sizes: sent as zeros, and not checked (the op's point is whether each
        // pair's send and receive agree, which a hang or an NCCL error shows).
        if (op.send_splits.size() != static_cast<size_t>(n) || op.recv_splits.size() != static_cast<size_t>(n)) {
          fail(i, "split sizes that are not one per member");
          return;
        }
        for (int64_t bytes : op.send_splits) in_count += bytes / w;
        for (int64_t bytes : op.recv_splits) out_count += bytes / w;
        break;
      case PlanKind::ALLGATHER_V:
        // As all_to_all_single: parts of any sizes, sent as zeros and not checked.
        if (op.recv_splits.size() != static_cast<size_t>(n)) {
          fail(i, "split sizes that are not one per member");
          return;
        }
        in_count = op.recv_splits[static_cast<size_t>(me)] / w;
        for (int64_t bytes : op.recv_splits) out_count += bytes / w;
        break;
      case PlanKind::SCATTER:
        in_count = me == root ? n * piece : 0;
        out_count = piece;
        for (int64_t e = 0; e < piece; e += stride) s.expected.push_back(v(op.root, op.seq, me * piece + e));
        break;
      case PlanKind::SEND:
        in_count = count;
        break;
      case PlanKind::RECV:
        out_count = count;
        {
          const int32_t from = op.peer >= 0 ? op.peer : op.match;
          for (int64_t e = 0; e < count; e += stride) s.expected.push_back(seeded_value(from, 0, e, op.dtype, op.tag, limit));
        }
        break;
      default: break;
    }
    s.out_count = out_count;
    s.stride = stride;
    if (!alloc(i, std::max(in_count, out_count) * static_cast<int64_t>(w), stream)) return;
    // This rank's contribution: zeros, and seeded values at every stride-th element, copied in
    // one strided transfer from the pinned arena.
    const uint32_t seq = op.kind == PlanKind::SEND ? 0 : op.seq;
    const bool gives = in_count > 0 && op.kind != PlanKind::RECV && op.kind != PlanKind::ALL_TO_ALL_SINGLE &&
                       op.kind != PlanKind::ALLGATHER_V &&
                       (op.kind != PlanKind::BROADCAST || me == root) &&
                       (op.kind != PlanKind::SCATTER || me == root);
    if (gives) {
      unsigned char* stage = arena_ + s.staging;
      size_t values = 0;
      for (int64_t e = 0; e < in_count; e += stride, ++values) {
        const uint64_t value = seeded_value(rank_, seq, e, op.dtype, op.tag, limit);
        if (w == 2) {
          const uint16_t h = half_of(value);
          std::memcpy(stage + values * 2, &h, 2);
        } else {
          std::memcpy(stage + values * w, &value, w);
        }
      }
      cudaMemcpy2DAsync(s.in, static_cast<size_t>(stride) * w, stage, w, w, values, cudaMemcpyHostToDevice, stream);
    }
    const auto c = static_cast<size_t>(count), p = static_cast<size_t>(piece);
    switch (op.kind) {
      case PlanKind::ALLREDUCE: case PlanKind::BARRIER:
        result(i, ncclAllReduce(s.in, s.out, c, t, ncclSum, comm, stream), "ncclAllReduce");
        break;
      case PlanKind::REDUCE: result(i, ncclReduce(s.in, s.out, c, t, ncclSum, root, comm, stream), "ncclReduce"); break;
      case PlanKind::BROADCAST: result(i, ncclBroadcast(s.in, s.out, c, t, root, comm, stream), "ncclBroadcast"); break;
      case PlanKind::ALLGATHER: result(i, ncclAllGather(s.in, s.out, p, t, comm, stream), "ncclAllGather"); break;
      case PlanKind::GATHER: result(i, ncclGather(s.in, s.out, p, t, root, comm, stream), "ncclGather"); break;
      case PlanKind::REDUCE_SCATTER:
        result(i, ncclReduceScatter(s.in, s.out, p, t, ncclSum, comm, stream), "ncclReduceScatter");
        break;
      case PlanKind::ALL_TO_ALL: result(i, ncclAlltoAll(s.in, s.out, p, t, comm, stream), "ncclAlltoAll"); break;
      case PlanKind::ALL_TO_ALL_SINGLE: {
        // As PyTorch's alltoall_base with split sizes: a send and a receive per member, grouped.
        auto* in = static_cast<unsigned char*>(s.in);
        auto* out = static_cast<unsigned char*>(s.out);
        ncclGroupStart();
        for (int64_t j = 0; j < n; ++j) {
          const auto at = static_cast<size_t>(j);
          const auto sent = static_cast<size_t>(op.send_splits[at] / w), received = static_cast<size_t>(op.recv_splits[at] / w);
          result(i, ncclSend(in, sent, t, static_cast<int>(j), comm, stream), "ncclSend");
          result(i, ncclRecv(out, received, t, static_cast<int>(j), comm, stream), "ncclRecv");
          in += sent * w;
          out += received * w;
        }
        result(i, ncclGroupEnd(), "ncclGroupEnd");
        break;
      }
      case PlanKind::ALLGATHER_V: {
        // As PyTorch's all_gather of unequal tensors: a broadcast from each member into its
        // place, grouped.
        auto* out = static_cast<unsigned char*>(s.out);
        ncclGroupStart();
        for (int64_t j = 0; j < n; ++j) {
          const auto part = static_cast<size_t>(op.recv_splits[static_cast<size_t>(j)] / w);
          result(i, ncclBroadcast(j == me ? s.in : out, out, part, t, static_cast<int>(j), comm, stream), "ncclBroadcast");
          out += part * w;
        }
        result(i, ncclGroupEnd(), "ncclGroupEnd");
        break;
      }
      case PlanKind::SCATTER: result(i, ncclScatter(s.in, s.out, p, t, root, comm, stream), "ncclScatter"); break;
      case PlanKind::SEND: result(i, ncclSend(s.in, c, t, index_in(members, op.peer), comm, stream), "ncclSend"); break;
      case PlanKind::RECV: {
        const int32_t from = op.peer >= 0 ? op.peer : op.match;
        result(i, ncclRecv(s.out, c, t, index_in(members, from), comm, stream), "ncclRecv");
        break;
      }
      default: break;
    }
  }

  bool alloc(size_t i, int64_t bytes, cudaStream_t stream) {
    OpState& s = state_[i];
    const auto b = static_cast<size_t>(std::max<int64_t>(bytes, 8));
    if (cudaMallocAsync(&s.in, b, stream) != cudaSuccess || cudaMallocAsync(&s.out, b, stream) != cudaSuccess) {
      fail(i, "cudaMallocAsync failed");
      return false;
    }
    cudaMemsetAsync(s.in, 0, b, stream);
    cudaMemsetAsync(s.out, 0, b, stream);
    return true;
  }

  void result(size_t i, ncclResult_t r, const char* call) {
    if (r != ncclSuccess && r != ncclInProgress) fail(i, std::string(call) + ": " + ncclGetErrorString(r));
  }

  // Checks the data of a completed op against the seeded inputs every member gave.
  void check(size_t i) {
    const PlanOp& op = ops_[i];
    OpState& s = state_[i];
    if (s.expected.empty() || s.out == nullptr) return release(s);
    const uint32_t w = op.kind == PlanKind::NEW_GROUP ? 4 : op.dtype_bytes;
    const int64_t stride = s.stride;
    const size_t values = std::min(s.expected.size(), static_cast<size_t>((s.out_count + stride - 1) / stride));
    unsigned char* stage = arena_ + s.staging + 4100 * 8;
    cudaStreamWaitEvent(copy_stream_, s.event, 0);
    cudaMemcpy2DAsync(stage, w, s.out, static_cast<size_t>(stride) * w, w, values, cudaMemcpyDeviceToHost, copy_stream_);
    cudaStreamSynchronize(copy_stream_);  // the op is complete: this waits for the copy only
    std::vector<unsigned char> host(stage, stage + values * w);
    for (size_t k = 0; k < values; ++k) {
      const size_t at = k * static_cast<size_t>(stride);
      uint64_t got = 0;
      if (w == 2) {
        uint16_t h = 0;
        std::memcpy(&h, &host[k * 2], 2);
        got = from_half(h);
      } else {
        std::memcpy(&got, &host[k * w], w);
      }
      if (got != s.expected[k]) {
        fail(i, op.kind == PlanKind::NEW_GROUP
                    ? "mismatch: rank " + std::to_string(at) + " created another group in the same new_group call"
                    : "wrong data: element " + std::to_string(at) + " is " + std::to_string(got) + ", expected " +
                          std::to_string(s.expected[k]));
        break;
      }
    }
    release(s);
  }

  void release(OpState& s) {
    if (s.in != nullptr) cudaFreeAsync(s.in, copy_stream_);
    if (s.out != nullptr) cudaFreeAsync(s.out, copy_stream_);
    s.in = s.out = nullptr;
    s.expected.clear();
    s.expected.shrink_to_fit();
  }

  void poll_async_errors() {
    for (size_t g = 0; g < comms_.size(); ++g) {
      if (comms_[g] == nullptr || comm_failed_.count(g)) continue;
      ncclResult_t state = ncclSuccess;
      ncclCommGetAsyncError(comms_[g], &state);
      if (state == ncclSuccess || state == ncclInProgress) continue;
      comm_failed_.insert({g, true});
      for (size_t i = 0; i < ops_.size(); ++i) {
        if (state_[i].launched && !state_[i].done && ops_[i].group == g && plan_kind_communicates(ops_[i].kind)) {
          fail(i, std::string("NCCL error: ") + ncclGetErrorString(state));
        }
      }
    }
  }

  void fail(size_t i, const std::string& problem) {
    state_[i].failed = true;
    const PlanOp& op = ops_[i];
    std::lock_guard<std::mutex> lock(mutex_);
    failures_.push_back(FrontierOp{op.index, op.name, plan_.groups[op.group].name, op.seq, op.peer, problem});
  }

  // The ops the rank is stuck in: on each stream, the first op not done (with the rest of its
  // NCCL group); what is queued behind it on the same stream cannot have started.
  std::vector<FrontierOp> outstanding_ops() {
    std::vector<FrontierOp> ops = failures_;
    std::map<std::string, int32_t> head_batch;  // per stream: the batch of its head (-1: none)
    for (size_t i = 0; i < ops_.size(); ++i) {
      const PlanOp& op = ops_[i];
      if (!state_[i].launched || state_[i].done || state_[i].failed || !plan_kind_communicates(op.kind)) continue;
      const auto head = head_batch.find(op.stream);
      if (head != head_batch.end() && (op.batch < 0 || op.batch != head->second)) continue;
      head_batch[op.stream] = op.batch;
      ops.push_back(FrontierOp{op.index, op.name, plan_.groups[op.group].name, op.seq, op.peer, {}});
    }
    return ops;
  }

  void report_stuck() {
    std::vector<FrontierOp> ops;
    std::optional<FrontierNext> next;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      ops = outstanding_ops();
      const size_t n = next_issue_.load();
      if (n < ops_.size()) {
        const PlanOp& op = ops_[n];
        next = FrontierNext{op.step, grants_.granted(op.step),
                            FrontierOp{op.index, op.name, plan_.groups[op.group].name, op.seq, op.peer, {}}};
      }
    }
    report(failures_.empty() ? FrontierStatus::STUCK : FrontierStatus::FAILED, ops, next);
  }

  void report(FrontierStatus status, const std::vector<FrontierOp>& ops = {}, std::optional<FrontierNext> next = {}) {
    std::lock_guard<std::mutex> lock(report_mutex_);
    Frontier f;
    {
      std::lock_guard<std::mutex> state_lock(mutex_);
      frontier_.status = status;
      frontier_.ops = ops;
      frontier_.next = std::move(next);
      f = frontier_;
    }
    write_frontier(dir_, f);
  }

  // The watchdog thread: should the poll loop itself be held inside a CUDA or NCCL call for
  // longer than the stall time, it reports the frontier as it stood, and on DIR/stop it aborts
  // the communicators, which releases such a call.
  void guard_loop() {
    const Clock::time_point start = Clock::now();
    bool reported = false;
    while (!done_.load()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      const double now = seconds_since(start);
      if (!reported && now - heartbeat_.load() > stall_s_ + 1) {
        reported = true;
        report_stuck();
      }
      if (reported && exists(dir_ + "/stop")) {
        abort_all();
        std::_Exit(0);
      }
    }
  }

  void abort_all() {
    std::lock_guard<std::mutex> lock(abort_mutex_);
    if (aborted_) return;
    aborted_ = true;
    // Every communicator in one group call (NCCL ≥ 2.22 aborts them together), then the world.
    ncclGroupStart();
    for (ncclComm_t c : comms_) {
      if (c != nullptr) ncclCommAbort(c);
    }
    ncclGroupEnd();
    if (world_ != nullptr) ncclCommAbort(world_);
  }

  void shutdown() {
    const bool clean = frontier_.status == FrontierStatus::COMPLETED;
    if (!clean) {
      // Stuck, failed, exited: wait for the launcher's stop (every rank reported), then abort.
      while (!exists(dir_ + "/stop")) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    abort_all();  // also for a completed rank: ncclCommDestroy would wait for peers that may be stuck
    for (OpState& s : state_) {
      if (s.in != nullptr) cudaFree(s.in);
      if (s.out != nullptr) cudaFree(s.out);
      if (s.event != nullptr) cudaEventDestroy(s.event);
    }
    if (arena_ != nullptr) cudaFreeHost(arena_);
  }

  const Plan& plan_;
  int32_t rank_;
  const std::vector<PlanOp>& ops_;
  std::string dir_;
  double stall_s_;
  GrantClient& grants_;
  std::atomic<size_t> next_issue_{0};  // the first op not issued (the guard thread reads it)
  std::vector<OpState> state_;
  ncclComm_t world_ = nullptr;
  std::vector<ncclComm_t> comms_;
  std::vector<std::vector<int32_t>> members_;
  std::map<size_t, bool> comm_failed_;
  std::map<std::string, cudaStream_t> streams_;
  cudaStream_t copy_stream_ = nullptr;
  unsigned char* arena_ = nullptr;
  Frontier frontier_;
  std::vector<FrontierOp> failures_;
  bool stopped_ = false;
  std::atomic<bool> stop_{false}, done_{false};
  std::atomic<double> heartbeat_{0};
  std::mutex mutex_, report_mutex_, abort_mutex_;
  bool aborted_ = false;
};

}  // namespace
}  // namespace lockstep::gpu

int main(int argc, char** argv) {
  using namespace lockstep::gpu;
  const std::optional<Plan> plan = worker_plan(argc, argv, "lockstep-nccl-replay", "lockstep replay --nccl");
  if (!plan) return 2;
  int rank = env_int({"LOCKSTEP_RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "SLURM_PROCID"}, -1);
  int world = env_int({"LOCKSTEP_WORLD", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS"}, -1);
  const IdExchange exchange = id_exchange_method([](const char* name) { return std::getenv(name); });
  if (exchange == IdExchange::MPI) {
#ifdef LOCKSTEP_NCCL_WITH_MPI
    // Started by an MPI launcher: MPI says who is who, and carries the unique id.
    std::string problem;
    if (!mpi_start(&argc, &argv, rank, world, problem)) {
      std::fprintf(stderr, "lockstep-nccl-replay: %s\n", problem.c_str());
      return 2;
    }
#else
    std::fprintf(stderr, "lockstep-nccl-replay: built without MPI: the NCCL unique id goes through %s/nccl-id\n", argv[2]);
#endif
  }
  const int local_rank = env_int({"LOCKSTEP_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID"}, rank);
  const int local_size = env_int({"LOCKSTEP_LOCAL_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS"}, 1);
  if (rank < 0 || world != plan->world || rank >= world) {
    std::fprintf(stderr, "lockstep-nccl-replay: rank %d of %d, but the plan has %d ranks (set by lockstep, mpirun or srun)\n",
                 rank, world, plan->world);
    return 2;
  }
  GrantClient grants;
  NcclWorker worker(*plan, rank, argv[2], std::atof(argv[3]), grants);
  std::string problem;
  if (plan->order == IssueOrder::GRANTED && !grants.connect(argv[2], rank, 60, problem)) {
    return worker.setup_failed("issue grants: " + problem);
  }
  if (!worker.init(local_rank, local_size, exchange, problem)) return worker.setup_failed(problem);
  worker.run();
#ifdef LOCKSTEP_NCCL_WITH_MPI
  if (exchange == IdExchange::MPI) mpi_stop();
#endif
  return 0;
}

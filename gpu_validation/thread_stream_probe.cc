// lockstep-thread-stream-probe: does a synchronous collective issued from a second host thread
// chain with the first thread's through the default stream the threads share, as the model says
// (docs/semantics.md, "Threads"; docs/fidelity.md, the probe thread-stream)?
//
//   lockstep-thread-stream-probe --stream legacy|per-thread [--ranks N] [--timeout S] [--size BYTES]
//
// Forks N ranks (default 2), one process each, sharing the visible GPUs as `lockstep replay
// --nccl` does (a host id of its own per process, sockets on lo). Each rank makes two
// communicators a and b, connects both with one all-reduce each (the same order on every rank),
// then two host threads each issue one all-reduce the way PyTorch's ProcessGroupNCCL does: the
// communicator's stream (non-blocking, as PyTorch's pool streams) waits for an event on the
// thread's current stream, the all-reduce runs on it, and the current stream waits for its end
// (work.wait()). The current stream is the legacy default stream, shared by the threads
// (`legacy`, what PyTorch uses), or each thread's own per-thread default stream (`per-thread`).
// Even ranks' threads issue a then b, odd ranks' b then a. Sharing the stream, the chains cross
// and nothing completes; with a stream per thread both all-reduces run at once and complete.
//
// Output: one line per rank, then the outcome. Exit codes: 0 every rank completed both
// all-reduces with correct data; 1 every rank hung in them (no progress for S seconds after
// issuing); 3 anything else (setup failed, ranks disagree: undecided); 77 no GPU; 2 usage.
// Every wait is bounded: setup (init, connections) 60 s, the probe S seconds, teardown 10 s;
// a rank past its bound is killed and reaped.
#include <cuda_runtime.h>
#include <nccl.h>

#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

constexpr int MAX_RANKS = 8;
constexpr int SETUP_LIMIT_S = 60;
constexpr int TEARDOWN_LIMIT_S = 10;

Clock::time_point after(double seconds) {
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

enum Outcome : int { RUNNING = 0, COMPLETED, STUCK, FAILED, NO_DEVICE };

// One rank's report, in memory shared by the parent and every rank (lock-free atomics work
// across processes on a shared mapping).
struct RankSlot {
  std::atomic<int> outcome;
  std::atomic<int> set_up;  // 1 once both communicators are connected
  char detail[384];
};

struct Shared {
  std::atomic<int> ids_ready;
  ncclUniqueId ids[2];
  char device[256];
  int nccl_version;
  RankSlot ranks[MAX_RANKS];
};

struct Options {
  bool per_thread = false;
  int ranks = 2;
  double timeout_s = 5;
  size_t size_bytes = 4u << 20;
};

void report(RankSlot& slot, Outcome outcome, const std::string& detail) {
  std::snprintf(slot.detail, sizeof slot.detail, "%s", detail.c_str());
  slot.outcome.store(outcome);
}

std::string cuda_problem(cudaError_t status, const char* call) {
  return std::string(call) + ": " + cudaGetErrorString(status);
}

std::string nccl_problem(ncclResult_t status, const char* call) {
  return std::string(call) + ": " + ncclGetErrorString(status);
}

#define CUDA_OR_FAIL(call)                                                     \
  do {                                                                         \
    const cudaError_t status_ = (call);                                        \
    if (status_ != cudaSuccess) return fail(cuda_problem(status_, #call));     \
  } while (0)
#define NCCL_OR_FAIL(call)                                                     \
  do {                                                                         \
    const ncclResult_t status_ = (call);                                       \
    if (status_ != ncclSuccess) return fail(nccl_problem(status_, #call));     \
  } while (0)

// One rank: returns the process's exit status (the outcome is in its slot).
class Rank {
 public:
  Rank(Shared& shared, const Options& options, int rank)
      : shared_(shared), options_(options), rank_(rank), slot_(shared.ranks[rank]) {}

  int run() {
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
      report(slot_, NO_DEVICE, "no CUDA device visible");
      return 0;
    }
    if (options_.ranks > devices) {
      // As lockstep-nccl-replay: NCCL refuses two ranks of a communicator on one device of one
      // host, so each process claims a host of its own and they talk through sockets on lo.
      const std::string host = "lockstep-stream-probe-" + std::to_string(rank_);
      ::setenv("NCCL_HOSTID", host.c_str(), 0);
      ::setenv("NCCL_SOCKET_IFNAME", "lo", 0);
      ::setenv("NCCL_NET", "Socket", 0);
    }
    CUDA_OR_FAIL(cudaSetDevice(rank_ % devices));
    if (rank_ == 0) {
      cudaDeviceProp props{};
      if (cudaGetDeviceProperties(&props, 0) == cudaSuccess) {
        std::snprintf(shared_.device, sizeof shared_.device, "%s", props.name);
      }
      ncclGetVersion(&shared_.nccl_version);
      NCCL_OR_FAIL(ncclGetUniqueId(&shared_.ids[0]));
      NCCL_OR_FAIL(ncclGetUniqueId(&shared_.ids[1]));
      shared_.ids_ready.store(1);
    }
    while (shared_.ids_ready.load() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    for (int c = 0; c < 2; ++c) {
      NCCL_OR_FAIL(ncclCommInitRank(&comms_[c], options_.ranks, shared_.ids[c], rank_));
      CUDA_OR_FAIL(cudaStreamCreateWithFlags(&streams_[c], cudaStreamNonBlocking));
      CUDA_OR_FAIL(cudaEventCreateWithFlags(&ready_[c], cudaEventDisableTiming));
      CUDA_OR_FAIL(cudaEventCreateWithFlags(&done_[c], cudaEventDisableTiming));
      CUDA_OR_FAIL(cudaMalloc(&buffers_[c], options_.size_bytes));
    }
    // Connect both communicators (NCCL connects at the first collective) in the same order on
    // every rank, with the probe's own size, so that the probe itself is only the streams.
    for (int c = 0; c < 2; ++c) {
      NCCL_OR_FAIL(ncclAllReduce(buffers_[c], buffers_[c], count(), ncclFloat, ncclSum, comms_[c], streams_[c]));
      CUDA_OR_FAIL(cudaStreamSynchronize(streams_[c]));
    }
    // Rank r contributes r + 1 everywhere: the sum is exact in fp32.
    const std::vector<float> host(count(), static_cast<float>(rank_ + 1));
    for (int c = 0; c < 2; ++c) {
      CUDA_OR_FAIL(cudaMemcpy(buffers_[c], host.data(), options_.size_bytes, cudaMemcpyHostToDevice));
    }
    CUDA_OR_FAIL(cudaDeviceSynchronize());
    slot_.set_up.store(1);

    // The probe: two host threads, a then b on even ranks, b then a on odd ones.
    std::atomic<int> turn{rank_ % 2 == 0 ? 0 : 1};
    std::string problems[2];
    auto thread_body = [&](int c) {
      while (turn.load() != c) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      problems[c] = issue(c);
      turn.store(1 - c);
    };
    std::thread a(thread_body, 0), b(thread_body, 1);
    a.join();
    b.join();
    for (const std::string& p : problems) {
      if (!p.empty()) return fail(p);
    }
    return wait_and_check();
  }

 private:
  size_t count() const { return options_.size_bytes / sizeof(float); }

  int fail(const std::string& problem) {
    report(slot_, FAILED, problem);
    abort_comms();
    return 1;
  }

  // What ProcessGroupNCCL does for a synchronous collective from this thread: the comm stream
  // waits for the current stream, the collective runs, the current stream waits for it.
  std::string issue(int c) {
    const cudaStream_t current = options_.per_thread ? cudaStreamPerThread : cudaStreamLegacy;
    cudaError_t status = cudaEventRecord(ready_[c], current);
    if (status == cudaSuccess) status = cudaStreamWaitEvent(streams_[c], ready_[c], 0);
    if (status != cudaSuccess) return cuda_problem(status, "cudaEventRecord/cudaStreamWaitEvent (before)");
    const ncclResult_t result = ncclAllReduce(buffers_[c], buffers_[c], count(), ncclFloat, ncclSum, comms_[c], streams_[c]);
    if (result != ncclSuccess) return nccl_problem(result, "ncclAllReduce");
    status = cudaEventRecord(done_[c], streams_[c]);
    if (status == cudaSuccess) status = cudaStreamWaitEvent(current, done_[c], 0);
    if (status != cudaSuccess) return cuda_problem(status, "cudaEventRecord/cudaStreamWaitEvent (after)");
    return {};
  }

  int wait_and_check() {
    const Clock::time_point deadline = after(options_.timeout_s);
    bool finished[2] = {false, false};
    while (!(finished[0] && finished[1]) && Clock::now() < deadline) {
      for (int c = 0; c < 2; ++c) {
        if (finished[c]) continue;
        const cudaError_t status = cudaEventQuery(done_[c]);
        if (status == cudaSuccess) {
          finished[c] = true;
        } else if (status != cudaErrorNotReady) {
          return fail(cuda_problem(status, "cudaEventQuery"));
        }
        ncclResult_t async = ncclSuccess;
        ncclCommGetAsyncError(comms_[c], &async);
        if (async != ncclSuccess) return fail(nccl_problem(async, "ncclCommGetAsyncError"));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    if (!(finished[0] && finished[1])) {
      const char* state[2] = {"completed", "outstanding"};
      report(slot_, STUCK,
             std::string("no progress for ") + std::to_string(static_cast<int>(options_.timeout_s)) +
                 " s: all-reduce on a " + state[finished[0] ? 0 : 1] + ", on b " + state[finished[1] ? 0 : 1]);
      abort_comms();
      return 0;
    }
    const float expected = static_cast<float>(options_.ranks * (options_.ranks + 1) / 2);
    std::vector<float> host(count());
    for (int c = 0; c < 2; ++c) {
      CUDA_OR_FAIL(cudaMemcpy(host.data(), buffers_[c], options_.size_bytes, cudaMemcpyDeviceToHost));
      for (size_t i = 0; i < host.size(); ++i) {
        if (host[i] != expected) {
          return fail(std::string("wrong data on ") + (c == 0 ? "a" : "b") + ": element " + std::to_string(i) + " is " +
                      std::to_string(host[i]) + ", expected " + std::to_string(expected));
        }
      }
    }
    report(slot_, COMPLETED, "both all-reduces completed, data correct");
    abort_comms();
    return 0;
  }

  // Aborts (not destroys) the communicators: a peer may be stuck, and an abort also stops this
  // rank's kernels that wait for it.
  void abort_comms() {
    for (ncclComm_t& comm : comms_) {
      if (comm != nullptr) ncclCommAbort(comm);
      comm = nullptr;
    }
  }

  Shared& shared_;
  const Options& options_;
  const int rank_;
  RankSlot& slot_;
  ncclComm_t comms_[2] = {nullptr, nullptr};
  cudaStream_t streams_[2] = {nullptr, nullptr};
  cudaEvent_t ready_[2] = {nullptr, nullptr};
  cudaEvent_t done_[2] = {nullptr, nullptr};
  void* buffers_[2] = {nullptr, nullptr};
};

bool parse(int argc, char** argv, Options& options) {
  bool stream_given = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const char* value = i + 1 < argc ? argv[i + 1] : nullptr;
    if (arg == "--stream" && value) {
      const std::string v = argv[++i];
      if (v != "legacy" && v != "per-thread") return false;
      options.per_thread = v == "per-thread";
      stream_given = true;
    } else if (arg == "--ranks" && value) {
      options.ranks = std::atoi(argv[++i]);
    } else if (arg == "--timeout" && value) {
      options.timeout_s = std::atof(argv[++i]);
    } else if (arg == "--size" && value) {
      options.size_bytes = static_cast<size_t>(std::atoll(argv[++i]));
    } else {
      return false;
    }
  }
  return stream_given && options.ranks >= 2 && options.ranks <= MAX_RANKS && options.timeout_s > 0 &&
         options.size_bytes >= sizeof(float) && options.size_bytes % sizeof(float) == 0;
}

// Waits until every rank satisfies `done` or the deadline passes; reaps ranks that exit.
template <typename Done>
void wait_for(std::vector<pid_t>& pids, Clock::time_point deadline, Done done) {
  while (Clock::now() < deadline) {
    bool all = true;
    for (size_t r = 0; r < pids.size(); ++r) {
      if (pids[r] > 0 && ::waitpid(pids[r], nullptr, WNOHANG) == pids[r]) pids[r] = -1;
      all = all && done(r);
    }
    if (all) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  if (!parse(argc, argv, options)) {
    std::fprintf(stderr,
                 "usage: lockstep-thread-stream-probe --stream legacy|per-thread [--ranks N (2-%d)] [--timeout S] "
                 "[--size BYTES (a multiple of 4)]\n",
                 MAX_RANKS);
    return 2;
  }
  void* mapping = ::mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (mapping == MAP_FAILED) {
    std::perror("thread_stream_probe.cc: mmap");
    return 3;
  }
  Shared& shared = *new (mapping) Shared{};
  std::fflush(stdout);
  // The parent never touches CUDA (a child of a process that did cannot use it).
  std::vector<pid_t> pids(static_cast<size_t>(options.ranks), -1);
  for (int r = 0; r < options.ranks; ++r) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      Rank rank(shared, options, r);
      ::_exit(rank.run());  // no destructors or atexit handlers that could wait for the GPU
    }
    pids[static_cast<size_t>(r)] = pid;
  }
  auto slot = [&](size_t r) -> RankSlot& { return shared.ranks[r]; };
  auto setup_over = [&](size_t r) { return slot(r).set_up.load() == 1 || slot(r).outcome.load() != RUNNING; };
  auto reported = [&](size_t r) { return slot(r).outcome.load() != RUNNING; };
  auto exited = [&](size_t r) { return pids[r] < 0; };
  wait_for(pids, after(SETUP_LIMIT_S), setup_over);
  wait_for(pids, after(options.timeout_s + 5), reported);
  wait_for(pids, after(TEARDOWN_LIMIT_S), exited);
  for (pid_t& pid : pids) {
    if (pid > 0) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
      pid = -1;
    }
  }

  int counts[5] = {0, 0, 0, 0, 0};
  const std::string nccl = shared.nccl_version > 0 ? "NCCL " + std::to_string(shared.nccl_version) : "NCCL not loaded";
  std::printf("stream probe: %s current stream, %d ranks, %zu bytes per all-reduce, %s, %s\n",
              options.per_thread ? "per-thread" : "legacy default (shared)", options.ranks, options.size_bytes,
              shared.device[0] ? shared.device : "no device named", nccl.c_str());
  const char* names[5] = {"no report (killed at its time limit)", "completed", "stuck", "failed", "no device"};
  for (int r = 0; r < options.ranks; ++r) {
    const RankSlot& s = shared.ranks[r];
    const int outcome = s.outcome.load();
    ++counts[outcome];
    std::printf("  rank %d: %s%s%s%s\n", r, names[outcome], s.detail[0] ? ": " : "", s.detail,
                outcome == RUNNING && s.set_up.load() == 0 ? " (during setup)" : "");
  }
  if (counts[NO_DEVICE] > 0) {
    std::printf("SKIP: no CUDA device visible; the stream probe needs one\n");
    return 77;
  }
  if (counts[COMPLETED] == options.ranks) {
    std::printf("completed: every rank ran both all-reduces, data correct\n");
    return 0;
  }
  if (counts[STUCK] == options.ranks) {
    std::printf("hung: every rank stuck in the all-reduces its threads issued\n");
    return 1;
  }
  std::printf("undecided: ranks disagree or failed (above)\n");
  return 3;
}

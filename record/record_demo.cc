// lockstep_record_demo: small NCCL programs for the recorder's tests, docs and benchmark, linked
// against the fake libnccl (or any libnccl with the same ABI; no CUDA calls of its own, so a real
// one needs streams it does not make: it passes the null stream). Ranks are forked processes
// that share an ncclUniqueId made before the fork, as torchrun's workers share one through the
// store.
//
//   lockstep_record_demo head-to-head   2 ranks; each sends to the other, then receives, outside
//                                       a group: deadlocks on real NCCL
//   lockstep_record_demo grouped        the same inside ncclGroupStart/End, then an all-reduce
//   lockstep_record_demo split          4 ranks: world, ncclCommSplit by parity, collectives on
//                                       both (broadcast, all-gather, reduce-scatter, bcast)
//   lockstep_record_demo init-all       one process, ncclCommInitAll over 2 devices, a grouped
//                                       all-reduce on both
//   lockstep_record_demo hang           2 ranks; rank 0 issues one all-reduce more, then both
//                                       sleep until killed (what a hung job looks like)
//   lockstep_record_dlopen PLUGIN MODE  the same, from record_demo_plugin.so loaded RTLD_LOCAL
//   lockstep_record_demo bench N [GAP]  N all-reduces on one rank, GAP ns of host work between
//                                       them (default 0); prints ns per call

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "record/nccl_api.h"

using namespace lockstep::nccl_abi;

namespace {

#define CHECK(call)                                                                   \
  do {                                                                                \
    const Result result_ = (call);                                                    \
    if (result_ != SUCCESS) {                                                         \
      std::fprintf(stderr, "%s:%d: %s failed: %d\n", __FILE__, __LINE__, #call, result_); \
      std::exit(1);                                                                   \
    }                                                                                 \
  } while (0)

StreamHandle stream_of(uintptr_t n) { return reinterpret_cast<StreamHandle>(n); }

// Runs body(rank) in `world` forked processes; true when all exit 0.
bool run_ranks(int world, const std::function<void(int, const UniqueId&)>& body) {
  UniqueId id;
  CHECK(ncclGetUniqueId(&id));
  std::vector<pid_t> children;
  for (int rank = 0; rank < world; ++rank) {
    const pid_t pid = ::fork();
    if (pid < 0) {
      std::perror("fork");
      return false;
    }
    if (pid == 0) {
      body(rank, id);
      std::exit(0);  // exit, not _exit: the recorder flushes at exit
    }
    children.push_back(pid);
  }
  bool ok = true;
  for (pid_t pid : children) {
    int status = 0;
    if (::waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) ok = false;
  }
  return ok;
}

float g_buffer[1024];
volatile long g_work = 0;

void head_to_head(int rank, const UniqueId& id, bool grouped) {
  CommHandle comm = nullptr;
  CHECK(ncclCommInitRank(&comm, 2, id, rank));
  const int peer = 1 - rank;
  if (grouped) CHECK(ncclGroupStart());
  CHECK(ncclSend(g_buffer, 1024, FLOAT32, peer, comm, stream_of(0)));
  CHECK(ncclRecv(g_buffer, 1024, FLOAT32, peer, comm, stream_of(0)));
  if (grouped) {
    CHECK(ncclGroupEnd());
    CHECK(ncclAllReduce(g_buffer, g_buffer, 1024, FLOAT32, SUM, comm, stream_of(0)));
  }
  CHECK(ncclCommDestroy(comm));
}

void split(int rank, const UniqueId& id) {
  CommHandle world = nullptr, half = nullptr;
  CHECK(ncclCommInitRank(&world, 4, id, rank));
  CHECK(ncclCommSplit(world, rank % 2, rank, &half, nullptr));
  CHECK(ncclAllReduce(g_buffer, g_buffer, 256, BFLOAT16, SUM, half, stream_of(0x10)));
  CHECK(ncclBroadcast(g_buffer, g_buffer, 64, INT64, 1, world, stream_of(0x20)));
  CHECK(ncclAllGather(g_buffer, g_buffer, 128, FLOAT16, half, stream_of(0x10)));
  CHECK(ncclReduceScatter(g_buffer, g_buffer, 32, FLOAT32, SUM, world, stream_of(0x20)));
  CHECK(ncclBcast(g_buffer, 16, UINT8, 1, half, stream_of(0x10)));  // root: rank 1 of the half
  CHECK(ncclCommFinalize(half));
  CHECK(ncclCommDestroy(half));
  CHECK(ncclCommDestroy(world));
}

int init_all() {
  CommHandle comms[2] = {};
  const int devices[2] = {0, 1};
  CHECK(ncclCommInitAll(comms, 2, devices));
  CHECK(ncclGroupStart());
  for (int i = 0; i < 2; ++i) CHECK(ncclAllReduce(g_buffer, g_buffer, 512, FLOAT32, SUM, comms[i], stream_of(0x100 + i)));
  CHECK(ncclGroupEnd());
  for (CommHandle c : comms) CHECK(ncclCommDestroy(c));
  return 0;
}

void hang(int rank, const UniqueId& id) {
  CommHandle comm = nullptr;
  CHECK(ncclCommInitRank(&comm, 2, id, rank));
  CHECK(ncclAllReduce(g_buffer, g_buffer, 1024, FLOAT32, SUM, comm, stream_of(0)));
  if (rank == 0) CHECK(ncclAllReduce(g_buffer, g_buffer, 1024, FLOAT32, SUM, comm, stream_of(0)));
  for (;;) ::pause();  // hung, as in a collective nobody else joins
}

double cpu_ns() {
  struct timespec t = {};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) * 1e9 + static_cast<double>(t.tv_nsec);
}

// Wall time and the calling thread's CPU time (user and system: the writes count), per call. On
// a loaded machine the CPU time is the one to read.
int bench(long n, long gap_ns) {
  UniqueId id;
  CHECK(ncclGetUniqueId(&id));
  CommHandle comm = nullptr;
  CHECK(ncclCommInitRank(&comm, 1, id, 0));
  // A fixed amount of work that takes about gap_ns (not a deadline, which would absorb the
  // recorder's cost).
  long spins = 0;
  if (gap_ns > 0) {
    const double t0 = cpu_ns();
    for (long k = 0; k < 10'000'000; ++k) g_work = g_work + 1;
    spins = static_cast<long>(static_cast<double>(gap_ns) * 10'000'000 / std::max(1.0, cpu_ns() - t0));
  }
  const auto start = std::chrono::steady_clock::now();
  const double cpu_start = cpu_ns();
  for (long i = 0; i < n; ++i) {
    CHECK(ncclAllReduce(g_buffer, g_buffer, 1024, FLOAT32, SUM, comm, stream_of(0)));
    for (long k = 0; k < spins; ++k) g_work = g_work + 1;  // host work between calls
  }
  const double cpu = cpu_ns() - cpu_start;
  const auto end = std::chrono::steady_clock::now();
  const double ns = std::chrono::duration<double, std::nano>(end - start).count();
  const double calls = n > 0 ? static_cast<double>(n) : 1.0;
  std::printf("%ld calls, %.1f ns per call, %.1f ns CPU per call\n", n, ns / calls, cpu / calls);
  CHECK(ncclCommDestroy(comm));
  return 0;
}

}  // namespace

#ifdef LOCKSTEP_DEMO_PLUGIN
// Built as a plugin too (record_demo_plugin.so, linked against the fake libnccl), which
// lockstep_record_dlopen loads RTLD_LOCAL, as Python loads PyTorch: its libnccl is then not in the
// global scope, where the recorder's dlsym(RTLD_NEXT) looks first.
extern "C" __attribute__((visibility("default"))) int lockstep_record_demo_main(int argc, char** argv) {
#else
int main(int argc, char** argv) {
#endif
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "head-to-head") return run_ranks(2, [](int r, const UniqueId& id) { head_to_head(r, id, false); }) ? 0 : 1;
  if (mode == "grouped") return run_ranks(2, [](int r, const UniqueId& id) { head_to_head(r, id, true); }) ? 0 : 1;
  if (mode == "split") return run_ranks(4, split) ? 0 : 1;
  if (mode == "init-all") return init_all();
  if (mode == "hang") return run_ranks(2, hang) ? 0 : 1;
  if (mode == "bench" && argc > 2) return bench(std::strtol(argv[2], nullptr, 10), argc > 3 ? std::strtol(argv[3], nullptr, 10) : 0);
  std::fprintf(stderr, "usage: lockstep_record_demo head-to-head|grouped|split|init-all|hang|bench N\n");
  return 2;
}

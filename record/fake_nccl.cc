// libfake_nccl.so: a stand-in for libnccl in the recorder's tests and benchmark. It exports the
// NCCL functions of nccl_api.h, needs no GPU and communicates with nobody: every call checks its
// arguments and returns ncclSuccess at once. A program linked against it runs any schedule to
// the end, deadlocking ones included; the recorder sees what it called.
//
// Communicators know their rank and size (ncclCommInitRank, ncclCommInitAll) and their device
// (fake_nccl_set_device before the init, as cudaSetDevice before a real one); a communicator made
// by ncclCommSplit knows neither rank nor size (it cannot ask the other processes), so
// ncclCommCount and ncclCommUserRank fail on it, as they may on a real one still initializing.

#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <ctime>

#include "record/nccl_api.h"

namespace lockstep::nccl_abi {

struct Comm {
  int nranks;
  int rank;
  int device;
};

namespace {
std::atomic<uint64_t> g_calls{0};
std::atomic<uint64_t> g_ids{0};
thread_local int t_device = 0;
thread_local int t_group_depth = 0;

Result op(CommHandle comm, int dtype) {
  g_calls.fetch_add(1, std::memory_order_relaxed);
  if (comm == nullptr || dtype < 0 || dtype >= NUM_TYPES) return INVALID_ARGUMENT;
  return SUCCESS;
}
}  // namespace

extern "C" {

__attribute__((visibility("default"))) void fake_nccl_set_device(int device) { t_device = device; }
__attribute__((visibility("default"))) uint64_t fake_nccl_calls() { return g_calls.load(); }

Result ncclGetVersion(int* version) {
  if (version == nullptr) return INVALID_ARGUMENT;
  *version = 22809;
  return SUCCESS;
}

Result ncclGetUniqueId(UniqueId* id) {
  if (id == nullptr) return INVALID_ARGUMENT;
  std::memset(id->internal, 0, UNIQUE_ID_BYTES);
  struct timespec now = {};
  ::clock_gettime(CLOCK_REALTIME, &now);
  const uint64_t words[4] = {static_cast<uint64_t>(::getpid()), g_ids.fetch_add(1) + 1,
                             static_cast<uint64_t>(now.tv_sec), static_cast<uint64_t>(now.tv_nsec)};
  std::memcpy(id->internal, words, sizeof(words));
  return SUCCESS;
}

Result ncclCommInitRank(CommHandle* comm, int nranks, UniqueId, int rank) {
  if (comm == nullptr || nranks < 1 || rank < 0 || rank >= nranks) return INVALID_ARGUMENT;
  *comm = new Comm{nranks, rank, t_device};
  return SUCCESS;
}

Result ncclCommInitRankConfig(CommHandle* comm, int nranks, UniqueId id, int rank, Config*) {
  return ncclCommInitRank(comm, nranks, id, rank);
}

Result ncclCommInitAll(CommHandle* comms, int ndev, const int* devlist) {
  if (comms == nullptr || ndev < 1) return INVALID_ARGUMENT;
  for (int i = 0; i < ndev; ++i) comms[i] = new Comm{ndev, i, devlist != nullptr ? devlist[i] : i};
  return SUCCESS;
}

Result ncclCommSplit(CommHandle comm, int color, int, CommHandle* newcomm, Config*) {
  if (comm == nullptr || newcomm == nullptr) return INVALID_ARGUMENT;
  *newcomm = color == SPLIT_NOCOLOR ? nullptr : new Comm{-1, -1, comm->device};
  return SUCCESS;
}

Result ncclCommCount(const CommHandle comm, int* count) {
  if (comm == nullptr || count == nullptr || comm->nranks < 0) return INVALID_ARGUMENT;
  *count = comm->nranks;
  return SUCCESS;
}

Result ncclCommCuDevice(const CommHandle comm, int* device) {
  if (comm == nullptr || device == nullptr) return INVALID_ARGUMENT;
  *device = comm->device;
  return SUCCESS;
}

Result ncclCommUserRank(const CommHandle comm, int* rank) {
  if (comm == nullptr || rank == nullptr || comm->rank < 0) return INVALID_ARGUMENT;
  *rank = comm->rank;
  return SUCCESS;
}

Result ncclCommDestroy(CommHandle comm) {
  delete comm;
  return SUCCESS;
}
Result ncclCommAbort(CommHandle comm) { return ncclCommDestroy(comm); }
Result ncclCommFinalize(CommHandle comm) { return comm == nullptr ? INVALID_ARGUMENT : SUCCESS; }

Result ncclAllReduce(const void*, void*, size_t, DataType dtype, RedOp, CommHandle comm, StreamHandle) {
  return op(comm, dtype);
}
Result ncclBroadcast(const void*, void*, size_t, DataType dtype, int, CommHandle comm, StreamHandle) {
  return op(comm, dtype);
}
// As in NCCL, the in-place broadcast calls the other (an interposer must not record it twice).
Result ncclBcast(void* buff, size_t count, DataType dtype, int root, CommHandle comm, StreamHandle stream) {
  return ncclBroadcast(buff, buff, count, dtype, root, comm, stream);
}
Result ncclReduce(const void*, void*, size_t, DataType dtype, RedOp, int, CommHandle comm, StreamHandle) {
  return op(comm, dtype);
}
Result ncclAllGather(const void*, void*, size_t, DataType dtype, CommHandle comm, StreamHandle) { return op(comm, dtype); }
Result ncclReduceScatter(const void*, void*, size_t, DataType dtype, RedOp, CommHandle comm, StreamHandle) {
  return op(comm, dtype);
}
Result ncclAlltoAll(const void*, void*, size_t, DataType dtype, CommHandle comm, StreamHandle) { return op(comm, dtype); }
Result ncclGather(const void*, void*, size_t, DataType dtype, int, CommHandle comm, StreamHandle) { return op(comm, dtype); }
Result ncclScatter(const void*, void*, size_t, DataType dtype, int, CommHandle comm, StreamHandle) { return op(comm, dtype); }
Result ncclSend(const void*, size_t, DataType dtype, int, CommHandle comm, StreamHandle) { return op(comm, dtype); }
Result ncclRecv(void*, size_t, DataType dtype, int, CommHandle comm, StreamHandle) { return op(comm, dtype); }

Result ncclGroupStart() {
  ++t_group_depth;
  return SUCCESS;
}
Result ncclGroupEnd() {
  if (t_group_depth == 0) return INVALID_ARGUMENT;
  --t_group_depth;
  return SUCCESS;
}

}  // extern "C"

}  // namespace lockstep::nccl_abi

// The per-process recording that liblockstep_record.so writes (docs/record.md, "The raw
// files"): one JSON Lines file per process, DIR/raw/HOST.PID.jsonl. Shared by the writer
// (recorder.cc) and the reader (merge.cc) so that the two agree on every name.
#pragma once

#include <cstdint>

namespace lockstep::record {

// The header's "lockstep_record".
inline constexpr int RAW_FORMAT_VERSION = 1;

// The environment variables the recorder reads.
inline constexpr const char* ENV_DIR = "LOCKSTEP_RECORD_DIR";            // where to write (required)
inline constexpr const char* ENV_BUFFER = "LOCKSTEP_RECORD_BUFFER";      // records per thread buffer
inline constexpr const char* ENV_FLUSH_MS = "LOCKSTEP_RECORD_FLUSH_MS";  // periodic flush, 0 = none

// What one record is ("call" in the file).
enum class Call : uint16_t {
  GET_UNIQUE_ID,      // id
  COMM_INIT_RANK,     // id, nranks, rank
  COMM_INIT_ALL,      // ndev
  COMM_INIT_RANK_CONFIG,  // id, nranks, rank
  COMM_SPLIT,         // parent, color, key
  CREATED,            // of (the seq of the init/split), index, comm, device, user_rank, count
  ALL_REDUCE, BROADCAST, BCAST, REDUCE, ALL_GATHER, REDUCE_SCATTER, ALL_TO_ALL, GATHER, SCATTER,
  SEND, RECV,         // comm, count, dtype, redop, root | peer, stream
  GROUP_START, GROUP_END,
  COMM_DESTROY, COMM_ABORT, COMM_FINALIZE,  // comm
  FAILED,             // of, result: the call `of` returned an error
  SIGNAL,             // signal: the process got a fatal signal (recorded before it dies)
  EXIT,               // the process exited normally
  COUNT_,
};

// The NCCL function name of a call ("ncclAllReduce"), or the record's own name ("created").
inline const char* call_name(Call call) {
  constexpr const char* NAMES[] = {
      "ncclGetUniqueId", "ncclCommInitRank", "ncclCommInitAll", "ncclCommInitRankConfig", "ncclCommSplit",
      "created",         "ncclAllReduce",    "ncclBroadcast",   "ncclBcast",              "ncclReduce",
      "ncclAllGather",   "ncclReduceScatter", "ncclAlltoAll",   "ncclGather",             "ncclScatter",
      "ncclSend",        "ncclRecv",         "ncclGroupStart",  "ncclGroupEnd",           "ncclCommDestroy",
      "ncclCommAbort",   "ncclCommFinalize", "failed",          "signal",                 "exit"};
  static_assert(sizeof(NAMES) / sizeof(NAMES[0]) == static_cast<size_t>(Call::COUNT_));
  return static_cast<size_t>(call) < static_cast<size_t>(Call::COUNT_) ? NAMES[static_cast<size_t>(call)] : "?";
}

}  // namespace lockstep::record

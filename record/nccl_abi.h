// The small part of the NCCL 2.x C ABI that the recorder, the fake libnccl of the tests and the
// demo program need, declared here so that all of them build and are tested where neither CUDA
// nor NCCL is installed. Handles are opaque pointers, enums are ints, ncclUniqueId is 128 bytes.
// nccl_abi_check.cc compares every type and signature with the real nccl.h when CMake finds it.
//
// Types only: the extern "C" functions are declared in nccl_api.h, which a translation unit that
// includes the real nccl.h must not include.
#pragma once

#include <cstddef>
#include <cstdint>

namespace lockstep::nccl_abi {

struct Comm;    // struct ncclComm
struct Stream;  // struct CUstream_st
struct Config;  // ncclConfig_t (passed through, never read)

using CommHandle = Comm*;      // ncclComm_t
using StreamHandle = Stream*;  // cudaStream_t
using Result = int;            // ncclResult_t
using DataType = int;          // ncclDataType_t
using RedOp = int;             // ncclRedOp_t

inline constexpr size_t UNIQUE_ID_BYTES = 128;
struct UniqueId {  // ncclUniqueId
  char internal[UNIQUE_ID_BYTES];
};

inline constexpr Result SUCCESS = 0;            // ncclSuccess
inline constexpr Result INTERNAL_ERROR = 3;     // ncclInternalError
inline constexpr Result INVALID_ARGUMENT = 4;   // ncclInvalidArgument
inline constexpr Result IN_PROGRESS = 7;        // ncclInProgress
inline constexpr int SPLIT_NOCOLOR = -1;        // NCCL_SPLIT_NOCOLOR

// ncclDataType_t values, in order: int8 uint8 int32 uint32 int64 uint64 float16 float32 float64
// bfloat16 float8e4m3 float8e5m2.
inline constexpr DataType INT8 = 0, UINT8 = 1, INT32 = 2, UINT32 = 3, INT64 = 4, UINT64 = 5,
                          FLOAT16 = 6, FLOAT32 = 7, FLOAT64 = 8, BFLOAT16 = 9, FLOAT8E4M3 = 10,
                          FLOAT8E5M2 = 11, NUM_TYPES = 12;
inline constexpr RedOp SUM = 0;

// The signatures, as function types (the real ones, with the types above).
using GetUniqueIdFn = Result(UniqueId*);
using GetVersionFn = Result(int*);
using CommInitRankFn = Result(CommHandle*, int, UniqueId, int);
using CommInitAllFn = Result(CommHandle*, int, const int*);
using CommInitRankConfigFn = Result(CommHandle*, int, UniqueId, int, Config*);
using CommSplitFn = Result(CommHandle, int, int, CommHandle*, Config*);
using CommQueryFn = Result(const CommHandle, int*);  // ncclCommCount, ncclCommCuDevice, ncclCommUserRank
using CommFn = Result(CommHandle);                   // destroy, abort, finalize
using AllReduceFn = Result(const void*, void*, size_t, DataType, RedOp, CommHandle, StreamHandle);
using BroadcastFn = Result(const void*, void*, size_t, DataType, int, CommHandle, StreamHandle);
using BcastFn = Result(void*, size_t, DataType, int, CommHandle, StreamHandle);
using ReduceFn = Result(const void*, void*, size_t, DataType, RedOp, int, CommHandle, StreamHandle);
using AllGatherFn = Result(const void*, void*, size_t, DataType, CommHandle, StreamHandle);  // also ncclAlltoAll
using ReduceScatterFn = Result(const void*, void*, size_t, DataType, RedOp, CommHandle, StreamHandle);
using RootedFn = Result(const void*, void*, size_t, DataType, int, CommHandle, StreamHandle);  // ncclGather, ncclScatter
using SendFn = Result(const void*, size_t, DataType, int, CommHandle, StreamHandle);
using RecvFn = Result(void*, size_t, DataType, int, CommHandle, StreamHandle);
using GroupFn = Result();

// Bytes of one element of `dtype`, 0 for a value outside the table.
constexpr uint32_t dtype_bytes(DataType dtype) {
  constexpr uint32_t BYTES[NUM_TYPES] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1};
  return dtype >= 0 && dtype < NUM_TYPES ? BYTES[dtype] : 0;
}

}  // namespace lockstep::nccl_abi

// Compiled (never run) where CMake finds the real nccl.h: every type, value and signature of
// nccl_abi.h must match NCCL's, or this file does not compile.

#include <nccl.h>

#include <cstddef>
#include <tuple>
#include <type_traits>

#include "record/nccl_abi.h"

namespace abi = lockstep::nccl_abi;

namespace {

// Two parameter types are the same at the ABI level: same size, and both pointers or both
// integers/enums.
template <typename Real, typename Ours>
constexpr bool same_abi() {
  if constexpr (std::is_pointer_v<Real> || std::is_pointer_v<Ours>) {
    return std::is_pointer_v<Real> && std::is_pointer_v<Ours>;
  } else if constexpr (std::is_class_v<Real> || std::is_class_v<Ours>) {
    return sizeof(Real) == sizeof(Ours) && alignof(Real) == alignof(Ours);
  } else {
    return sizeof(Real) == sizeof(Ours) && (std::is_integral_v<Real> || std::is_enum_v<Real>) &&
           (std::is_integral_v<Ours> || std::is_enum_v<Ours>);
  }
}

template <typename Real, typename Ours>
struct Matches : std::false_type {};

template <typename R1, typename... A1, typename R2, typename... A2>
struct Matches<R1(A1...), R2(A2...)> {
  static constexpr bool params() {
    if constexpr (sizeof...(A1) != sizeof...(A2)) {
      return false;
    } else {
      return (same_abi<A1, A2>() && ...);
    }
  }
  static constexpr bool value = same_abi<R1, R2>() && params();
};

#define LOCKSTEP_SAME_SIGNATURE(real, ours) \
  static_assert(Matches<decltype(real), abi::ours>::value, #real " differs from nccl_abi.h's " #ours)

LOCKSTEP_SAME_SIGNATURE(ncclGetUniqueId, GetUniqueIdFn);
LOCKSTEP_SAME_SIGNATURE(ncclGetVersion, GetVersionFn);
LOCKSTEP_SAME_SIGNATURE(ncclCommInitRank, CommInitRankFn);
LOCKSTEP_SAME_SIGNATURE(ncclCommInitAll, CommInitAllFn);
LOCKSTEP_SAME_SIGNATURE(ncclCommInitRankConfig, CommInitRankConfigFn);
LOCKSTEP_SAME_SIGNATURE(ncclCommSplit, CommSplitFn);
LOCKSTEP_SAME_SIGNATURE(ncclCommCount, CommQueryFn);
LOCKSTEP_SAME_SIGNATURE(ncclCommCuDevice, CommQueryFn);
LOCKSTEP_SAME_SIGNATURE(ncclCommUserRank, CommQueryFn);
LOCKSTEP_SAME_SIGNATURE(ncclCommDestroy, CommFn);
LOCKSTEP_SAME_SIGNATURE(ncclCommAbort, CommFn);
LOCKSTEP_SAME_SIGNATURE(ncclCommFinalize, CommFn);
LOCKSTEP_SAME_SIGNATURE(ncclAllReduce, AllReduceFn);
LOCKSTEP_SAME_SIGNATURE(ncclBroadcast, BroadcastFn);
LOCKSTEP_SAME_SIGNATURE(ncclBcast, BcastFn);
LOCKSTEP_SAME_SIGNATURE(ncclReduce, ReduceFn);
LOCKSTEP_SAME_SIGNATURE(ncclAllGather, AllGatherFn);
LOCKSTEP_SAME_SIGNATURE(ncclReduceScatter, ReduceScatterFn);
LOCKSTEP_SAME_SIGNATURE(ncclSend, SendFn);
LOCKSTEP_SAME_SIGNATURE(ncclRecv, RecvFn);
LOCKSTEP_SAME_SIGNATURE(ncclGroupStart, GroupFn);
LOCKSTEP_SAME_SIGNATURE(ncclGroupEnd, GroupFn);
#if NCCL_VERSION_CODE >= 22800
LOCKSTEP_SAME_SIGNATURE(ncclAlltoAll, AllGatherFn);
LOCKSTEP_SAME_SIGNATURE(ncclGather, RootedFn);
LOCKSTEP_SAME_SIGNATURE(ncclScatter, RootedFn);
#endif

static_assert(sizeof(ncclUniqueId) == sizeof(abi::UniqueId) && NCCL_UNIQUE_ID_BYTES == abi::UNIQUE_ID_BYTES);
static_assert(sizeof(ncclResult_t) == sizeof(abi::Result) && sizeof(ncclDataType_t) == sizeof(abi::DataType) &&
              sizeof(ncclRedOp_t) == sizeof(abi::RedOp));
static_assert(ncclSuccess == abi::SUCCESS && ncclInternalError == abi::INTERNAL_ERROR &&
              ncclInvalidArgument == abi::INVALID_ARGUMENT && ncclInProgress == abi::IN_PROGRESS);
static_assert(NCCL_SPLIT_NOCOLOR == abi::SPLIT_NOCOLOR && ncclSum == abi::SUM);
static_assert(ncclInt8 == abi::INT8 && ncclUint8 == abi::UINT8 && ncclInt32 == abi::INT32 && ncclUint32 == abi::UINT32 &&
              ncclInt64 == abi::INT64 && ncclUint64 == abi::UINT64 && ncclFloat16 == abi::FLOAT16 &&
              ncclFloat32 == abi::FLOAT32 && ncclFloat64 == abi::FLOAT64 && ncclBfloat16 == abi::BFLOAT16);
#if NCCL_VERSION_CODE >= 21900
static_assert(ncclFloat8e4m3 == abi::FLOAT8E4M3 && ncclFloat8e5m2 == abi::FLOAT8E5M2 && ncclNumTypes == abi::NUM_TYPES);
#endif

}  // namespace

// Something to link: the check is the compilation; linking against libnccl proves the symbols exist.
int main(int argc, char**) {
  int version = 0;
  return argc > 1000 ? static_cast<int>(ncclGetVersion(&version)) : 0;
}

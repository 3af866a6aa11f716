// The NCCL functions of nccl_abi.h as extern "C" declarations: what the recorder defines (and
// forwards), what the tests' fake libnccl defines, and what the demo program calls. Never
// include this next to the real nccl.h (the types differ by name, not by ABI).
#pragma once

#include "record/nccl_abi.h"

namespace lockstep::nccl_abi {

extern "C" {
Result ncclGetVersion(int* version);
Result ncclGetUniqueId(UniqueId* id);
Result ncclCommInitRank(CommHandle* comm, int nranks, UniqueId id, int rank);
Result ncclCommInitAll(CommHandle* comms, int ndev, const int* devlist);
Result ncclCommInitRankConfig(CommHandle* comm, int nranks, UniqueId id, int rank, Config* config);
Result ncclCommSplit(CommHandle comm, int color, int key, CommHandle* newcomm, Config* config);
Result ncclCommCount(const CommHandle comm, int* count);
Result ncclCommCuDevice(const CommHandle comm, int* device);
Result ncclCommUserRank(const CommHandle comm, int* rank);
Result ncclCommDestroy(CommHandle comm);
Result ncclCommAbort(CommHandle comm);
Result ncclCommFinalize(CommHandle comm);
Result ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count, DataType dtype, RedOp op, CommHandle comm,
                     StreamHandle stream);
Result ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count, DataType dtype, int root, CommHandle comm,
                     StreamHandle stream);
Result ncclBcast(void* buff, size_t count, DataType dtype, int root, CommHandle comm, StreamHandle stream);
Result ncclReduce(const void* sendbuff, void* recvbuff, size_t count, DataType dtype, RedOp op, int root,
                  CommHandle comm, StreamHandle stream);
Result ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, DataType dtype, CommHandle comm,
                     StreamHandle stream);
Result ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, DataType dtype, RedOp op,
                         CommHandle comm, StreamHandle stream);
Result ncclAlltoAll(const void* sendbuff, void* recvbuff, size_t count, DataType dtype, CommHandle comm,
                    StreamHandle stream);
Result ncclGather(const void* sendbuff, void* recvbuff, size_t count, DataType dtype, int root, CommHandle comm,
                  StreamHandle stream);
Result ncclScatter(const void* sendbuff, void* recvbuff, size_t count, DataType dtype, int root, CommHandle comm,
                   StreamHandle stream);
Result ncclSend(const void* sendbuff, size_t count, DataType dtype, int peer, CommHandle comm, StreamHandle stream);
Result ncclRecv(void* recvbuff, size_t count, DataType dtype, int peer, CommHandle comm, StreamHandle stream);
Result ncclGroupStart();
Result ncclGroupEnd();
}

}  // namespace lockstep::nccl_abi

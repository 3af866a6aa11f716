// The MPI way of id_exchange.h: rank 0's blob to every rank of MPI_COMM_WORLD by MPI_Bcast (as
// nccl-tests sends the NCCL unique id). Linked only by workers built with MPI.
#pragma once

#include <string>

#include "gpu_validation/id_exchange.h"

namespace lockstep::gpu {

// MPI_Init (if not yet), this process's rank and the world's size. False with `problem`.
bool mpi_start(int* argc, char*** argv, int& rank, int& size, std::string& problem);
// Broadcasts `blob` from rank 0 of MPI_COMM_WORLD. False with `problem`.
bool exchange_id_by_mpi(IdBlob& blob, std::string& problem);
// MPI_Finalize (if started and not yet finalized).
void mpi_stop();

}  // namespace lockstep::gpu

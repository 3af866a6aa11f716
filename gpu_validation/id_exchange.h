// How the ranks of `lockstep replay --nccl` share the NCCL unique id (an opaque 128-byte blob
// from rank 0): by MPI_Bcast when an MPI launcher started them (mpirun, srun --mpi=pmix/pmi2;
// as nccl-tests does), else through the shared replay folder (rank 0 writes DIR/nccl-id; plain
// forks by lockstep, srun without MPI). No CUDA, no NCCL: tested here without a GPU.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <string>

namespace lockstep::gpu {

using IdBlob = std::array<char, 128>;  // ncclUniqueId::internal

enum class IdExchange : uint8_t { FILE, MPI };

// The method for a worker with this environment (`env` returns a variable's value or nullptr):
// $LOCKSTEP_NCCL_ID ("file" or "mpi") if set; FILE for a process lockstep forked itself
// (LOCKSTEP_RANK set); MPI when an MPI launcher's variables are there (OMPI_COMM_WORLD_SIZE,
// PMI_SIZE, PMI_RANK, PMIX_RANK, MPI_LOCALNRANKS, MV2_COMM_WORLD_SIZE); else FILE.
IdExchange id_exchange_method(const std::function<const char*(const char*)>& env);

// The file way: rank 0 writes `blob` to DIR/nccl-id whole (temporary + rename); the others wait
// up to `wait_s` for it and read it. False with `problem`.
bool exchange_id_by_file(const std::string& dir, int32_t rank, IdBlob& blob, double wait_s, std::string& problem);

}  // namespace lockstep::gpu

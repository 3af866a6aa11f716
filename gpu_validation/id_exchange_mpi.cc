#include "gpu_validation/id_exchange_mpi.h"

#include <mpi.h>

namespace lockstep::gpu {

namespace {

std::string error_text(int rc) {
  char text[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  MPI_Error_string(rc, text, &length);
  return std::string(text, static_cast<size_t>(length));
}

}  // namespace

bool mpi_start(int* argc, char*** argv, int& rank, int& size, std::string& problem) {
  int started = 0;
  MPI_Initialized(&started);
  if (!started) {
    const int rc = MPI_Init(argc, argv);
    if (rc != MPI_SUCCESS) {
      problem = "MPI_Init: " + error_text(rc);
      return false;
    }
  }
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return true;
}

bool exchange_id_by_mpi(IdBlob& blob, std::string& problem) {
  const int rc = MPI_Bcast(blob.data(), static_cast<int>(blob.size()), MPI_BYTE, 0, MPI_COMM_WORLD);
  if (rc != MPI_SUCCESS) {
    problem = "MPI_Bcast of the NCCL unique id: " + error_text(rc);
    return false;
  }
  return true;
}

void mpi_stop() {
  int started = 0, finished = 0;
  MPI_Initialized(&started);
  MPI_Finalized(&finished);
  if (started && !finished) MPI_Finalize();
}

}  // namespace lockstep::gpu

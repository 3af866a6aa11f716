// lockstep-id-exchange-check: the NCCL unique id exchange of lockstep-nccl-replay without a GPU.
// Run under `mpirun -np N` (id_exchange_check.sh, ctest gpu_validation.id_exchange_mpi): rank 0
// fills a 128-byte blob, id_exchange_mpi.h broadcasts it, every rank checks every byte and says
// "rank R of N: id received". Exit 1 on a wrong byte or an MPI error.
#include <cstdio>
#include <string>

#include "gpu_validation/id_exchange_mpi.h"

int main(int argc, char** argv) {
  using namespace lockstep::gpu;
  int rank = -1, size = 0;
  std::string problem;
  if (!mpi_start(&argc, &argv, rank, size, problem)) {
    std::fprintf(stderr, "lockstep-id-exchange-check: %s\n", problem.c_str());
    return 1;
  }
  IdBlob blob{};
  auto expected = [](size_t i) { return static_cast<char>((i * 37 + 11) & 0xff); };
  if (rank == 0) {
    for (size_t i = 0; i < blob.size(); ++i) blob[i] = expected(i);
  }
  int code = 0;
  if (!exchange_id_by_mpi(blob, problem)) {
    std::fprintf(stderr, "rank %d: %s\n", rank, problem.c_str());
    code = 1;
  } else {
    for (size_t i = 0; i < blob.size() && code == 0; ++i) {
      if (blob[i] != expected(i)) {
        std::fprintf(stderr, "rank %d: byte %zu is %d, expected %d\n", rank, i, blob[i], expected(i));
        code = 1;
      }
    }
    if (code == 0) std::printf("rank %d of %d: id received\n", rank, size);
  }
  mpi_stop();
  return code;
}

// How lockstep-nccl-replay shares the NCCL unique id (id_exchange.h), without MPI or a GPU: the
// choice of method from the launcher's environment, and the file way between two threads. The
// MPI way runs under mpirun in ctest gpu_validation.id_exchange_mpi (id_exchange_check.sh).
#include "gpu_validation/id_exchange.h"

#include <doctest/doctest.h>

#include <unistd.h>

#include <filesystem>
#include <map>
#include <string>
#include <thread>

namespace lockstep::gpu {

namespace {

IdExchange method_with(const std::map<std::string, std::string>& vars) {
  return id_exchange_method([&](const char* name) -> const char* {
    const auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  });
}

}  // namespace

TEST_CASE("nccl id exchange: MPI_Bcast under an MPI launcher, the replay folder for lockstep's own forks and plain srun") {
  CHECK(method_with({}) == IdExchange::FILE);
  CHECK(method_with({{"OMPI_COMM_WORLD_SIZE", "8"}, {"OMPI_COMM_WORLD_RANK", "3"}}) == IdExchange::MPI);
  CHECK(method_with({{"PMIX_RANK", "0"}, {"SLURM_PROCID", "0"}}) == IdExchange::MPI);  // srun --mpi=pmix
  CHECK(method_with({{"PMI_SIZE", "4"}}) == IdExchange::MPI);                          // srun --mpi=pmi2, MPICH
  CHECK(method_with({{"SLURM_PROCID", "2"}, {"SLURM_NTASKS", "4"}}) == IdExchange::FILE);  // srun without MPI
  // lockstep forked it (LOCKSTEP_RANK), even inside an mpirun job: the folder.
  CHECK(method_with({{"LOCKSTEP_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "8"}}) == IdExchange::FILE);
  CHECK(method_with({{"LOCKSTEP_NCCL_ID", "file"}, {"OMPI_COMM_WORLD_SIZE", "8"}}) == IdExchange::FILE);
  CHECK(method_with({{"LOCKSTEP_NCCL_ID", "mpi"}}) == IdExchange::MPI);
}

TEST_CASE("nccl id exchange: through the folder every rank gets rank 0's 128 bytes, or says it never came") {
  std::string made = (std::filesystem::temp_directory_path() / "lockstep-id-XXXXXX").string();
  REQUIRE(::mkdtemp(made.data()) != nullptr);
  IdBlob sent{};
  for (size_t i = 0; i < sent.size(); ++i) sent[i] = static_cast<char>(i * 37 + 11);
  IdBlob got{};
  std::string problem0, problem1;
  bool ok1 = false;
  std::thread reader([&] { ok1 = exchange_id_by_file(made, 1, got, 30, problem1); });
  IdBlob mine = sent;
  CHECK(exchange_id_by_file(made, 0, mine, 30, problem0));
  reader.join();
  CHECK(ok1);
  CHECK(problem1.empty());
  CHECK(got == sent);
  std::filesystem::remove(made + "/nccl-id");
  IdBlob none{};
  CHECK_FALSE(exchange_id_by_file(made, 2, none, 0.05, problem1));
  CHECK(problem1 == "rank 0 never wrote the NCCL unique id to " + made + "/nccl-id");
  std::filesystem::remove_all(made);
}

}  // namespace lockstep::gpu

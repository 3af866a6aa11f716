#include "gpu_validation/id_exchange.h"

#include <sys/stat.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <string_view>
#include <thread>

namespace lockstep::gpu {

IdExchange id_exchange_method(const std::function<const char*(const char*)>& env) {
  auto set = [&](const char* name) {
    const char* v = env(name);
    return v != nullptr && *v != 0;
  };
  if (set("LOCKSTEP_NCCL_ID")) return std::string_view(env("LOCKSTEP_NCCL_ID")) == "mpi" ? IdExchange::MPI : IdExchange::FILE;
  if (set("LOCKSTEP_RANK")) return IdExchange::FILE;
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMI_RANK", "PMIX_RANK", "MPI_LOCALNRANKS", "MV2_COMM_WORLD_SIZE"}) {
    if (set(name)) return IdExchange::MPI;
  }
  return IdExchange::FILE;
}

bool exchange_id_by_file(const std::string& dir, int32_t rank, IdBlob& blob, double wait_s, std::string& problem) {
  const std::string path = dir + "/nccl-id";
  if (rank == 0) {
    {
      std::ofstream out(path + ".tmp", std::ios::binary | std::ios::trunc);
      out.write(blob.data(), static_cast<std::streamsize>(blob.size()));
      if (!out) {
        problem = "cannot write " + path;
        return false;
      }
    }
    if (std::rename((path + ".tmp").c_str(), path.c_str()) != 0) {
      problem = "cannot write " + path;
      return false;
    }
    return true;
  }
  const auto start = std::chrono::steady_clock::now();
  for (;;) {
    struct stat st {};
    if (::stat(path.c_str(), &st) == 0 && static_cast<size_t>(st.st_size) == blob.size()) {
      std::ifstream in(path, std::ios::binary);
      if (in.read(blob.data(), static_cast<std::streamsize>(blob.size()))) return true;
    }
    if (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() > wait_s) {
      problem = "rank 0 never wrote the NCCL unique id to " + path;
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

}  // namespace lockstep::gpu

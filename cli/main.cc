#include <unistd.h>

#include <climits>
#include <cstring>
#include <iostream>
#include <string>
#include <string_view>

#include "cli/cli.h"

namespace {

// `lockstep sweep|check ... --mpi` runs as lockstep-mpi, the binary beside this one that links MPI:
// under mpirun each rank's process becomes it (same pid, same environment). False when there is
// none, which the sweep then reports.
bool hand_over_to_mpi(char** argv) {
  char self[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n <= 0) return false;
  std::string path(self, static_cast<size_t>(n));
  path = path.substr(0, path.rfind('/') + 1) + "lockstep-mpi";
  if (::access(path.c_str(), X_OK) != 0) return false;
  ::execv(path.c_str(), argv);
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && (std::string_view(argv[1]) == "sweep" || std::string_view(argv[1]) == "check")) {
    for (int i = 2; i < argc; ++i) {
      if (std::string_view(argv[i]) == "--") break;
      if (std::string_view(argv[i]) == "--mpi") {
        hand_over_to_mpi(argv);
        break;
      }
    }
  }
  std::vector<std::string> args(argv + 1, argv + argc);
  return lockstep::cli::run_cli(args, std::cout, std::cerr);
}

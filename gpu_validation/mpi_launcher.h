// Starts the MPI workers of `lockstep replay --mpi` (mpirun -n WORLD lockstep-mpi-replay ...),
// watches the frontier files they write, and kills and reaps every process it started once each
// rank has reported (or at the wall-clock limit): no zombie, no stuck terminal.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "gpu_validation/replay_plan.h"

namespace lockstep::gpu {

// The absolute path of `name` found on PATH, or nullopt.
std::optional<std::string> find_on_path(const std::string& name);

struct LaunchSpec {
  std::string mpirun;     // the mpirun executable
  std::string worker;     // lockstep-mpi-replay
  std::string plan_path;  // the plan file
  std::string dir;        // where the workers write frontier.RANK and mpirun writes mpirun.log
  int32_t world = 0;
  double stall_s = 5;     // the workers' watchdog: no progress for this long with ops outstanding
  double wall_s = 60;     // the whole run, start-up included
};

struct LaunchResult {
  std::vector<std::optional<Frontier>> frontiers;  // per rank; nullopt: never reported
  bool wall_timeout = false;
  bool mpirun_exited = false;  // mpirun ended on its own before every rank reported
  int mpirun_status = 0;       // its exit code when it exited on its own
  std::string error;           // could not start it at all
  std::string log_tail;        // the end of mpirun's output (its own errors)
  double seconds = 0;
};

LaunchResult launch_mpi(const LaunchSpec& spec);

}  // namespace lockstep::gpu

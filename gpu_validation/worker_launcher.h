// Starts the workers of a hardware replay (`lockstep replay --mpi|--nccl`), watches the
// frontier files they write, and kills and reaps every process it started once each rank has
// reported (or at the wall-clock limit): no zombie, no stuck terminal. Backend-independent: the
// command is mpirun, srun or the worker itself once per rank; tests run a fake worker.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "gpu_validation/grant_channel.h"
#include "gpu_validation/replay_plan.h"

namespace lockstep::gpu {

// The absolute path of `name` found on PATH, or nullopt.
std::optional<std::string> find_on_path(const std::string& name);

// A worker executable: $`env_var` if set, else `name` beside the running binary.
std::string worker_path(const std::string& name, const char* env_var);

// How the workers are started. `per_rank`: `command` runs once per rank, each process with
// LOCKSTEP_RANK, LOCKSTEP_WORLD, LOCKSTEP_LOCAL_RANK and LOCKSTEP_LOCAL_SIZE set (a local launch
// without MPI); else once (mpirun/srun start the ranks).
struct Launcher {
  std::vector<std::string> command;
  bool per_rank = false;
  std::vector<std::pair<std::string, std::string>> env;  // set in every child (existing values kept when !override)
};

// The launcher a user configured: $LOCKSTEP_LAUNCHER, a command prefix split at spaces, in which
// "{world}" stands for the number of ranks (e.g. "srun -n {world}"); nullopt when unset.
std::optional<std::vector<std::string>> user_launcher(int32_t world);

struct LaunchSpec {
  Launcher launcher;
  std::string dir;       // where the workers write frontier.RANK; DIR/launch.log gets the output
  int32_t world = 0;
  double wall_s = 60;    // the whole run, start-up included
  // Once every rank reported and some did not complete, DIR/stop is written and the workers get
  // this long to abort their communicators and exit by themselves before they are killed.
  double grace_s = 0;
  // Granted issue order: the owner rank of every step (step_owners(plan)); the launcher runs the
  // GrantServer (DIR/grant-address) while the workers run. Empty: free order.
  std::vector<int32_t> step_owner;
  bool granted = false;
};

struct LaunchResult {
  std::vector<std::optional<Frontier>> frontiers;  // per rank; nullopt: never reported
  bool wall_timeout = false;
  bool launcher_exited = false;  // the launch command ended on its own before every rank reported
  int launcher_status = 0;       // its exit code then (128 + signal when killed by one)
  bool stopped_cleanly = false;  // every process exited by itself (completed, or on DIR/stop)
  std::string error;             // could not start it at all
  std::string log_tail;          // the end of the launch output (its own errors)
  double seconds = 0;
  std::optional<GrantStats> grants;  // granted order: how far the issue order got
};

LaunchResult launch_workers(const LaunchSpec& spec);

}  // namespace lockstep::gpu

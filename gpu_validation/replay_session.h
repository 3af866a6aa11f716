// One hardware replay, start to end (docs/replay.md): from the execution the model predicts to
// the verdict line. The prediction, the plan (with every rank's whole sequence after a
// mismatch), what the backend cannot express, a temporary folder with the plan, the launch
// under a wall clock, the frontiers against the prediction. Backend-independent: the backend
// gives a name and a way to start its workers (mpi_backend, nccl_backend; tests give a fake).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "gpu_validation/replay_coordinator.h"
#include "gpu_validation/worker_launcher.h"
#include "sim/engine.h"
#include "sim/scenario.h"
#include "sim/strategy.h"

namespace lockstep::gpu {

struct Backend {
  std::string name;  // "mpi", "nccl": in every verdict line
  // The launcher for a plan written to `plan_path`, frontiers to `dir`, or nullopt with `why`
  // (reported as UNDECIDED: e.g. mpirun or the worker is missing).
  std::function<std::optional<Launcher>(const std::string& plan_path, const std::string& dir, int32_t world,
                                        double stall_s, std::string& why)>
      make_launcher;
  double grace_s = 0;  // LaunchSpec::grace_s
};

// `lockstep replay --mpi`: mpirun (or $LOCKSTEP_LAUNCHER) starting lockstep-mpi-replay
// ($LOCKSTEP_MPI_WORKER).
Backend mpi_backend();
// `lockstep replay --nccl`: lockstep-nccl-replay ($LOCKSTEP_NCCL_WORKER) once per rank on this
// machine, or under $LOCKSTEP_LAUNCHER (mpirun, srun) across nodes.
Backend nccl_backend();

struct ReplayOptions {
  double stall_s = 10;  // the workers' watchdog (--timeout)
  double wall_s = 0;    // the whole run; 0: 30 + 4 * stall_s
  bool keep_dir = false;  // keep the plan, frontiers and log (LOCKSTEP_REPLAY_KEEP)
  int64_t compact_bytes = 0;  // > 0: compact_sizes with this cap (LOCKSTEP_REPLAY_COMPACT)
  IssueOrder order = IssueOrder::GRANTED;  // --order granted|free
  bool quiet = false;
};

struct ReplayReport {
  ReplayVerdict verdict = ReplayVerdict::UNDECIDED;
  bool failed = false;  // an operating error (`text` says which): no verdict
  std::string text;     // "predicted: ..." then the verdict line and its details
};

// Replays `result` (recorded with record_ops; `choices`: the choices that led to it) of
// `scenario` on `backend`; `bug`: the model's bug in it (checker::analyze), none when every
// rank completes.
ReplayReport replay_on_hardware(const sim::Scenario& scenario, const sim::ExecutionResult& result,
                                const std::vector<sim::Option>& choices, const sim::EngineOptions& engine,
                                const std::optional<checker::Bug>& bug, const Backend& backend,
                                const ReplayOptions& options);

}  // namespace lockstep::gpu

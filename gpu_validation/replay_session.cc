#include "gpu_validation/replay_session.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>


namespace lockstep::gpu {

namespace {

namespace fs = std::filesystem;

std::string seconds_arg(double s) { return fmt::format("{:g}", s); }

}  // namespace

Backend mpi_backend() {
  Backend b;
  b.name = "mpi";
  b.make_launcher = [](const std::string& plan, const std::string& dir, int32_t world, double stall_s,
                       std::string& why) -> std::optional<Launcher> {
    const std::string worker = worker_path("lockstep-mpi-replay", "LOCKSTEP_MPI_WORKER");
    std::optional<std::vector<std::string>> prefix = user_launcher(world);
    if (!prefix) {
      const std::optional<std::string> mpirun = find_on_path("mpirun");
      if (!mpirun) {
        why = "mpirun not found on PATH; install OpenMPI (Debian: openmpi-bin libopenmpi-dev, as scripts/setup does)";
        return std::nullopt;
      }
      prefix = std::vector<std::string>{*mpirun, "-n", std::to_string(world), "--oversubscribe", "--bind-to", "none"};
    }
    if (::access(worker.c_str(), X_OK) != 0) {
      why = fmt::format("the MPI worker {} is missing: lockstep was built without MPI (CMake found none; install "
                        "libopenmpi-dev and reconfigure) or LOCKSTEP_MPI_WORKER is wrong",
                        worker);
      return std::nullopt;
    }
    Launcher l;
    l.command = *prefix;
    l.command.insert(l.command.end(), {worker, plan, dir, seconds_arg(stall_s)});
    l.env = {{"OMPI_ALLOW_RUN_AS_ROOT", "1"},
             {"OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1"},
             {"OMPI_MCA_btl_vader_single_copy_mechanism", "none"},  // containers forbid cross-memory attach
             {"OMPI_MCA_rmaps_base_oversubscribe", "1"},
             {"OMPI_MCA_mpi_yield_when_idle", "1"},  // ranks may outnumber cores
             // Its session directory in this replay's own: mpiruns started together under one
             // TMPDIR race to create the shared ompi.HOST.UID ("File exists", the run fails).
             {"OMPI_MCA_orte_tmpdir_base", dir},
             {"ASAN_OPTIONS", "detect_leaks=0"}};     // leaks inside OpenMPI are not ours
    return l;
  };
  return b;
}

Backend nccl_backend() {
  Backend b;
  b.name = "nccl";
  b.grace_s = 10;  // stuck workers abort their communicators and free their memory on DIR/stop
  b.make_launcher = [](const std::string& plan, const std::string& dir, int32_t world, double stall_s,
                       std::string& why) -> std::optional<Launcher> {
    const std::string worker = worker_path("lockstep-nccl-replay", "LOCKSTEP_NCCL_WORKER");
    if (::access(worker.c_str(), X_OK) != 0) {
      why = fmt::format("the NCCL worker {} is missing: lockstep was built without CUDA and NCCL (CMake looks in "
                        "/usr/local/cuda; -DLOCKSTEP_GPU=ON) or LOCKSTEP_NCCL_WORKER is wrong",
                        worker);
      return std::nullopt;
    }
    Launcher l;
    if (std::optional<std::vector<std::string>> prefix = user_launcher(world)) {
      l.command = *prefix;  // mpirun or srun: the worker reads its rank from their environment
    } else {
      l.per_rank = true;    // one process per rank on this machine
    }
    l.command.insert(l.command.end(), {worker, plan, dir, seconds_arg(stall_s)});
    l.env = {{"OMPI_ALLOW_RUN_AS_ROOT", "1"}, {"OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1"}, {"ASAN_OPTIONS", "detect_leaks=0"}};
    return l;
  };
  return b;
}

ReplayReport replay_on_hardware(const sim::Scenario& scenario, const sim::ExecutionResult& result,
                                const std::vector<sim::Option>& choices, const sim::EngineOptions& engine,
                                const std::optional<checker::Bug>& bug, const Backend& backend,
                                const ReplayOptions& options) {
  ReplayReport report;
  std::string& out = report.text;
  auto undecided = [&](const std::string& why) {
    out += fmt::format("UNDECIDED ({}): {}\n", backend.name, why);
    report.verdict = ReplayVerdict::UNDECIDED;
    return report;
  };
  Prediction prediction = predict(scenario, bug);
  out += fmt::format("predicted: {}\n", bug ? fmt::format("{}: {}", sim::verdict_name(bug->kind), bug->summary)
                                             : std::string("every rank completes"));
  if (bug && bug->kind == sim::Verdict::TIMEOUT) {
    return undecided(fmt::format("cannot express: a timeout verdict (a wait longer than the watchdog in virtual time; "
                                 "the {} replay has no virtual time)",
                                 backend.name));
  }
  // After a mismatch the model's op lists stop; the replay needs every rank's whole sequence.
  const FullSequences full = full_sequences(scenario, result, choices, engine);
  if (!full.result) return undecided(full.why);
  // The scenario that ran (the recorded ops point at its statements), never a copy.
  PlanResult plan = build_plan(full.solo ? *full.solo : scenario, *full.result, backend.name);
  if (!plan.plan) return undecided(plan.cannot_express);
  if (full.solo) {  // the real communicators, not the solo run's
    for (size_t g = 0; g < plan.plan->groups.size(); ++g) plan.plan->groups[g].comm_of_rank = scenario.groups[g].comm_of_rank;
  }
  // The global issue order, with the real communicators' partners (after a solo run too).
  const size_t forced = order_issues(*plan.plan, *full.result);
  plan.plan->order = options.order;
  locate_mismatch(prediction, *plan.plan);
  note_queued(prediction, scenario, result);
  const size_t compacted = options.compact_bytes > 0 ? compact_sizes(*plan.plan, options.compact_bytes) : 0;

  std::string dir = (fs::temp_directory_path() / fmt::format("lockstep-{}-XXXXXX", backend.name)).string();
  if (::mkdtemp(dir.data()) == nullptr) {
    out += fmt::format("error: cannot create a temporary folder {}: {}\n", dir, std::strerror(errno));
    report.failed = true;
    return report;
  }
  std::error_code ec;
  const std::string plan_path = dir + "/plan.txt";
  {
    std::ofstream file(plan_path);
    file << format_plan(*plan.plan);
    if (!file) {
      fs::remove_all(dir, ec);
      out += fmt::format("error: cannot write {}\n", plan_path);
      report.failed = true;
      return report;
    }
  }
  std::string why;
  const std::optional<Launcher> launcher = backend.make_launcher(plan_path, dir, scenario.world, options.stall_s, why);
  if (!launcher) {
    fs::remove_all(dir, ec);
    return undecided(why);
  }
  LaunchSpec spec;
  spec.launcher = *launcher;
  spec.dir = dir;
  spec.world = scenario.world;
  spec.wall_s = options.wall_s > 0 ? options.wall_s : 30 + 4 * options.stall_s;
  spec.grace_s = backend.grace_s;
  spec.granted = options.order == IssueOrder::GRANTED;
  if (spec.granted) spec.step_owner = step_owners(*plan.plan);
  const LaunchResult launched = launch_workers(spec);
  if (!launched.error.empty()) {
    fs::remove_all(dir, ec);
    return undecided(fmt::format("cannot start {}: {}", launcher->command.front(), launched.error));
  }
  const ReplayOutcome outcome =
      compare_frontiers(prediction, launched.frontiers, backend.name, launched.grants ? &*launched.grants : nullptr);
  out += outcome.headline + "\n";
  if (compacted > 0) out += fmt::format("  (sizes above {} B compacted, order kept: LOCKSTEP_REPLAY_COMPACT)\n", options.compact_bytes);
  if (forced > 0 && options.order == IssueOrder::GRANTED) {
    out += fmt::format("  ({} op{} placed in the issue order by time alone: what their host waited for is not among the "
                       "recorded ops)\n",
                       forced, forced == 1 ? "" : "s");
  }
  if (full.cut) out += "  (replayed up to the mismatch: the ranks' ops past it cannot be derived without their partners)\n";
  for (const std::string& line : outcome.details) out += "  " + line + "\n";
  if (launched.wall_timeout) out += fmt::format("  stopped at the wall-clock limit of {:.0f} s\n", spec.wall_s);
  if (outcome.verdict == ReplayVerdict::UNDECIDED && launched.launcher_exited) {
    out += fmt::format("  {} exited with status {} before every rank reported; its output ends:\n{}\n",
                       fs::path(launcher->command.front()).filename().string(), launched.launcher_status,
                       launched.log_tail);
  }
  if (!options.quiet) {
    out += fmt::format("  {} ranks, {:.1f} s", scenario.world, launched.seconds);
    if (launched.grants) {
      const GrantStats& g = *launched.grants;
      out += fmt::format(", issue order granted: {} of {} steps in {} grant{} (round trip median {:.2f} ms, max {:.2f} ms)",
                         g.issued, g.steps, g.grants, g.grants == 1 ? "" : "s", g.median_ms, g.max_ms);
    } else {
      out += ", issue order free";
    }
    out += "\n";
  }
  if (options.keep_dir) {
    out += fmt::format("  plan, frontiers and launch.log kept in {}\n", dir);
  } else {
    fs::remove_all(dir, ec);
  }
  report.verdict = outcome.verdict;
  return report;
}

}  // namespace lockstep::gpu

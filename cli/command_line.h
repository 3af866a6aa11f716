// The command line of every verb, read with CLI11: each option is declared once (options that
// several verbs share by one function), with its value's rules, its help line and its usage
// errors. Help and usage errors come out as text to print; a command to run as plain options.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "checker/explore.h"
#include "export/promela.h"
#include "import/import_cli.h"
#include "record/record_verb.h"
#include "sim/engine.h"
#include "sim/loader.h"

namespace lockstep::cli {

// The options of check, run, validate, replay and explain.
struct Options {
  std::vector<std::string> inputs;
  std::vector<sim::ParamOverride> overrides;
  uint64_t seed = 0;
  std::optional<std::string> json_path;
  std::optional<std::string> timeline_path;
  std::optional<std::string> cex_dir;
  std::optional<std::string> junit_path;
  std::optional<std::string> html_path;  // check --html
  std::optional<std::string> dot_path;
  std::string backend = "sim";     // replay: sim, nccl, mpi
  double replay_timeout_s = 10;    // replay --mpi: the workers' watchdog
  bool replay_free_order = false;  // replay --mpi|--nccl --order free
  bool quiet = false;
  bool progress = false;  // --progress: a status line even when stderr is not a terminal
  bool check_expect = false;
  bool minimize = false;
  bool force = false;  // check --cex-dir: replace existing counterexample files
  std::optional<uint64_t> minimize_budget;
  sim::LoadLimits load_limits;
  checker::CheckOptions check;  // its engine limits apply to `run` too
  std::optional<sim::LogLevel> log_level;  // run, replay --sim: the event log
  std::vector<int32_t> log_ranks;
  std::optional<std::string> log_path;
  std::string sweep_where;             // sweep --where
  uint64_t sweep_max_points = 10'000;  // sweep --max-points
  bool mpi = false;                    // check, sweep --mpi: the work spread over MPI ranks (lockstep-mpi)
  double mpi_timeout_s = 30;           // --mpi-timeout: a worker rank silent this long is taken as lost
};

// A command line read: the verb to run and its options, or text to print and an exit code
// (help, the version, a usage error).
struct CommandLine {
  std::string verb;  // empty: nothing to run, print `out` and `err` and exit with `code`
  Options options;   // check, run, validate, replay, explain
  import::ImportOptions import_options;
  record::RecordOptions record_options;
  exporter::ExportOptions export_options;
  int code = 0;
  std::string out;
  std::string err;
};

// Reads `args` (without the program name).
CommandLine parse_command_line(const std::vector<std::string>& args);

}  // namespace lockstep::cli

#include "cli/command_line.h"

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <functional>
#include <memory>
#include <sstream>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "checker/report.h"
#include "cli/help_format.h"
#include "sim/diagnostic.h"

namespace lockstep::cli {

namespace {

constexpr int EXIT_USAGE = 2;
constexpr double DEFAULT_TIME_BUDGET_S = 600;  // check: per input (docs/semantics.md)

// A usage error found in a value or in how options combine: its whole message. Thrown from
// the option callbacks below, it passes through CLI11's parse (which catches only its own
// errors) to parse_verb.
struct UsageError {
  std::string message;
};

// ---- values ----------------------------------------------------------------------------------

// A count: decimal digits only, at most 2^64-1.
uint64_t parse_count(const std::string& option, const std::string& text) {
  uint64_t value = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (ec != std::errc() || ptr != end || text.empty()) {
    throw UsageError{fmt::format("{} expects a non-negative integer, got '{}'", option, text)};
  }
  return value;
}

template <typename T>
T capped(uint64_t value, T most) {
  return static_cast<T>(std::min<uint64_t>(value, static_cast<uint64_t>(most)));
}

// Seconds: a number above 0 (3, 0.5, 1e2).
double parse_seconds(const std::string& option, const std::string& text) {
  std::istringstream in(text);
  double value = 0;
  in >> value;
  if (!in || !in.eof() || value <= 0) {
    throw UsageError{fmt::format("{} expects a positive number of seconds, got '{}'", option, text)};
  }
  return value;
}

// "-D name=value" (also "-Dname=value").
sim::ParamOverride parse_override(const std::string& assignment) {
  const size_t eq = assignment.find('=');
  if (eq == std::string::npos || eq == 0) throw UsageError{fmt::format("-D expects name=value, got '{}'", assignment)};
  return {assignment.substr(0, eq), assignment.substr(eq + 1)};
}

// ---- declaring options -----------------------------------------------------------------------

// An option with one value (the last one given wins) handed to `on_value`, which checks and
// stores it. `names` as CLI11 spells them ("-o,--output").
CLI::Option* add_value(CLI::App& app, const std::string& names, const std::string& value_name,
                       const std::string& group, const std::string& help,
                       std::function<void(const std::string&)> on_value) {
  CLI::Option* option = app.add_option_function<std::string>(names, std::move(on_value), help);
  return option->type_name(value_name)->group(group);
}

CLI::Option* add_count(CLI::App& app, const std::string& name, const std::string& value_name, const std::string& group,
                       const std::string& help, std::function<void(uint64_t)> store) {
  return add_value(app, name, value_name, group, help,
                   [name, store = std::move(store)](const std::string& text) { store(parse_count(name, text)); });
}

CLI::Option* add_flag(CLI::App& app, const std::string& name, bool& target, const std::string& group,
                      const std::string& help) {
  return app.add_flag(name, target, help)->group(group);
}

CLI::Option* add_path(CLI::App& app, const std::string& name, std::optional<std::string>& target,
                      const std::string& value_name, const std::string& group, const std::string& help) {
  return add_value(app, name, value_name, group, help, [&target](const std::string& text) { target = text; });
}

CLI::Option* add_seconds(CLI::App& app, const std::string& name, const std::string& group, const std::string& help,
                         std::function<void(double)> store) {
  return add_value(app, name, "S", group, help,
                   [name, store = std::move(store)](const std::string& text) { store(parse_seconds(name, text)); });
}

// -D name=value, repeatable; every verb that loads a scenario takes it.
void add_overrides(CLI::App& app, std::vector<sim::ParamOverride>& overrides, const std::string& group) {
  app.add_option_function<std::vector<std::string>>(
         "-D",
         [&overrides](const std::vector<std::string>& assignments) {
           for (const std::string& assignment : assignments) overrides.push_back(parse_override(assignment));
         },
         "override a scenario parameter (repeatable)")
      ->type_name("name=value")
      ->expected(1)
      ->allow_extra_args(false)  // one name=value per -D: what follows is an input
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->group(group);
}

// -o FILE (also --output FILE): what import, export and record write.
void add_output(CLI::App& app, std::string& target, const std::string& value_name, const std::string& group,
                const std::string& help) {
  add_value(app, "-o,--output", value_name, group, help, [&target](const std::string& text) {
    target = text.starts_with('=') ? text.substr(1) : text;  // -o=FILE
  });
}

// The bounds on what a scenario may load and do (docs/cli.md).
void add_limits(CLI::App& app, Options& o, const std::string& group) {
  add_count(app, "--max-world", "N", group, "bound on ranks (default 1048576)",
            [&o](uint64_t n) { o.load_limits.max_world = capped<int32_t>(n, INT32_MAX); });
  add_count(app, "--max-file-bytes", "N", group, "bound on a scenario file's size (default 67108864)",
            [&o](uint64_t n) { o.load_limits.max_file_bytes = capped<int64_t>(n, INT64_MAX); });
  add_count(app, "--max-nesting", "N", group, "bound on nested blocks (default 64)",
            [&o](uint64_t n) { o.load_limits.max_nesting = capped<int32_t>(n, INT32_MAX); });
  add_count(app, "--max-ops", "N", group, "bound on operations in one execution (default 50000000)", [&o](uint64_t n) {
    o.check.engine.limits.max_ops = n;
    o.load_limits.max_ops = capped<int64_t>(n, INT64_MAX);
  });
  add_count(app, "--max-repeat", "N", group, "bound on one repeat's iterations (default 100000000)",
            [&o](uint64_t n) { o.check.engine.limits.max_repeat = capped<int64_t>(n, INT64_MAX); });
  add_count(app, "--max-call-depth", "N", group, "bound on nested calls (default 128)",
            [&o](uint64_t n) { o.check.engine.limits.max_call_depth = capped<int32_t>(n, 100'000); });
}

// The options every verb that loads scenarios takes: check, run, validate, replay, explain.
void add_common(CLI::App& app, Options& o) {
  const std::string group = "common options";
  app.add_option("inputs", o.inputs)->group("");  // interleaved with the options
  add_overrides(app, o.overrides, group);
  add_count(app, "--seed", "N", group, "seed of randomised strategies (reported)", [&o](uint64_t n) {
    o.seed = n;
    o.check.seed = n;
  });
  add_path(app, "--json", o.json_path, "FILE|-", group, "machine report (docs/report-format.md)");
  add_flag(app, "--quiet", o.quiet, group, "one line per input");
  add_limits(app, o, group);
}

// run and replay --sim: the per-rank event log (docs/logging.md).
void add_log_options(CLI::App& app, Options& o) {
  const std::string group = "run and replay --sim options (docs/logging.md)";
  add_value(app, "--log-level", "L", group,
            "per-rank event log: error, warn, info (every synchronisation point)\n"
            "or debug (every op's issue, start, match, completion); default: none,\n"
            "or $LOCKSTEP_LOG_LEVEL",
            [&o](const std::string& text) {
              o.log_level = sim::parse_log_level(text);
              if (!o.log_level) {
                throw UsageError{fmt::format("--log-level expects error, warn, info or debug, got '{}'", text)};
              }
            });
  add_value(app, "--log-ranks", "R,R,...", group, "log only these ranks (default: all)", [&o](const std::string& text) {
    o.log_ranks.clear();
    for (size_t start = 0; start <= text.size();) {
      const size_t comma = std::min(text.find(',', start), text.size());
      o.log_ranks.push_back(capped<int32_t>(parse_count("--log-ranks", text.substr(start, comma - start)), INT32_MAX));
      start = comma + 1;
    }
  });
  add_path(app, "--log", o.log_path, "FILE", group, "write the log to FILE (default: stderr)");
}

// After the options: the event log's level from the environment when no option set it.
void settle_log_level(Options& o) {
  if (o.log_level) return;
  if (const char* env = std::getenv("LOCKSTEP_LOG_LEVEL"); env != nullptr && *env != 0) {
    o.log_level = sim::parse_log_level(env);
    if (!o.log_level) throw UsageError{fmt::format("LOCKSTEP_LOG_LEVEL expects error, warn, info or debug, got '{}'", env)};
  } else if (!o.log_ranks.empty() || o.log_path) {
    o.log_level = sim::LogLevel::INFO;
  }
}

// ---- the verbs -------------------------------------------------------------------------------

void define_check(CLI::App& app, CommandLine& line) {
  Options& o = line.options;
  add_common(app, o);
  const std::string group = "check options";
  o.check.time_budget_s = DEFAULT_TIME_BUDGET_S;
  o.check.patience = checker::DEFAULT_PATIENCE;
  add_value(app, "--strategy", "S", group,
            "dpor (default) or dfs cover every schedule; random and pct\n"
            "sample --max-executions runs seeded by --seed",
            [&o](const std::string& text) {
              const std::vector<std::string> names = checker::strategy_names();
              if (std::find(names.begin(), names.end(), text) == names.end()) {
                throw UsageError{fmt::format("unknown strategy '{}'{}; strategies: {}", text,
                                             sim::did_you_mean(text, names), sim::join(sim::sorted(names)))};
              }
              o.check.strategy = text;
            });
  add_count(app, "--max-executions", "N", group, "bound on executions (default 1000000; 1000 for random and pct)",
            [&o](uint64_t n) {
              if (n == 0) throw UsageError{"--max-executions must be at least 1"};
              o.check.max_executions = n;
            });
  add_count(app, "--pct-depth", "D", group, "PCT's depth: D-1 priority change points (default 3)", [&o](uint64_t d) {
    if (d == 0 || d > 1000) throw UsageError{"--pct-depth must be between 1 and 1000"};
    o.check.pct_depth = static_cast<uint32_t>(d);
  });
  add_count(app, "--jobs", "N", group,
            "explore on N threads (dfs, dpor) a search of over 1000 executions:\n"
            "dfs reports the same bytes; dpor the same verdicts and bugs, listed\n"
            "by kind, but counts and schedules that vary from run to run",
            [&o](uint64_t n) {
              if (n == 0 || n > 256) throw UsageError{"--jobs must be between 1 and 256"};
              o.check.jobs = static_cast<unsigned>(n);
            });
  add_value(app, "--time-budget", "S", group,
            "bound on the search's wall time in seconds, per input (default 600;\n"
            "0: none)",
            [&o](const std::string& text) {
              o.check.time_budget_s = text == "0" ? 0 : parse_seconds("--time-budget", text);
            });
  add_flag(app, "--progress", o.progress, group,
           "a status line on stderr even when it is not a terminal (one line\n"
           "every few seconds); --quiet: none. SIGINT/SIGTERM stop the search\n"
           "after the execution under way and write what was found (exit 3, or\n"
           "1 with bugs)");
  add_count(app, "--max-bugs", "N", group,
            "stop after N distinct bugs (default: list every bug); the verdict is\n"
            "the first bug's, the report not exhaustive",
            [&o](uint64_t n) {
              if (n == 0) throw UsageError{"--max-bugs must be at least 1"};
              o.check.max_bugs = n;
            });
  add_count(app, "--patience", "N", group,
            "once a bug is found, stop after N executions in a row that add no\n"
            "new bug class, only variants (default 1000; 0: explore everything)",
            [&o](uint64_t n) { o.check.patience = n; });
  add_count(app, "--max-memory", "MIB", group, "bound on the process's resident memory (default 8192; 0: none)",
            [&o](uint64_t mib) {
              if (mib > (uint64_t{1} << 40)) throw UsageError{"--max-memory is in MiB; at most 2^40"};
              o.check.max_memory_bytes = mib << 20;  // 0: no bound
            });
  add_flag(app, "--symmetry", o.check.engine.symmetry, group,
           "dpor: explore once the schedules that differ only by renaming ranks\n"
           "whose programs are equal up to their rank numbers; a bug is shown on\n"
           "one rank of such a class (docs/semantics.md, \"Symmetric ranks\")");
  add_flag(app, "--check-expect", o.check_expect, group, "exit 0 iff every verdict matches its scenario's expect:");
  CLI::Option* mpi = add_flag(app, "--mpi", o.mpi, group,
           "under mpirun or srun: the work spread over the MPI ranks (sweep:\n"
           "its points; check: its inputs, or one input's search: dfs in parts,\n"
           "dpor in branches), rank 0 printing the report (docs/sweep.md)");
  add_seconds(app, "--mpi-timeout", group,
              "with --mpi: a rank silent for S seconds is taken as lost and its\n"
              "work done again by the others (default 30)",
              [&o](double s) { o.mpi_timeout_s = s; })
      ->needs(mpi);
  add_path(app, "--cex-dir", o.cex_dir, "DIR", group, "write one counterexample file per bug into DIR");
  add_flag(app, "--force", o.force, group, "with --cex-dir: replace counterexample files already there");
  CLI::Option* minimize = add_flag(app, "--minimize", o.minimize, group,
           "with --cex-dir, for a recorded schedule: remove ranks and ops while\n"
           "the same bug stays (delta debugging); writes DIR/NAME-N.min.jsonl");
  add_count(app, "--minimize-budget", "N", group, "bound on the re-checks of --minimize, per bug (default 500)",
            [&o](uint64_t n) {
              if (n == 0) throw UsageError{"--minimize-budget must be at least 1"};
              o.minimize_budget = n;
            })
      ->needs(minimize);
  add_path(app, "--junit", o.junit_path, "FILE", group,
           "JUnit XML, one testcase per input (GITHUB_ACTIONS=true also prints\n"
           "::error annotations at the YAML line of each stuck op)");
  add_path(app, "--html", o.html_path, "FILE", group,
           "one self-contained HTML report: verdicts, bug classes, explanations,\n"
           "source lines, the wait-for graphs as SVG");
  app.final_callback([&o] {
    if (o.inputs.empty()) throw UsageError{"check needs at least one scenario or folder"};
    if (o.mpi && o.inputs.size() != 1) throw UsageError{"check --mpi takes one scenario"};
    if (o.minimize && !o.cex_dir) throw UsageError{"--minimize needs --cex-dir DIR (the minimized trace goes there)"};
  });
}

// sweep: check's options, every -D an axis (name=v1,v2,... or name=lo..hi), and the filter.
void define_sweep(CLI::App& app, CommandLine& line) {
  define_check(app, line);
  Options& o = line.options;
  const std::string group = "sweep options";
  add_value(app, "--where", "EXPR", group,
            "keep the points where EXPR (over the swept names) is nonzero,\n"
            "e.g. \"microbatches % pp == 0\"",
            [&o](const std::string& text) { o.sweep_where = text; });
  add_count(app, "--max-points", "N", group, "bound on the points kept (default 10000)", [&o](uint64_t n) {
    if (n == 0) throw UsageError{"--max-points must be at least 1"};
    o.sweep_max_points = n;
  });
  app.final_callback([&o] {
    if (o.inputs.size() != 1) throw UsageError{"sweep needs exactly one scenario"};
    if (o.overrides.empty()) throw UsageError{"sweep needs at least one -D name=v1,v2,... or -D name=lo..hi"};
    if (o.cex_dir || o.minimize) throw UsageError{"sweep writes no counterexamples: check a failing point with its -D values"};
    if (o.check_expect) throw UsageError{"sweep reports every point's verdict; --check-expect is check's"};
  });
}

void define_run(CLI::App& app, CommandLine& line) {
  Options& o = line.options;
  add_common(app, o);
  add_path(app, "--timeline", o.timeline_path, "FILE", "run options",
           "the execution as Chrome Trace Event JSON (Perfetto, chrome://tracing)");
  add_log_options(app, o);
  app.final_callback([&o] {
    if (o.inputs.size() != 1) throw UsageError{"run needs exactly one scenario"};
    settle_log_level(o);
  });
}

void define_validate(CLI::App& app, CommandLine& line) {
  Options& o = line.options;
  add_common(app, o);
  app.final_callback([&o] {
    if (o.inputs.empty()) throw UsageError{"validate needs at least one scenario or folder"};
  });
}

void define_replay(CLI::App& app, CommandLine& line) {
  Options& o = line.options;
  add_common(app, o);
  const std::string group = "replay options";
  app.add_flag("--sim{sim},--mpi{mpi},--nccl{nccl}", o.backend,
               "in the simulator (default), on MPI ranks, or on GPUs through NCCL")
      ->group(group);
  add_seconds(app, "--timeout", group,
              "--mpi, --nccl: a rank with ops outstanding and no progress for S\n"
              "seconds is stuck (default 10); see docs/replay.md",
              [&o](double s) { o.replay_timeout_s = s; });
  add_value(app, "--order", "granted|free", group,
            "--mpi, --nccl: issue the ops in the execution's global order, each\n"
            "step granted by lockstep (default), or each rank on its own",
            [&o](const std::string& text) {
              if (text != "granted" && text != "free") throw UsageError{"--order is granted or free, not '" + text + "'"};
              o.replay_free_order = text == "free";
            });
  add_log_options(app, o);
  app.final_callback([&o] {
    if (o.inputs.size() != 1) throw UsageError{"replay needs exactly one counterexample or scenario"};
    settle_log_level(o);
  });
}

void define_explain(CLI::App& app, CommandLine& line) {
  Options& o = line.options;
  add_common(app, o);
  add_path(app, "--dot", o.dot_path, "FILE", "explain options", "also write the wait-for graph in Graphviz DOT");
  app.final_callback([&o] {
    if (o.inputs.size() != 1) throw UsageError{"explain needs exactly one counterexample"};
  });
}

void define_export(CLI::App& app, CommandLine& line) {
  exporter::ExportOptions& o = line.export_options;
  const std::string group = "export options";
  app.add_option("format", o.format)->group("");
  std::vector<std::string>& inputs = line.options.inputs;  // one scenario; more is an error
  app.add_option("scenario", inputs)->group("");
  add_output(app, o.output, "FILE", group, "the Promela model to write");
  add_overrides(app, o.overrides, group);
  app.final_callback([&o, &inputs] {
    if (o.format != "promela") {
      throw UsageError{fmt::format("{}; formats: promela",
                                   o.format.empty() ? std::string("missing format") : fmt::format("unknown format '{}'", o.format))};
    }
    if (inputs.size() > 1) throw UsageError{fmt::format("one scenario at a time, got '{}' too", inputs[1])};
    if (inputs.empty()) throw UsageError{"missing scenario"};
    if (o.output.empty()) throw UsageError{"missing -o FILE"};
    o.input = inputs.front();
  });
}

void define_import(CLI::App& app, CommandLine& line) {
  import::ImportOptions& o = line.import_options;
  const std::string group = "import options";
  app.add_option("format", o.format)->group("");
  app.add_option("inputs", o.inputs)->group("");
  add_output(app, o.output, "FILE", group,
             "the trace to write (JSON Lines, docs/trace-format.md); written only\n"
             "when the import succeeds");
  add_value(app, "--name", "NAME", group, "the scenario name (default: OUT's name without .jsonl)",
            [&o](const std::string& text) { o.name = text; });
  // Byte counts and replicas: non-negative integers that fit in 64 bits with a sign.
  const auto bytes = [](const std::string& option, const std::string& text) {
    const uint64_t value = parse_count(option, text);
    if (value > static_cast<uint64_t>(INT64_MAX)) {
      throw UsageError{fmt::format("{} expects a non-negative integer, got '{}'", option, text)};
    }
    return static_cast<int64_t>(value);
  };
  add_value(app, "--activation-bytes", "N", group, "pipeline-csv: bytes of every send and receive (default 1048576)",
            [&o, bytes](const std::string& text) { o.pipeline.activation_bytes = bytes("--activation-bytes", text); });
  add_value(app, "--with-dp", "N", group,
            "pipeline-csv: N data-parallel replicas of the pipeline (rank = pp\n"
            "rank x N + dp rank); UNSHARD is an all-gather and REDUCE_GRAD a\n"
            "reduce-scatter on the replicas of a pipeline rank (default: left out)",
            [&o, bytes](const std::string& text) {
              const int64_t n = bytes("--with-dp", text);
              if (n < 1 || n > 65536) {
                throw UsageError{fmt::format("--with-dp expects a number of replicas from 1 to 65536, got {}", n)};
              }
              o.pipeline.data_parallel = static_cast<int32_t>(n);
            });
  add_value(app, "--dp-bytes", "N", group, "pipeline-csv: bytes of every UNSHARD and REDUCE_GRAD (default 16777216)",
            [&o, bytes](const std::string& text) { o.pipeline.dp_bytes = bytes("--dp-bytes", text); });
  add_value(app, "--eager-limit", "N", group,
            "sends of at most N bytes complete without their receive (NCCL's\n"
            "buffers); writes semantics p2p: eager (default: rendezvous)",
            [&o, bytes](const std::string& text) { o.eager_limit = bytes("--eager-limit", text); });
  add_flag(app, "--quiet", o.quiet, group, "no summary");
  app.final_callback([&o] {
    const std::vector<std::string>& formats = import::import_formats();
    if (o.format.empty()) throw UsageError{"import needs a format: flight-recorder, nccl-log or pipeline-csv"};
    if (std::find(formats.begin(), formats.end(), o.format) == formats.end()) {
      throw UsageError{fmt::format("unknown import format '{}'{}; formats: {}", o.format,
                                   sim::did_you_mean(o.format, formats), sim::join(formats))};
    }
    if (o.inputs.empty()) throw UsageError{fmt::format("import {} needs at least one input file", o.format)};
    if (o.format == "pipeline-csv" && o.inputs.size() != 1) throw UsageError{"import pipeline-csv takes one CSV file"};
    if (o.output.empty()) throw UsageError{"import needs -o OUT.jsonl"};
  });
}

void define_record(CLI::App& app, CommandLine& line) {
  record::RecordOptions& o = line.record_options;
  const std::string group = "record options";
  add_output(app, o.dir, "DIR", group, "the folder to record into: DIR/raw, DIR/trace.jsonl");
  add_value(app, "--name", "NAME", group, "the scenario's name (default: the command's, or the script's)",
            [&o](const std::string& text) { o.name = text; });
  add_seconds(app, "--timeout", group,
              "stop the command after S seconds (SIGTERM to its process group,\n"
              "SIGKILL 10 s later); --torch: default 300",
              [&o](double s) { o.timeout_s = s; });
  add_value(app, "--lib", "PATH", group,
            "the recorder library (default: $LOCKSTEP_RECORD_LIB, else\n"
            "lib/liblockstep_record.so beside the binary's bin/)",
            [&o](const std::string& text) { o.lib = text; });
  add_flag(app, "--merge-only", o.merge_only, group, "run nothing; merge the recordings in DIR/raw");
  add_flag(app, "--quiet", o.quiet, group, "no per-process summary");
  CLI::Option* torch =
      add_flag(app, "--torch", o.torch, group, "run a PyTorch script's ranks on CPU and record torch.distributed");
  add_flag(app, "--fake", o.fake, group, "--torch: no communication; every rank runs its whole program")->needs(torch);
  add_flag(app, "--check", o.check, group, "--torch: check the trace once it is written")->needs(torch);
  add_value(app, "--nproc", "N", group, "--torch: the number of ranks to start (1 to 1024)", [&o](const std::string& text) {
    int32_t n = 0;
    const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
    if (ec != std::errc() || ptr != text.data() + text.size() || n < 1 || n > record::MAX_TORCH_RANKS) {
      throw UsageError{fmt::format("--nproc expects a number of ranks from 1 to {}, got '{}'", record::MAX_TORCH_RANKS, text)};
    }
    o.nproc = n;
  })->needs(torch);
}

// record: what CLI11 left over, in order, is "--" and the command after it; anything before
// the "--" is an error.
void take_command(const std::vector<std::string>& left, record::RecordOptions& o) {
  const auto mark = std::find(left.begin(), left.end(), "--");
  for (auto it = left.begin(); it != mark; ++it) {
    if (it->size() > 1 && it->front() == '-') throw UsageError{fmt::format("unknown option '{}' for 'record'", *it)};
    throw UsageError{fmt::format("unexpected '{}': the command to record goes after '--' (lockstep record -o DIR -- CMD ARGS...)", *it)};
  }
  if (mark != left.end()) o.command.assign(mark + 1, left.end());
  if (o.dir.empty()) throw UsageError{"record needs -o DIR"};
  if (o.merge_only && !o.command.empty()) throw UsageError{"--merge-only takes no command"};
  if (!o.merge_only && o.command.empty()) {
    throw UsageError{"record needs a command after '--' (lockstep record -o DIR -- CMD ARGS...)"};
  }
  if (o.merge_only && o.timeout_s) throw UsageError{"--timeout needs a command"};
  if (o.torch && !o.lib.empty()) throw UsageError{"--lib is the NCCL recorder's; --torch records through Python"};
  if (o.torch && !o.merge_only && o.nproc == 0) {
    throw UsageError{"record --torch needs --nproc N (the number of ranks to start)"};
  }
}

struct Verb {
  const char* name;
  std::vector<Synopsis> usage;
  const char* footer;
  void (*define)(CLI::App&, CommandLine&);
};

constexpr const char* EXIT_CODES = "exit codes: 0 no bug, 1 bug found, 2 bad input or usage, 3 inconclusive";

const std::vector<Verb>& verbs() {
  static const std::vector<Verb> table = {
      {"check", {{"SCENARIO_OR_DIR... [options]", "explore every schedule; a verdict per input"}}, EXIT_CODES, define_check},
      {"run", {{"SCENARIO [--timeline FILE]", "one timed, deterministic simulation"}}, EXIT_CODES, define_run},
      {"sweep",
       {{"SCENARIO -D name=v1,v2,...|name=lo..hi... [--where EXPR]",
         "check every point of a cross product of\nparameter values; a matrix of verdicts"}},
       EXIT_CODES,
       define_sweep},
      {"validate", {{"SCENARIO_OR_DIR...", "parse and static checks only"}}, EXIT_CODES, define_validate},
      {"replay",
       {{"COUNTEREXAMPLE|SCENARIO --sim|--mpi|--nccl [--timeout S]",
         "replay a counterexample (or a scenario's timed\nrun) in the simulator, on MPI ranks or on GPUs"}},
       EXIT_CODES,
       define_replay},
      {"explain", {{"COUNTEREXAMPLE [--dot FILE]", "explanation and wait-for graph"}}, EXIT_CODES, define_explain},
      {"export", {{"promela SCENARIO -o FILE", "a Promela model for SPIN (docs/spin.md)"}},
       "exit codes: 0 written, 2 bad input, usage, or outside the subset", define_export},
      {"import",
       {{"FORMAT INPUT... -o OUT.jsonl", "Flight Recorder dumps, NCCL logs or a pipeline\nCSV -> a trace (docs/import.md)"}},
       "formats:\n"
       "  flight-recorder DUMP...   PyTorch Flight Recorder dumps, one per rank (JSON or pickle, versions\n"
       "                            2.2 to 2.10, newer 2.x with a warning); each file name ends in its\n"
       "                            rank (nccl_trace_rank_3)\n"
       "  nccl-log LOG...           NCCL_DEBUG=INFO logs with NCCL_DEBUG_SUBSYS=INIT,COLL (and CALL for\n"
       "                            group boundaries), one or many files, ranks interleaved\n"
       "  pipeline-csv CSV          a torch.distributed.pipelining schedule CSV (compute only or with\n"
       "                            comms, OVERLAP_F_B cells; the B and the older BW dialect)\n"
       "\n"
       "exit codes: 0 written, 2 bad input or usage (nothing written)",
       define_import},
      {"record",
       {{"-o DIR [--name N] [--timeout S] -- CMD ARGS...",
         "run CMD with the NCCL recorder preloaded and\nmerge what it called into DIR/trace.jsonl\n"
         "(docs/record.md; --merge-only: DIR/raw only)"},
        {"--torch -o DIR --nproc N [--timeout S] [--fake] [--check] -- python3 SCRIPT ARGS...",
         "run a PyTorch script's N ranks on CPU (gloo, or\nno communication with --fake) and record every\n"
         "torch.distributed call into DIR/trace.jsonl"}},
       "exit codes: 0 recorded, 2 bad usage or recordings, 3 the command failed or was stopped",
       define_record},
  };
  return table;
}

const Verb* find_verb(const std::string& name) {
  for (const Verb& verb : verbs()) {
    if (name == verb.name) return &verb;
  }
  return nullptr;
}

// A verb's CLI11 app, its options bound to `line`.
std::unique_ptr<CLI::App> make_app(const Verb& verb, CommandLine& line) {
  auto app = std::make_unique<CLI::App>(verb.usage.front().summary, std::string("lockstep ") + verb.name);
  app->option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  // What CLI11 cannot place is an unknown option, reported in lockstep's words; for record, the
  // command after "--".
  app->allow_extras(std::string_view(verb.name) == "record");
  app->set_help_flag("-h,--help", "print this help and exit");
  app->footer(verb.footer);
  verb.define(*app, line);
  app->formatter(std::make_shared<HelpFormatter>(VerbUsage{verb.name, verb.usage}));
  return app;
}

// `lockstep --help`: the verbs, then the options of the verbs that share most of them.
std::string top_help() {
  std::vector<VerbUsage> usages;
  for (const Verb& verb : verbs()) usages.push_back({verb.name, verb.usage});
  std::vector<HelpSection> sections;
  CommandLine line;
  const std::vector<std::pair<std::string, std::string>> shown = {
      {"check", "common options"},
      {"check", "check options"},
      {"run", "run and replay --sim options (docs/logging.md)"},
      {"replay", "replay options"}};
  std::vector<std::unique_ptr<CLI::App>> apps;
  for (const auto& [verb, group] : shown) {
    apps.push_back(make_app(*find_verb(verb), line));
    sections.push_back({group, apps.back().get()});
  }
  return top_level_help(usages, sections, "'lockstep VERB --help' lists every option of a verb\n" + std::string(EXIT_CODES) + "\n");
}

CommandLine usage_error(const std::string& verb, const std::string& message) {
  CommandLine line;
  line.code = EXIT_USAGE;
  line.err = fmt::format("lockstep: error: {}\nrun 'lockstep {}--help' for usage\n", message,
                         verb.empty() ? "" : verb + " ");
  return line;
}

// CLI11's own errors in lockstep's words. `args` is what the verb was given.
std::string describe(const CLI::ParseError& error, const std::vector<std::string>& args) {
  if (dynamic_cast<const CLI::ArgumentMismatch*>(&error) != nullptr && !args.empty() && args.back().starts_with('-')) {
    // An option without its value: the last argument (anything after an option is its value).
    const std::string& option = args.back();
    return option == "-D" ? "-D needs name=value" : fmt::format("{} needs a value", option);
  }
  std::string message = error.what();
  if (dynamic_cast<const CLI::RequiresError*>(&error) != nullptr) {
    // "--fake requires --torch"
    if (const size_t at = message.find(" requires "); at != std::string::npos) message.replace(at, 10, " needs ");
    return message;
  }
  if (!message.empty()) message[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(message[0])));
  return message;
}

// " (did you mean '--seed'?)" for an unknown long option close to one of the app's, else "".
std::string option_hint(const CLI::App& app, const std::string& arg) {
  if (!arg.starts_with("--") || arg.size() < 3) return "";
  std::vector<std::string> names;
  for (const CLI::Option* option : app.get_options()) {
    for (const std::string& name : option->get_lnames()) names.push_back("--" + name);
  }
  return sim::did_you_mean(arg.substr(0, arg.find('=')), names);
}

CommandLine parse_verb(const Verb& verb, const std::vector<std::string>& args) {
  CommandLine line;
  line.verb = verb.name;
  std::unique_ptr<CLI::App> app = make_app(verb, line);
  try {
    std::vector<std::string> reversed(args.rbegin(), args.rend());
    app->parse(reversed);
    if (std::string_view(verb.name) == "record") take_command(app->remaining(), line.record_options);
  } catch (const CLI::CallForHelp&) {
    CommandLine help;
    help.out = app->help();
    return help;
  } catch (const CLI::ExtrasError&) {
    const std::string arg = app->remaining().front();
    return usage_error(verb.name, fmt::format("unknown option '{}' for '{}'{}", arg, verb.name, option_hint(*app, arg)));
  } catch (const CLI::ParseError& error) {
    return usage_error(verb.name, describe(error, args));
  } catch (const UsageError& error) {
    return usage_error(verb.name, error.message);
  }
  return line;
}

}  // namespace

CommandLine parse_command_line(const std::vector<std::string>& args) {
  // lockstep [--help | --version] VERB ...: everything from the verb on is the verb's.
  CLI::App root("lockstep model-checks distributed-training communication schedules", "lockstep");
  root.prefix_command();
  root.set_help_flag("-h,--help", "print this help and exit");
  root.set_version_flag("--version", fmt::format("lockstep {}", checker::lockstep_version()));
  try {
    std::vector<std::string> reversed(args.rbegin(), args.rend());
    root.parse(reversed);
  } catch (const CLI::CallForHelp&) {
    CommandLine help;
    help.out = top_help();
    return help;
  } catch (const CLI::CallForVersion& version) {
    CommandLine shown;
    shown.out = std::string(version.what()) + "\n";
    return shown;
  } catch (const CLI::ParseError& error) {
    return usage_error("", describe(error, args));
  }
  const std::vector<std::string> words = root.remaining();
  if (words.empty()) return usage_error("", "missing verb");
  const std::vector<std::string> rest(words.begin() + 1, words.end());
  if (words.front() == "help") {
    // `lockstep help [VERB]`
    if (!rest.empty()) {
      if (const Verb* verb = find_verb(rest.front())) return parse_verb(*verb, {"--help"});
    }
    CommandLine help;
    help.out = top_help();
    return help;
  }
  const Verb* verb = find_verb(words.front());
  if (verb == nullptr) {
    std::vector<std::string> names;
    for (const Verb& known : verbs()) names.push_back(known.name);
    return usage_error("", fmt::format("unknown verb '{}'{}; verbs: {}", words.front(),
                                       sim::did_you_mean(words.front(), names), sim::join(sim::sorted(names))));
  }
  return parse_verb(*verb, rest);
}

}  // namespace lockstep::cli

#include "cli/cli.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>

#include <fmt/format.h>

#include "checker/analysis.h"
#include "checker/explore.h"
#include "checker/report.h"
#include "sim/engine.h"
#include "sim/loader.h"
#include "sim/timeline.h"

namespace lockstep::cli {

namespace {

namespace fs = std::filesystem;

constexpr const char* USAGE = R"(usage: lockstep VERB ...

  lockstep check    SCENARIO_OR_DIR... [options]   explore every schedule; a verdict per input
  lockstep run      SCENARIO [--timeline FILE]     one timed, deterministic simulation
  lockstep validate SCENARIO_OR_DIR...             parse and static checks only

common options:
  -D name=value          override a scenario parameter (repeatable)
  --seed N               seed of randomised strategies (reported)
  --json FILE|-          machine report (SPEC §2)
  --quiet                one line per input
  --max-world N          bound on ranks (default 1048576)
  --max-file-bytes N     bound on a scenario file's size (default 67108864)
  --max-nesting N        bound on nested blocks (default 64)
  --max-ops N            bound on operations in one execution (default 50000000)
  --max-repeat N         bound on one repeat's iterations (default 100000000)
  --max-call-depth N     bound on nested calls (default 128)

check options:
  --strategy dpor|dfs    exploration strategy (default dpor)
  --max-executions N     bound on executions (default 1000000)
  --time-budget S        bound on wall time in seconds
  --check-expect         exit 0 iff every verdict matches its scenario's expect:

exit codes: 0 no bug, 1 bug found, 2 bad input or usage, 3 inconclusive
)";

// Verbs of SPEC §2 that later work adds.
const std::vector<std::string> LATER_VERBS = {"replay", "import", "record", "explain", "export"};

struct UsageError {
  std::string message;
};

struct Options {
  std::string verb;
  std::vector<std::string> inputs;
  std::vector<sim::ParamOverride> overrides;
  uint64_t seed = 0;
  std::optional<std::string> json_path;
  std::optional<std::string> timeline_path;
  bool quiet = false;
  bool check_expect = false;
  sim::LoadLimits load_limits;
  checker::CheckOptions check;  // its engine limits apply to `run` too
};

uint64_t parse_count(const std::string& option, const std::string& text) {
  uint64_t value = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (ec != std::errc() || ptr != end || text.empty()) {
    throw UsageError{fmt::format("{} expects a non-negative integer, got '{}'", option, text)};
  }
  return value;
}

double parse_seconds(const std::string& option, const std::string& text) {
  std::istringstream in(text);
  double value = 0;
  in >> value;
  if (!in || !in.eof() || value <= 0) {
    throw UsageError{fmt::format("{} expects a positive number of seconds, got '{}'", option, text)};
  }
  return value;
}

Options parse_args(const std::vector<std::string>& args) {
  Options options;
  if (args.empty()) throw UsageError{"missing verb"};
  options.verb = args[0];
  size_t i = 1;
  auto value_of = [&](const std::string& arg, const std::string& name) -> std::optional<std::string> {
    if (arg == name) {
      if (i + 1 >= args.size()) throw UsageError{fmt::format("{} needs a value", name)};
      return args[++i];
    }
    if (arg.rfind(name + "=", 0) == 0) return arg.substr(name.size() + 1);
    return std::nullopt;
  };
  const bool is_check = options.verb == "check";
  for (; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "-D" || (arg.rfind("-D", 0) == 0 && arg.size() > 2)) {
      std::string assignment = arg.size() > 2 ? arg.substr(2) : "";
      if (arg == "-D") {
        if (i + 1 >= args.size()) throw UsageError{"-D needs name=value"};
        assignment = args[++i];
      }
      const size_t eq = assignment.find('=');
      if (eq == std::string::npos || eq == 0) throw UsageError{fmt::format("-D expects name=value, got '{}'", assignment)};
      options.overrides.push_back({assignment.substr(0, eq), assignment.substr(eq + 1)});
    } else if (auto v = value_of(arg, "--seed")) {
      options.seed = parse_count("--seed", *v);
    } else if (auto v = value_of(arg, "--max-world")) {
      options.load_limits.max_world = static_cast<int32_t>(std::min<uint64_t>(parse_count("--max-world", *v), INT32_MAX));
    } else if (auto v = value_of(arg, "--max-file-bytes")) {
      options.load_limits.max_file_bytes = static_cast<int64_t>(std::min<uint64_t>(parse_count("--max-file-bytes", *v), INT64_MAX));
    } else if (auto v = value_of(arg, "--max-nesting")) {
      options.load_limits.max_nesting = static_cast<int32_t>(std::min<uint64_t>(parse_count("--max-nesting", *v), INT32_MAX));
    } else if (auto v = value_of(arg, "--max-ops")) {
      options.check.engine.limits.max_ops = parse_count("--max-ops", *v);
      options.load_limits.max_ops = static_cast<int64_t>(std::min<uint64_t>(options.check.engine.limits.max_ops, INT64_MAX));
    } else if (auto v = value_of(arg, "--max-repeat")) {
      options.check.engine.limits.max_repeat = static_cast<int64_t>(std::min<uint64_t>(parse_count("--max-repeat", *v), INT64_MAX));
    } else if (auto v = value_of(arg, "--max-call-depth")) {
      options.check.engine.limits.max_call_depth = static_cast<int32_t>(std::min<uint64_t>(parse_count("--max-call-depth", *v), 100'000));
    } else if (auto json = value_of(arg, "--json")) {
      options.json_path = *json;
    } else if (arg == "--quiet") {
      options.quiet = true;
    } else if (auto timeline = options.verb == "run" ? value_of(arg, "--timeline") : std::nullopt) {
      options.timeline_path = *timeline;
    } else if (auto strategy = is_check ? value_of(arg, "--strategy") : std::nullopt) {
      const auto& names = checker::strategy_names();
      if (std::find(names.begin(), names.end(), *strategy) == names.end()) {
        throw UsageError{fmt::format("unknown strategy '{}'; strategies: dfs, dpor", *strategy)};
      }
      options.check.strategy = *strategy;
    } else if (auto max = is_check ? value_of(arg, "--max-executions") : std::nullopt) {
      options.check.max_executions = parse_count("--max-executions", *max);
      if (options.check.max_executions == 0) throw UsageError{"--max-executions must be at least 1"};
    } else if (auto budget = is_check ? value_of(arg, "--time-budget") : std::nullopt) {
      options.check.time_budget_s = parse_seconds("--time-budget", *budget);
    } else if (is_check && arg == "--check-expect") {
      options.check_expect = true;
    } else if (arg.size() > 1 && arg[0] == '-') {
      throw UsageError{fmt::format("unknown option '{}' for '{}'", arg, options.verb)};
    } else {
      options.inputs.push_back(arg);
    }
  }
  options.check.seed = options.seed;
  return options;
}

// Files stay as given; folders contribute every .yaml and .jsonl below them, in sorted order.
std::vector<std::string> expand_inputs(const std::vector<std::string>& inputs, std::ostream& err, bool& bad) {
  std::vector<std::string> out;
  for (const std::string& input : inputs) {
    std::error_code ec;
    if (fs::is_directory(input, ec)) {
      std::vector<std::string> found;
      for (auto it = fs::recursive_directory_iterator(input, ec); !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
        const fs::path& path = it->path();
        if (it->is_regular_file(ec) && (path.extension() == ".yaml" || path.extension() == ".jsonl")) {
          found.push_back(path.generic_string());
        }
      }
      if (ec) {
        err << fmt::format("{}: error: cannot list folder: {}\n", input, ec.message());
        bad = true;
      }
      std::sort(found.begin(), found.end());
      if (found.empty() && !ec) {
        err << fmt::format("{}: error: no .yaml or .jsonl files in this folder\n", input);
        bad = true;
      }
      out.insert(out.end(), found.begin(), found.end());
    } else {
      out.push_back(input);
    }
  }
  return out;
}

// Writes a whole file or nothing: to a temporary beside it, then renamed over it.
bool write_file(const std::string& path, const std::string& content, std::ostream& err) {
  const std::string temporary = path + ".tmp";
  {
    std::ofstream file(temporary, std::ios::binary | std::ios::trunc);
    if (!file) {
      err << fmt::format("{}: error: cannot write file: {}\n", path, std::strerror(errno));
      return false;
    }
    file << content;
    file.flush();
    if (!file) {
      err << fmt::format("{}: error: cannot write file: {}\n", path, std::strerror(errno));
      std::remove(temporary.c_str());
      return false;
    }
  }
  std::error_code ec;
  fs::rename(temporary, path, ec);
  if (ec) {
    err << fmt::format("{}: error: cannot write file: {}\n", path, ec.message());
    std::remove(temporary.c_str());
    return false;
  }
  return true;
}

bool emit_json(const Options& options, const std::string& json, std::ostream& out, std::ostream& err) {
  if (!options.json_path) return true;
  if (*options.json_path == "-") {
    out << json;
    return true;
  }
  return write_file(*options.json_path, json, err);
}

// Loads one input, printing its diagnostics (warnings too). nullopt on error.
std::optional<sim::Scenario> load(const std::string& path, const Options& options, std::vector<std::string>& errors,
                                  std::ostream& err) {
  sim::LoadResult loaded = sim::load_scenario_file(path, options.overrides, options.load_limits);
  for (const sim::Diagnostic& d : loaded.diagnostics) {
    std::string text = sim::format_diagnostic(d, loaded.text);
    if (d.severity == sim::Severity::ERROR) errors.push_back(text);
    else if (!options.quiet) err << text;
  }
  return std::move(loaded.scenario);
}

int cmd_check(const Options& options, std::ostream& out, std::ostream& err) {
  if (options.inputs.empty()) throw UsageError{"check needs at least one scenario or folder"};
  bool bad = false;
  const std::vector<std::string> inputs = expand_inputs(options.inputs, err, bad);
  const bool text_to_stdout = !(options.json_path && *options.json_path == "-");
  std::ostream& text = text_to_stdout ? out : err;

  std::vector<std::unique_ptr<sim::Scenario>> scenarios;
  std::vector<checker::InputReport> reports;
  size_t bugs = 0, inconclusive = 0, mismatched = 0;
  for (const std::string& input : inputs) {
    checker::InputReport report;
    report.input = input;
    report.seed = options.seed;
    if (std::optional<sim::Scenario> scenario = load(input, options, report.errors, err)) {
      scenarios.push_back(std::make_unique<sim::Scenario>(std::move(*scenario)));
      report.scenario = scenarios.back().get();
      report.result = checker::check_scenario(*report.scenario, options.check);
    }
    if (report.failed_to_load()) {
      bad = true;
      err << checker::report_text(report, options.quiet);
    } else {
      text << checker::report_text(report, options.quiet);
      const sim::Verdict verdict = report.result->verdict;
      if (verdict == sim::Verdict::INCONCLUSIVE) ++inconclusive;
      else if (verdict != sim::Verdict::OK) ++bugs;
      if (!report.matches_expected()) ++mismatched;
    }
    reports.push_back(std::move(report));
  }
  if (inputs.size() > 1) {
    text << fmt::format("{} input{}: {} with bugs, {} inconclusive, {} not as expected{}\n", inputs.size(),
                        inputs.size() == 1 ? "" : "s", bugs, inconclusive, mismatched,
                        bad ? ", some failed to load" : "");
  }
  if (!reports.empty() && !emit_json(options, checker::report_json(reports, reports.size() > 1), out, err)) bad = true;
  if (bad) return EXIT_BAD_INPUT;
  if (options.check_expect) return mismatched == 0 ? EXIT_NO_BUG : EXIT_BUG;
  if (bugs > 0) return EXIT_BUG;
  if (inconclusive > 0) return EXIT_INCONCLUSIVE;
  return EXIT_NO_BUG;
}

int cmd_validate(const Options& options, std::ostream& out, std::ostream& err) {
  if (options.inputs.empty()) throw UsageError{"validate needs at least one scenario or folder"};
  bool bad = false;
  const std::vector<std::string> inputs = expand_inputs(options.inputs, err, bad);
  for (const std::string& input : inputs) {
    std::vector<std::string> errors;
    if (load(input, options, errors, err)) {
      if (!options.quiet) out << fmt::format("{}: ok\n", input);
    } else {
      bad = true;
      for (const std::string& e : errors) err << e;
    }
  }
  return bad ? EXIT_BAD_INPUT : EXIT_NO_BUG;
}

std::string format_ms(int64_t ns) { return fmt::format("{:.3f} ms", static_cast<double>(ns) / 1e6); }

void print_critical_path(const sim::Scenario& scenario, const sim::ExecutionResult& result, std::ostream& out) {
  const std::vector<sim::PathStep> path = sim::critical_path(result);
  if (path.empty()) return;
  const sim::OpRecord& first = result.ops[static_cast<size_t>(path.front().rank)][path.front().index];
  const sim::OpRecord& last = result.ops[static_cast<size_t>(path.back().rank)][path.back().index];
  out << fmt::format("critical path: {} op{}, {} to {}\n", path.size(), path.size() == 1 ? "" : "s",
                     format_ms(first.start_ns), format_ms(last.end_ns));
  constexpr size_t SHOWN = 6;
  for (size_t i = 0; i < path.size(); ++i) {
    if (path.size() > 2 * SHOWN && i == SHOWN) {
      out << fmt::format("  ... {} more ...\n", path.size() - 2 * SHOWN);
      i = path.size() - SHOWN;
    }
    const sim::OpRecord& rec = result.ops[static_cast<size_t>(path[i].rank)][path[i].index];
    out << fmt::format("  rank {} {} ({}) {} - {}\n", path[i].rank, checker::describe_op(scenario, rec),
                       rec.op.stmt ? scenario.location(rec.op.stmt->loc) : scenario.path, format_ms(rec.start_ns),
                       format_ms(rec.end_ns));
  }
}

int cmd_run(const Options& options, std::ostream& out, std::ostream& err) {
  if (options.inputs.size() != 1) throw UsageError{"run needs exactly one scenario"};
  const std::string& input = options.inputs.front();
  std::vector<std::string> errors;
  std::optional<sim::Scenario> scenario = load(input, options, errors, err);
  if (!scenario) {
    for (const std::string& e : errors) err << e;
    return EXIT_BAD_INPUT;
  }
  sim::Engine engine(*scenario, options.check.engine);
  sim::TimedStrategy timed;
  const sim::ExecutionResult result = engine.run(timed);
  if (result.end == sim::ExecutionEnd::ERROR || result.end == sim::ExecutionEnd::LIMIT) {
    err << sim::format_diagnostic(*result.error, scenario->text);
    return EXIT_BAD_INPUT;
  }
  if (options.timeline_path && !write_file(*options.timeline_path, sim::chrome_trace(*scenario, result), err)) {
    return EXIT_BAD_INPUT;
  }
  int64_t step_ns = 0;
  out << fmt::format("{}: {} ranks, {} events\n", input, scenario->world, result.events);
  for (size_t r = 0; r < result.rank_status.size(); ++r) {
    step_ns = std::max(step_ns, result.rank_end_ns[r]);
    if (!options.quiet) {
      const sim::RankStatus status = result.rank_status[r];
      const bool stuck = status == sim::RankStatus::BLOCKED || status == sim::RankStatus::RUNNING;
      out << fmt::format("  rank {}: {} {} {}\n", r, stuck ? "stuck" : sim::rank_status_name(status),
                         stuck ? "since" : "at", format_ms(result.rank_end_ns[r]));
    }
  }
  const std::optional<checker::Bug> bug = checker::analyze(*scenario, result);
  print_critical_path(*scenario, result, out);
  if (!bug) {
    out << fmt::format("completed: step time {}\n", format_ms(step_ns));
    return EXIT_NO_BUG;
  }
  out << fmt::format("{}:\n", sim::verdict_name(bug->kind));
  for (const std::string& line : bug->explanation) out << "  " << line << "\n";
  return EXIT_BUG;
}

}  // namespace

int run_cli(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  try {
    if (!args.empty() && (args[0] == "--help" || args[0] == "-h" || args[0] == "help")) {
      out << USAGE;
      return EXIT_NO_BUG;
    }
    if (!args.empty() && args[0] == "--version") {
      out << "lockstep " << checker::lockstep_version() << "\n";
      return EXIT_NO_BUG;
    }
    const Options options = parse_args(args);
    if (options.verb == "check") return cmd_check(options, out, err);
    if (options.verb == "validate") return cmd_validate(options, out, err);
    if (options.verb == "run") return cmd_run(options, out, err);
    if (std::find(LATER_VERBS.begin(), LATER_VERBS.end(), options.verb) != LATER_VERBS.end()) {
      throw UsageError{fmt::format("'{}' is not available in this version; verbs: check, run, validate", options.verb)};
    }
    throw UsageError{fmt::format("unknown verb '{}'; verbs: check, run, validate", options.verb)};
  } catch (const UsageError& error) {
    err << "lockstep: error: " << error.message << "\n" << "run 'lockstep --help' for usage\n";
    return EXIT_BAD_INPUT;
  }
}

}  // namespace lockstep::cli

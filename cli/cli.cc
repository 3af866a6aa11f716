#include "cli/cli.h"

#include <algorithm>
#include <map>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <fstream>
#include <memory>
#include <optional>

#include <unistd.h>

#include <fmt/format.h>

#include "checker/analysis.h"
#include "checker/bug_class.h"
#include "cli/command_line.h"
#include "cli/sweep.h"
#include "import/import_cli.h"
#include "checker/counterexample.h"
#include "checker/minimize.h"
#include "checker/replay.h"
#include "checker/explore.h"
#include "checker/html_report.h"
#include "checker/rank_set.h"
#include "checker/report.h"
#include "export/promela.h"
#include "gpu_validation/replay_session.h"
#include "sim/engine.h"
#include "sim/hash.h"
#include "sim/loader.h"
#include "sim/output_file.h"
#include "sim/trace_format.h"
#include "sim/timeline.h"
#include "record/record_verb.h"

namespace lockstep::cli {

namespace {

namespace fs = std::filesystem;

// SIGINT/SIGTERM during check: the search stops after the execution under way and what was
// found is written. The handlers reset themselves, so a second signal ends the process at once.
std::atomic<bool> stop_requested{false};

void request_stop(int) { stop_requested.store(true, std::memory_order_relaxed); }

// Installs the handlers for its life (check only: the other verbs stop at once, as before).
struct StopOnSignal {
  struct sigaction old_int {};
  struct sigaction old_term {};
  StopOnSignal() {
    stop_requested = false;
    struct sigaction action {};
    action.sa_handler = request_stop;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESETHAND;
    sigaction(SIGINT, &action, &old_int);
    sigaction(SIGTERM, &action, &old_term);
  }
  ~StopOnSignal() {
    sigaction(SIGINT, &old_int, nullptr);
    sigaction(SIGTERM, &old_term, nullptr);
  }
  StopOnSignal(const StopOnSignal&) = delete;
  StopOnSignal& operator=(const StopOnSignal&) = delete;
};

// Writes a whole file or nothing (sim/output_file.h: never replaces a device or FIFO, never
// follows a link planted at its temporary).
bool write_file(const std::string& path, const std::string& content, std::ostream& err) {
  const std::string problem = sim::write_output_file(path, content);
  if (problem.empty()) return true;
  err << fmt::format("{}: error: cannot write file: {}\n", path, problem);
  return false;
}

bool emit_json(const Options& options, const std::string& json, std::ostream& out, std::ostream& err) {
  if (!options.json_path) return true;
  if (*options.json_path == "-") {
    out << json;
    return true;
  }
  return write_file(*options.json_path, json, err);
}

// Inputs are told apart by content: a trace starts `{"lockstep_trace"` (after any blanks),
// whatever its name; a file that cannot be read, or is empty, by its extension.
constexpr std::string_view TRACE_START = "{\"lockstep_trace\"";

bool is_trace_text(std::string_view text) {
  const size_t start = text.find_first_not_of(" \t\r\n");
  return start != std::string_view::npos && text.substr(start).starts_with(TRACE_START);
}

bool is_trace_file(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  char head[64] = {};
  if (file) file.read(head, sizeof head);
  const auto got = static_cast<size_t>(file.gcount());
  if (got == 0) return fs::path(path).extension() == ".jsonl";
  return is_trace_text(std::string_view(head, got));
}

// Loads one input, printing its diagnostics (warnings too). nullopt on error.
std::optional<sim::Scenario> load(const std::string& path, const Options& options, std::vector<std::string>& errors,
                                  std::ostream& err) {
  sim::LoadResult loaded = load_input(path, options.overrides, options.load_limits);
  for (const sim::Diagnostic& d : loaded.diagnostics) {
    if (d.severity == sim::Severity::ERROR) errors.push_back(sim::format_diagnostic(d, loaded.text));
    else if (!options.quiet) err << sim::format_diagnostic(d, loaded.text);  // formatted only when shown
  }
  return std::move(loaded.scenario);
}

// A scenario name as the start of a file name (docs/counterexamples.md): letters, digits, '-',
// '_' and '.' kept, anything else '_'; a name longer than MAX_STEM_BYTES is cut and ends in 16
// hex digits of a hash (FNV-1a, 64 bits) of the whole name, so that every counterexample file
// name fits in a folder (255 bytes) and two long names that share a start still differ.
constexpr size_t MAX_STEM_BYTES = 100;

std::string file_stem(const std::string& name) {
  std::string out;
  for (char c : name) out += std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.' ? c : '_';
  if (out.empty()) return "scenario";
  if (out.size() <= MAX_STEM_BYTES) return out;
  return fmt::format("{}-{:016x}", std::string_view(out).substr(0, MAX_STEM_BYTES - 17), fnv1a(name));
}

// The stem of an input's counterexample files: the input file's name without its extension, or,
// when another input of the same run has that name, its whole path as given.
std::string cex_stem(const std::string& input, std::map<std::string, std::string>& stems) {
  const fs::path path(input);
  std::string stem = file_stem(path.stem().string());
  auto [it, inserted] = stems.emplace(stem, input);
  if (inserted || it->second == input) return stem;
  std::string whole = (path.parent_path() / path.stem()).generic_string();
  std::replace(whole.begin(), whole.end(), '/', '_');
  return file_stem(whole);
}

// One counterexample file per bug class, for its representative: DIR/<input>-<class>.json; with
// --minimize also the minimized schedule DIR/<input>-<class>.min.jsonl, and a line per class in
// `notes` for the text report. An existing file is replaced only with --force.
bool write_counterexamples(const Options& options, checker::InputReport& report, std::string& notes,
                           std::map<std::string, std::string>& stems, std::ostream& err) {
  std::error_code ec;
  fs::create_directories(*options.cex_dir, ec);
  if (ec) {
    err << fmt::format("{}: error: cannot create folder: {}\n", *options.cex_dir, ec.message());
    return false;
  }
  const sim::Scenario& scenario = *report.scenario;
  const std::string stem = cex_stem(report.input, stems);
  const std::vector<checker::BugClass> classes = checker::group_bugs(report.result->bugs);
  report.counterexamples.assign(report.result->bugs.size(), "");
  auto fresh = [&](const std::string& path) {
    if (options.force || !fs::exists(path)) return true;
    err << fmt::format("{}: error: file exists (from an earlier check?); --force replaces it\n", path);
    return false;
  };
  for (size_t c = 0; c < classes.size(); ++c) {
    const size_t i = classes[c].representative;
    const checker::Bug& bug = report.result->bugs[i];
    const std::string path = (fs::path(*options.cex_dir) / fmt::format("{}-{}.json", stem, c + 1)).generic_string();
    if (!fresh(path)) return false;
    bool diverged = false;
    const sim::ExecutionResult replayed =
        checker::replay_execution(scenario, bug.choices, checker::engine_options_for(options.check), diverged);
    std::optional<checker::MinimizedInfo> minimized;
    if (options.minimize) {
      checker::MinimizeOptions minimize;
      minimize.check = options.check;
      minimize.check.progress = nullptr;
      minimize.limits = options.load_limits;
      minimize.budget = options.minimize_budget.value_or(checker::DEFAULT_MINIMIZE_BUDGET);
      minimize.path = (fs::path(*options.cex_dir) / fmt::format("{}-{}.min.jsonl", stem, c + 1)).generic_string();
      if (!fresh(minimize.path)) return false;
      const checker::MinimizeResult result = checker::minimize_bug(scenario, bug, minimize);
      minimized.emplace();
      minimized->refused = result.refused;
      if (result.refused.empty()) {
        if (!write_file(minimize.path, result.trace, err)) return false;
        minimized->trace = minimize.path;
        minimized->ranks = result.ranks_after;
        minimized->ops = result.ops_after;
        minimized->of_ranks = result.ranks_before;
        minimized->of_ops = result.ops_before;
        minimized->rechecks = result.rechecks;
        minimized->budget = minimize.budget;
        minimized->budget_hit = result.budget_hit;
        minimized->sources = result.sources;
        notes += fmt::format("  {}: {}\n", checker::minimize_summary(result, minimize.budget), minimize.path);
      } else {
        notes += fmt::format("  not minimized: {}\n", result.refused);
      }
    }
    if (!write_file(path,
                    checker::counterexample_json(scenario, bug, replayed, options.check.strategy, options.seed,
                                                 minimized ? &*minimized : nullptr),
                    err)) {
      return false;
    }
    report.counterexamples[i] = path;
  }
  return true;
}

int cmd_check(const Options& options, std::ostream& out, std::ostream& err) {
  if (options.mpi && !options.check.run_parts && !options.check.run_whole && !options.check.run_branches) {
    err << "lockstep: error: --mpi: this lockstep hands a search over MPI to lockstep-mpi beside it, which is "
           "missing (it is built where CMake finds MPI: scripts/setup installs libopenmpi-dev)\n";
    return EXIT_BAD_INPUT;
  }
  const StopOnSignal stop_on_signal;
  bool bad = false;
  const std::vector<std::string> inputs = expand_inputs(options.inputs, err, bad);
  const bool text_to_stdout = !(options.json_path && *options.json_path == "-");
  std::ostream& text = text_to_stdout ? out : err;

  std::vector<std::unique_ptr<sim::Scenario>> scenarios;
  std::vector<checker::InputReport> reports;
  std::map<std::string, std::string> cex_stems;  // counterexample file stems -> their input
  size_t bugs = 0, inconclusive = 0, mismatched = 0;
  for (const std::string& input : inputs) {
    checker::InputReport report;
    std::string notes;  // --minimize: one line per bug
    report.input = input;
    report.seed = options.seed;
    if (std::optional<sim::Scenario> scenario = load(input, options, report.errors, err)) {
      scenarios.push_back(std::make_unique<sim::Scenario>(std::move(*scenario)));
      report.scenario = scenarios.back().get();
      checker::CheckOptions check = options.check;
      check.stop = &stop_requested;
      // The progress line's state lives as long as the search that calls it.
      bool progressed = false;
      double printed = 0;
      const bool terminal = ::isatty(STDERR_FILENO) && &err == &std::cerr;
      if (!options.quiet && (terminal || options.progress)) {
        check.progress = [&, terminal](const checker::Progress& p) {
          // Off a terminal (--progress): a line every 5 s, for logs.
          if (!terminal && printed > 0 && p.elapsed_s - printed < 5) return;
          printed = p.elapsed_s;
          const std::string line = fmt::format("  {}: {} executions, {:.0f}/s, {} states, {} bug{}, {:.1f} s", input,
                                               p.executions, p.rate_per_s, p.states, p.bugs, p.bugs == 1 ? "" : "s",
                                               p.elapsed_s);
          if (terminal) {
            err << "\r" << line << "   " << std::flush;
            progressed = true;
          } else {
            err << line << "\n" << std::flush;
          }
        };
      }
      report.result = checker::check_scenario(*report.scenario, check);
      if (progressed) err << "\r\033[K" << std::flush;
      if (options.cex_dir && !write_counterexamples(options, report, notes, cex_stems, err)) bad = true;
    }
    if (report.failed_to_load()) {
      bad = true;
      err << checker::report_text(report, options.quiet);
    } else {
      text << checker::report_text(report, options.quiet);
      if (!options.quiet) text << notes;
      const sim::Verdict verdict = report.result->verdict;
      if (verdict == sim::Verdict::INCONCLUSIVE) ++inconclusive;
      else if (verdict != sim::Verdict::OK) ++bugs;
      if (!report.matches_expected()) ++mismatched;
    }
    reports.push_back(std::move(report));
    if (stop_requested.load(std::memory_order_relaxed)) break;
  }
  const bool interrupted = stop_requested.load(std::memory_order_relaxed);
  if (interrupted) {
    text << fmt::format("interrupted: {} of {} input{} checked\n", reports.size(), inputs.size(),
                        inputs.size() == 1 ? "" : "s");
  }
  if (inputs.size() > 1) {
    text << fmt::format("{} input{}: {} with bugs, {} inconclusive, {} not as expected{}\n", inputs.size(),
                        inputs.size() == 1 ? "" : "s", bugs, inconclusive, mismatched,
                        bad ? ", some failed to load" : "");
  }
  if (!reports.empty() && !emit_json(options, checker::report_json(reports, reports.size() > 1), out, err)) bad = true;
  if (options.junit_path && !write_file(*options.junit_path, checker::report_junit(reports, options.check_expect), err)) {
    bad = true;
  }
  if (options.html_path && !write_file(*options.html_path, checker::report_html(reports, checker::engine_options_for(options.check)), err)) bad = true;
  if (const char* github = std::getenv("GITHUB_ACTIONS"); github != nullptr && std::string_view(github) == "true") {
    text << checker::report_github(reports);
  }
  if (bad) return EXIT_BAD_INPUT;
  if (options.check_expect) return mismatched == 0 ? EXIT_NO_BUG : EXIT_BUG;
  if (bugs > 0) return EXIT_BUG;
  if (inconclusive > 0 || interrupted) return EXIT_INCONCLUSIVE;
  return EXIT_NO_BUG;
}

int cmd_validate(const Options& options, std::ostream& out, std::ostream& err) {
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
    out << fmt::format("  rank {} {} ({}) {} - {}\n", path[i].rank, sim::describe_op(scenario, rec),
                       rec.op.stmt ? scenario.location(rec.op.stmt->loc) : scenario.path, format_ms(rec.start_ns),
                       format_ms(rec.end_ns));
  }
}

// The event log of run and replay --sim (docs/logging.md): to --log FILE, else stderr.
struct LogSink {
  std::unique_ptr<std::ofstream> file;
  std::unique_ptr<sim::EventLog> log;
};

// False when the log file cannot be opened (reported).
bool open_log(const Options& options, std::ostream& err, LogSink& sink) {
  if (!options.log_level) return true;
  std::ostream* to = &err;
  if (options.log_path) {
    sink.file = std::make_unique<std::ofstream>(*options.log_path, std::ios::binary | std::ios::trunc);
    if (!*sink.file) {
      err << fmt::format("{}: error: cannot write file: {}\n", *options.log_path, std::strerror(errno));
      return false;
    }
    to = sink.file.get();
  }
  sink.log = std::make_unique<sim::EventLog>(*to, *options.log_level, options.log_ranks);
  return true;
}

// Where each rank ended: a line per rank up to RUN_LINES_PER_RANK_UP_TO ranks; beyond, a
// bounded summary: how many ended how, the fastest and the slowest to finish, the stuck ranks.
constexpr size_t RUN_LINES_PER_RANK_UP_TO = 16;

std::string rank_summary(const sim::ExecutionResult& result) {
  auto is_stuck = [](sim::RankStatus status) { return status == sim::RankStatus::BLOCKED || status == sim::RankStatus::RUNNING; };
  std::string out;
  const size_t world = result.rank_status.size();
  if (world <= RUN_LINES_PER_RANK_UP_TO) {
    for (size_t r = 0; r < world; ++r) {
      const sim::RankStatus status = result.rank_status[r];
      const bool stuck = is_stuck(status);
      out += fmt::format("  rank {}: {} {} {}\n", r, stuck ? "stuck" : sim::rank_status_name(status), stuck ? "since" : "at",
                         format_ms(result.rank_end_ns[r]));
    }
    return out;
  }
  std::map<std::string, size_t> counts;
  std::vector<int32_t> stuck;
  int64_t first_ns = INT64_MAX, last_ns = INT64_MIN, stuck_from_ns = INT64_MAX, stuck_to_ns = INT64_MIN;
  for (size_t r = 0; r < world; ++r) {
    const sim::RankStatus status = result.rank_status[r];
    const int64_t end_ns = result.rank_end_ns[r];
    ++counts[is_stuck(status) ? std::string("stuck") : std::string(sim::rank_status_name(status))];
    if (is_stuck(status)) {
      stuck.push_back(static_cast<int32_t>(r));
      stuck_from_ns = std::min(stuck_from_ns, end_ns);
      stuck_to_ns = std::max(stuck_to_ns, end_ns);
    } else {
      first_ns = std::min(first_ns, end_ns);
      last_ns = std::max(last_ns, end_ns);
    }
  }
  std::string tally;
  for (const auto& [what, n] : counts) tally += fmt::format("{}{} {}", tally.empty() ? "" : ", ", n, what);
  out += "  ranks: " + tally + "\n";
  auto ended_at = [&](int64_t at_ns) {
    std::vector<int32_t> ranks;
    for (size_t r = 0; r < world; ++r) {
      if (!is_stuck(result.rank_status[r]) && result.rank_end_ns[r] == at_ns) ranks.push_back(static_cast<int32_t>(r));
    }
    return checker::format_ranks(ranks);
  };
  if (first_ns != INT64_MAX) {
    out += fmt::format("  fastest: {} at {}\n", ended_at(first_ns), format_ms(first_ns));
    out += fmt::format("  slowest: {} at {}\n", ended_at(last_ns), format_ms(last_ns));
  }
  if (!stuck.empty()) {
    out += fmt::format("  stuck: {} since {}{}\n", checker::format_ranks(stuck), format_ms(stuck_from_ns),
                       stuck_to_ns > stuck_from_ns ? " to " + format_ms(stuck_to_ns) : "");
  }
  return out;
}

int cmd_run(const Options& options, std::ostream& out, std::ostream& err) {
  const std::string& input = options.inputs.front();
  std::vector<std::string> errors;
  std::optional<sim::Scenario> scenario = load(input, options, errors, err);
  if (!scenario) {
    for (const std::string& e : errors) err << e;
    return EXIT_BAD_INPUT;
  }
  LogSink sink;
  if (!open_log(options, err, sink)) return EXIT_BAD_INPUT;
  sim::EngineOptions engine_options = options.check.engine;
  engine_options.log = sink.log.get();
  sim::Engine engine(*scenario, engine_options);
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
  for (size_t r = 0; r < result.rank_status.size(); ++r) step_ns = std::max(step_ns, result.rank_end_ns[r]);
  if (!options.quiet) out << rank_summary(result);
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

// A counterexample replayed in the simulator: the scenario reloaded from the file's own copy,
// the schedule followed choice by choice.
struct Replayed {
  checker::Counterexample cex;
  sim::Scenario scenario;
  sim::ExecutionResult result;
  std::optional<checker::Bug> bug;
  bool diverged = false;
};

std::optional<Replayed> replay_counterexample(const std::string& path, const Options& options, std::ostream& err) {
  std::string error;
  std::optional<checker::Counterexample> cex = checker::read_counterexample(path, error);
  if (!cex) {
    err << error << "\n";
    return std::nullopt;
  }
  const bool trace = is_trace_text(cex->text) || (cex->text.empty() && fs::path(cex->input).extension() == ".jsonl");
  sim::LoadResult loaded = trace ? sim::load_trace_text(cex->text, cex->input, {}, options.load_limits)
                                 : sim::load_scenario_text(cex->text, cex->input, cex->params, options.load_limits);
  if (!loaded.ok()) {
    for (const sim::Diagnostic& d : loaded.diagnostics) err << sim::format_diagnostic(d, loaded.text);
    return std::nullopt;
  }
  Replayed replayed{std::move(*cex), std::move(*loaded.scenario), {}, std::nullopt, false};
  checker::CheckOptions check = options.check;
  check.strategy = replayed.cex.strategy;
  LogSink sink;  // replay --sim (explain and replay --mpi take no log options)
  if (!open_log(options, err, sink)) return std::nullopt;
  sim::EngineOptions engine_options = checker::engine_options_for(check);
  engine_options.log = options.backend == "sim" ? sink.log.get() : nullptr;
  replayed.result = checker::replay_execution(replayed.scenario, replayed.cex.schedule, engine_options, replayed.diverged);
  replayed.bug = checker::analyze(replayed.scenario, replayed.result);
  return replayed;
}

// replay --mpi / --nccl: the execution the model predicts (a counterexample's, or a scenario's
// timed run), run on hardware by gpu_validation (docs/replay.md).
int cmd_replay_hardware(const Options& options, std::ostream& out, std::ostream& err) {
  const std::string& input = options.inputs.front();
  std::optional<sim::Scenario> scenario;
  sim::ExecutionResult result;
  std::vector<sim::Option> choices;
  if (fs::path(input).extension() == ".yaml" || fs::path(input).extension() == ".jsonl" || is_trace_file(input)) {
    // A scenario replays its default timed schedule.
    std::vector<std::string> errors;
    scenario = load(input, options, errors, err);
    if (!scenario) {
      for (const std::string& e : errors) err << e;
      return EXIT_BAD_INPUT;
    }
    sim::EngineOptions engine = options.check.engine;
    engine.record_ops = true;
    sim::Engine run(*scenario, engine);
    sim::TimedStrategy timed;
    checker::RecordingStrategy recording(timed);
    result = run.run(recording);
    choices = recording.choices();
  } else {
    std::optional<Replayed> replayed = replay_counterexample(input, options, err);
    if (!replayed) return EXIT_BAD_INPUT;
    if (replayed->diverged) {
      err << fmt::format("{}: error: the schedule no longer fits the scenario; run 'lockstep replay {} --sim'\n", input, input);
      return EXIT_INCONCLUSIVE;
    }
    scenario = std::move(replayed->scenario);
    result = std::move(replayed->result);
    choices = replayed->cex.schedule;
  }
  if (result.error) {
    err << sim::format_diagnostic(*result.error, scenario->text);
    return EXIT_BAD_INPUT;
  }
  gpu::ReplayOptions replay;
  replay.stall_s = options.replay_timeout_s;
  replay.keep_dir = std::getenv("LOCKSTEP_REPLAY_KEEP") != nullptr;
  if (const char* compact = std::getenv("LOCKSTEP_REPLAY_COMPACT"); compact != nullptr && *compact != 0) {
    replay.compact_bytes = 64 * 1024;  // docs/replay.md: quick replays (the CI pass)
  }
  replay.quiet = options.quiet;
  replay.order = options.replay_free_order ? gpu::IssueOrder::FREE : gpu::IssueOrder::GRANTED;
  const gpu::ReplayReport report = gpu::replay_on_hardware(
      *scenario, result, choices, options.check.engine, checker::analyze(*scenario, result),
      options.backend == "nccl" ? gpu::nccl_backend() : gpu::mpi_backend(), replay);
  (report.failed ? err : out) << report.text;
  if (report.failed) return EXIT_BAD_INPUT;
  switch (report.verdict) {
    case gpu::ReplayVerdict::CONFIRMED: return EXIT_BUG;
    case gpu::ReplayVerdict::NOT_REPRODUCED: return EXIT_NO_BUG;
    case gpu::ReplayVerdict::UNDECIDED: break;
  }
  return EXIT_INCONCLUSIVE;
}

int cmd_replay(const Options& options, std::ostream& out, std::ostream& err) {
  if (options.backend == "mpi" || options.backend == "nccl") return cmd_replay_hardware(options, out, err);
  const std::string& input = options.inputs.front();
  if (fs::path(input).extension() == ".yaml" || fs::path(input).extension() == ".jsonl" || is_trace_file(input)) {
    // A scenario replays its default timed schedule.
    Options run = options;
    run.quiet = true;
    return cmd_run(run, out, err);
  }
  std::optional<Replayed> replayed = replay_counterexample(input, options, err);
  if (!replayed) return EXIT_BAD_INPUT;
  if (replayed->result.error) {
    err << sim::format_diagnostic(*replayed->result.error, replayed->scenario.text);
    return EXIT_BAD_INPUT;
  }
  if (replayed->bug && replayed->bug->signature == replayed->cex.signature && !replayed->diverged) {
    out << fmt::format("CONFIRMED (sim): {}\n", sim::verdict_name(replayed->bug->kind));
    for (const std::string& line : replayed->bug->explanation) out << "  " << line << "\n";
    return EXIT_BUG;
  }
  if (!replayed->bug) {
    out << "NOT REPRODUCED (sim): the execution completed" << (replayed->diverged ? " (the schedule no longer fits the scenario)" : "") << "\n";
    return replayed->diverged ? EXIT_INCONCLUSIVE : EXIT_NO_BUG;
  }
  out << fmt::format("NOT REPRODUCED (sim): a different {} instead{}\n", sim::verdict_name(replayed->bug->kind),
                     replayed->diverged ? " (the schedule no longer fits the scenario)" : "");
  for (const std::string& line : replayed->bug->explanation) out << "  " << line << "\n";
  return EXIT_INCONCLUSIVE;
}

int cmd_explain(const Options& options, std::ostream& out, std::ostream& err) {
  std::optional<Replayed> replayed = replay_counterexample(options.inputs.front(), options, err);
  if (!replayed) return EXIT_BAD_INPUT;
  if (!replayed->bug) {
    err << fmt::format("{}: error: the counterexample no longer leads to a bug; run 'lockstep replay {} --sim'\n",
                       options.inputs.front(), options.inputs.front());
    return EXIT_INCONCLUSIVE;
  }
  const checker::Bug& bug = *replayed->bug;
  const sim::Scenario& scenario = replayed->scenario;
  out << fmt::format("{} in {} ({})\n", sim::verdict_name(bug.kind), scenario.name, scenario.path);
  for (const std::string& line : bug.explanation) out << "  " << line << "\n";
  if (!bug.stuck.empty()) {
    out << "wait-for graph:\n";
    // One line per waited-for rank and op: the ranks that wait so, as a range.
    std::vector<std::string> order;
    std::map<std::string, std::vector<int32_t>> waiting;
    for (const sim::StuckOp& s : bug.stuck) {
      for (int32_t w : s.waiting_for) {
        const bool never = std::find(s.never_issued.begin(), s.never_issued.end(), w) != s.never_issued.end();
        const std::string edge = fmt::format(" -> rank {}: {} ({}){}", w, sim::describe_op(scenario, s.op),
                                             s.op.op.stmt ? scenario.location(s.op.op.stmt->loc) : scenario.path,
                                             never ? ", never issued" : "");
        if (!waiting.count(edge)) order.push_back(edge);
        waiting[edge].push_back(s.rank);
      }
    }
    for (const std::string& edge : order) out << "  " << checker::format_ranks(waiting[edge]) << edge << "\n";
  }
  out << fmt::format("schedule: {}\n", checker::schedule_string(bug.choices.empty() ? replayed->cex.schedule : bug.choices));
  if (options.dot_path && !write_file(*options.dot_path, checker::wait_for_dot(scenario, bug), err)) return EXIT_BAD_INPUT;
  return EXIT_BUG;
}

}  // namespace

std::vector<std::string> expand_inputs(const std::vector<std::string>& inputs, std::ostream& err, bool& bad) {
  std::vector<std::string> out;
  for (const std::string& input : inputs) {
    std::error_code ec;
    if (std::filesystem::is_directory(input, ec)) {
      std::vector<std::string> found;
      for (auto it = std::filesystem::recursive_directory_iterator(input, ec); !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
        const std::filesystem::path& path = it->path();
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

sim::LoadResult load_input(const std::string& path, const std::vector<sim::ParamOverride>& overrides,
                           const sim::LoadLimits& limits) {
  return is_trace_file(path) ? sim::load_trace_file(path, overrides, limits) : sim::load_scenario_file(path, overrides, limits);
}

int run_cli(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  return run_command(parse_command_line(args), out, err);
}

int run_command(const CommandLine& line, std::ostream& out, std::ostream& err) {
  if (line.verb.empty()) {
    out << line.out;
    err << line.err;
    return line.code;
  }
  const Options& options = line.options;
  if (line.verb == "check") return cmd_check(options, out, err);
  if (line.verb == "validate") return cmd_validate(options, out, err);
  if (line.verb == "run") return cmd_run(options, out, err);
  if (line.verb == "sweep") return run_sweep(options, out, err);
  if (line.verb == "replay") return cmd_replay(options, out, err);
  if (line.verb == "explain") return cmd_explain(options, out, err);
  if (line.verb == "record") return record::run_record(line.record_options, out, err);
  if (line.verb == "import") return import::run_import(line.import_options, out, err);
  return exporter::export_command(line.export_options, out, err);
}

}  // namespace lockstep::cli

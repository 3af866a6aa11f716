// lockstep-mpi: the lockstep command line, with `sweep --mpi` and `check --mpi` spread over MPI
// ranks. The one binary that links MPI; `lockstep` hands --mpi over to it (cli/main.cc).
//
// Both hand out work one piece at a time from rank 0 to whichever rank asks (a rank whose
// pieces are slow takes fewer), rank 0 working on pieces itself on a thread of its own (the main
// thread alone calls MPI), and every piece's result comes back to rank 0 as JSON:
// - sweep: a piece is a point; its result a PointSummary;
// - check: a piece is a part of a dfs search (the parts --jobs cuts the tree into, under the
//   same schedule prefixes); its result a PartResult, whose bugs rank 0 rebuilds by replaying
//   their schedules. The merge is --jobs' merge.
// Rank 0 prints the report, the same bytes as one process, and every rank exits with its code.
#include <mpi.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <optional>
#include <cstdint>
#include <iostream>
#include <sstream>
#include <string>
#include <thread>

#include <fmt/format.h>
#include <vector>

#include <nlohmann/json.hpp>

#include "checker/counterexample.h"
#include "checker/explore.h"
#include "cli/cli.h"
#include "cli/command_line.h"
#include "cli/sweep.h"
#include "sim/trace_format.h"

namespace lockstep::cli {
namespace {

// Waiting without spinning: a blocking MPI call polls at full speed (OpenMPI), which takes a core
// from rank 0's own worker thread or from a rank still working on the same machine.
void probe_politely(int source, int tag, MPI_Status& status) {
  int ready = 0;
  for (;;) {
    MPI_Iprobe(source, tag, MPI_COMM_WORLD, &ready, &status);
    if (ready != 0) return;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

// Every rank gets rank 0's exit code (the others wait for it without spinning).
int share_code(int code) {
  MPI_Request request;
  MPI_Ibcast(&code, 1, MPI_INT, 0, MPI_COMM_WORLD, &request);
  int done = 0;
  for (;;) {
    MPI_Test(&request, &done, MPI_STATUS_IGNORE);
    if (done != 0) return code;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

// The next message with `tag` from any rank, as its leading int64 (an index, -1 for none) and
// the text after it; the sender's rank.
int receive_indexed(int tag, int64_t& index, std::string& text) {
  MPI_Status status;
  probe_politely(MPI_ANY_SOURCE, tag, status);
  int bytes = 0;
  MPI_Get_count(&status, MPI_CHAR, &bytes);
  std::string message(static_cast<size_t>(bytes), '\0');
  MPI_Recv(message.data(), bytes, MPI_CHAR, status.MPI_SOURCE, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  index = -1;
  if (message.size() >= sizeof(index)) std::memcpy(&index, message.data(), sizeof(index));
  text = message.size() > sizeof(index) ? message.substr(sizeof(index)) : std::string();
  return status.MPI_SOURCE;
}

// Rank 0's side of handing out pieces of work (sweep points, search parts) numbered 0..pieces-1,
// shared with rank 0's own thread through `next`. A worker has two pieces in flight, so it starts
// its next piece while rank 0 reads the result of the last: rank 0's main thread shares the
// machine's cores with the workers, and a worker that waited for its answer waited for a core.
class Dispatcher {
 public:
  using SendWork = std::function<void(int to, int64_t index)>;  // index -1: no piece is left

  Dispatcher(int ranks, SendWork send) : released_(static_cast<size_t>(ranks), 0), send_(std::move(send)) {
    released_[0] = 1;  // rank 0 is no worker
  }

  // The pieces of the next batch, taken by the workers and by rank 0's thread from `next`.
  void start(size_t pieces, std::atomic<size_t>& next) {
    pieces_ = pieces;
    next_ = &next;
    given_ = done_ = 0;
  }

  // A worker's message arrived: its hello (index < 0) or the result of a piece it was given.
  // Sends it its next piece (two after a hello), or tells it that none is left.
  void arrived(int from, int64_t index) {
    if (index >= 0) ++done_;
    give(from);
    if (index < 0 && !released_[static_cast<size_t>(from)]) give(from);
  }

  // Pieces are left to give, or given ones are still out.
  bool busy() const { return done_ < given_ || (next_ != nullptr && next_->load() < pieces_ && released() < workers()); }
  bool all_released() const { return released() == workers(); }

 private:
  void give(int to) {
    if (released_[static_cast<size_t>(to)]) return;
    const size_t i = next_ != nullptr ? (*next_)++ : pieces_;
    if (i < pieces_) {
      ++given_;
      send_(to, static_cast<int64_t>(i));
    } else {
      released_[static_cast<size_t>(to)] = 1;
      send_(to, -1);
    }
  }
  int workers() const { return static_cast<int>(released_.size()) - 1; }
  int released() const { return static_cast<int>(std::count(released_.begin(), released_.end(), 1)) - 1; }

  std::vector<char> released_;  // per rank: told that no piece is left
  SendWork send_;
  size_t pieces_ = 0;
  std::atomic<size_t>* next_ = nullptr;
  size_t given_ = 0, done_ = 0;
};

constexpr int TAG_RESULT = 1;  // worker -> rank 0: int64 index (-1: none yet), then the summary's JSON
constexpr int TAG_WORK = 2;    // rank 0 -> worker: int64 index, -1 when no point is left

void send_result(int64_t index, const std::string& json) {
  std::string message(sizeof(index), '\0');
  std::memcpy(message.data(), &index, sizeof(index));
  message += json;
  MPI_Send(message.data(), static_cast<int>(message.size()), MPI_CHAR, 0, TAG_RESULT, MPI_COMM_WORLD);
}

int worker(const Options& options, const std::vector<std::vector<sim::ParamOverride>>& points) {
  send_result(-1, "");
  for (;;) {
    int64_t index = -1;
    MPI_Status status;
    probe_politely(0, TAG_WORK, status);
    MPI_Recv(&index, 1, MPI_INT64_T, 0, TAG_WORK, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    if (index < 0 || static_cast<size_t>(index) >= points.size()) return 0;
    const PointSummary result = check_point(options, options.inputs.front(), points[static_cast<size_t>(index)], 1);
    send_result(index, result.to_json());
  }
}

// Rank 0: serves the others from the main thread (the only one that calls MPI) while a thread
// of its own checks points from the same counter.
std::vector<PointSummary> coordinate(const Options& options, const std::vector<std::vector<sim::ParamOverride>>& points,
                                     int ranks, std::ostream& err, bool& lost) {
  std::vector<PointSummary> results(points.size());
  std::atomic<size_t> next{0};
  Dispatcher dispatch(ranks, [](int to, int64_t index) { MPI_Send(&index, 1, MPI_INT64_T, to, TAG_WORK, MPI_COMM_WORLD); });
  dispatch.start(points.size(), next);
  std::thread local([&] {
    for (size_t i = next++; i < points.size(); i = next++) results[i] = check_point(options, options.inputs.front(), points[i], 1);
  });
  while (dispatch.busy() || !dispatch.all_released()) {
    int64_t index = -1;
    std::string text;
    const int from = receive_indexed(TAG_RESULT, index, text);
    dispatch.arrived(from, index);
    if (index >= 0 && static_cast<size_t>(index) < points.size()) {
      std::optional<PointSummary> got = PointSummary::from_json(text);
      if (got) {
        results[static_cast<size_t>(index)] = std::move(*got);
      } else {
        err << "lockstep: error: rank " << from << " sent an unreadable result for point " << index << "\n";
        lost = true;
      }
    }
  }
  local.join();
  return results;
}

int sweep_over_mpi(const Options& options, std::ostream& out, std::ostream& err) {
  int provided = 0;
  MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
  int rank = 0, ranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  // Every rank derives the same points; only rank 0 speaks.
  std::ostringstream quiet_out, quiet_err;
  std::ostream& my_out = rank == 0 ? out : quiet_out;
  std::ostream& my_err = rank == 0 ? err : quiet_err;
  SweepOptions sweep;
  Options point_options = options;
  int code = sweep_options_of(options, sweep, point_options, my_err);
  std::optional<std::vector<std::vector<sim::ParamOverride>>> points;
  if (code == EXIT_NO_BUG) {
    points = prepare_sweep(point_options, sweep, my_err);
    if (!points) code = EXIT_BAD_INPUT;
  }
  if (code == EXIT_NO_BUG) {
    if (rank == 0) {
      bool lost = false;
      const std::vector<PointSummary> results = coordinate(point_options, *points, ranks, my_err, lost);
      code = report_sweep(point_options, sweep, *points, results, my_out, my_err);
      if (lost) code = EXIT_BAD_INPUT;
    } else {
      worker(point_options, *points);
    }
  }
  code = share_code(code);
  MPI_Finalize();
  return code;
}

// ---- check --mpi --------------------------------------------------------------------------

using Json = nlohmann::json;

Json option_json(const sim::Option& o) {
  return Json::array({static_cast<int>(o.kind), o.rank, o.thread, o.detail, o.time_ns, o.name, o.actor});
}

sim::Option option_of(const Json& j) {
  sim::Option o;
  o.kind = static_cast<sim::ChoiceKind>(j.at(0).get<int>());
  o.rank = j.at(1).get<int32_t>();
  o.thread = j.at(2).get<int32_t>();
  o.detail = j.at(3).get<int32_t>();
  o.time_ns = j.at(4).get<int64_t>();
  o.name = j.at(5).get<uint32_t>();
  o.actor = j.at(6).get<uint32_t>();
  return o;
}

// A part's result as JSON: its bugs as the schedules that lead to them; its totals and the fold
// of its hashes, not the four per-execution series (32 bytes an execution: sending them cost
// more than a third of the search's time), which the merge explores again where it needs them.
std::string part_json(const checker::PartResult& p) {
  Json bugs = Json::array();
  for (const checker::Bug& bug : p.bugs) {
    Json choices = Json::array();
    for (const sim::Option& o : bug.choices) choices.push_back(option_json(o));
    bugs.push_back(Json{{"execution", bug.execution}, {"signature", bug.signature}, {"schedule", bug.schedule},
                        {"choices", std::move(choices)}});
  }
  Json error = nullptr;
  if (p.error) {
    error = Json{{"file", p.error->file}, {"line", p.error->loc.line}, {"col", p.error->loc.col}, {"message", p.error->message}};
  }
  return Json{{"executions", p.executions}, {"pruned", p.pruned}, {"sleep_blocked", p.sleep_blocked},
              {"states", p.states}, {"cache_full", p.cache_full}, {"events", p.events}, {"fold", p.fold}, {"bugs", std::move(bugs)}, {"terminal_states", p.terminal_states}, {"error", std::move(error)},
              {"bound_hit", p.bound_hit}, {"interrupted", p.interrupted}, {"complete", p.complete}}
      .dump(-1, ' ', false, Json::error_handler_t::replace);
}

// The part back from JSON, each bug rebuilt by replaying its schedule; nullopt when the text is
// not a part or a schedule does not lead to the bug it names.
std::optional<checker::PartResult> part_of(std::string_view text, const sim::Scenario& scenario,
                                           const checker::CheckOptions& options) {
  const Json j = Json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return std::nullopt;
  try {
    checker::PartResult p;
    p.executions = j.at("executions").get<uint64_t>();
    p.pruned = j.at("pruned").get<uint64_t>();
    p.sleep_blocked = j.at("sleep_blocked").get<uint64_t>();
    p.states = j.at("states").get<uint64_t>();
    p.cache_full = j.at("cache_full").get<bool>();
    p.events = j.at("events").get<uint64_t>();
    p.fold = j.at("fold").get<uint64_t>();
    p.terminal_states = j.at("terminal_states").get<std::set<std::string>>();
    p.bound_hit = j.at("bound_hit").get<std::string>();
    p.interrupted = j.at("interrupted").get<bool>();
    p.complete = j.at("complete").get<bool>();
    if (const Json& e = j.at("error"); !e.is_null()) {
      p.error = sim::Diagnostic{e.at("file").get<std::string>(),
                                {e.at("line").get<uint32_t>(), e.at("col").get<uint32_t>()},
                                sim::Severity::ERROR,
                                e.at("message").get<std::string>()};
    }
    const sim::EngineOptions engine = checker::engine_options_for(options);
    for (const Json& b : j.at("bugs")) {
      std::vector<sim::Option> choices;
      for (const Json& o : b.at("choices")) choices.push_back(option_of(o));
      bool diverged = false;
      const sim::ExecutionResult result = checker::replay_execution(scenario, choices, engine, diverged);
      std::optional<checker::Bug> bug = checker::analyze(scenario, result);
      if (diverged || !bug || bug->signature != b.at("signature").get<std::string>()) return std::nullopt;
      bug->choices = std::move(choices);
      bug->schedule = b.at("schedule").get<std::vector<uint32_t>>();
      bug->execution = b.at("execution").get<uint64_t>();
      p.bugs.push_back(std::move(*bug));
    }
    return p;
  } catch (const Json::exception&) {
    return std::nullopt;
  }
}

// The messages of check --mpi: a worker's PART_RESULT is its part's index (-1: none yet) and
// the part's JSON; rank 0's PART_WORK is the index (-1: no part is left), the budget, then the
// part's schedule prefix.
constexpr int TAG_PART_RESULT = 3;
constexpr int TAG_PART_WORK = 4;

class PartServer {
 public:
  PartServer(int ranks, const sim::Scenario* scenario, const Options& options)
      : scenario_(scenario), options_(options), dispatch_(ranks, [this](int to, int64_t index) { send_part(to, index); }) {}

  // check's PartRunner: the parts to the workers and to a thread of rank 0, results merged back.
  std::vector<checker::PartResult> run(const std::vector<std::vector<uint32_t>>& prefixes, uint64_t budget) {
    std::vector<checker::PartResult> results(prefixes.size());
    checker::CheckOptions local_options = options_.check;
    local_options.run_parts = nullptr;
    prefixes_ = &prefixes;
    budget_ = budget;
    std::atomic<size_t> next{0};
    dispatch_.start(prefixes.size(), next);
    std::thread local([&] {
      for (size_t i = next++; i < prefixes.size(); i = next++) results[i] = checker::explore_part(*scenario_, local_options, prefixes[i], budget);
    });
    while (dispatch_.busy()) {
      int64_t index = -1;
      std::string text;
      const int from = receive(index, text);
      dispatch_.arrived(from, index);  // the next part first: the worker explores it while this one is read
      if (index >= 0 && static_cast<size_t>(index) < prefixes.size()) {
        std::optional<checker::PartResult> part = part_of(text, *scenario_, local_options);
        if (part) {
          results[static_cast<size_t>(index)] = std::move(*part);
        } else {
          problem = fmt::format("rank {} sent part {} of the search in a form rank 0 cannot use", from, index);
        }
      }
    }
    local.join();
    prefixes_ = nullptr;
    return results;
  }

  // At the end: every worker not yet released is about to say hello, or has.
  void release_all() {
    std::atomic<size_t> none{0};
    dispatch_.start(0, none);
    while (!dispatch_.all_released()) {
      int64_t index = -1;
      std::string text;
      const int from = receive(index, text);
      dispatch_.arrived(from, index);
    }
  }

  std::string problem;  // a worker's result rank 0 could not use

 private:
  // PART_WORK: the index (-1: no part is left), the budget, then the part's schedule prefix.
  void send_part(int to, int64_t index) {
    std::vector<uint64_t> message = {static_cast<uint64_t>(index), budget_};
    if (index >= 0) {
      const std::vector<uint32_t>& prefix = (*prefixes_)[static_cast<size_t>(index)];
      message.insert(message.end(), prefix.begin(), prefix.end());
    }
    MPI_Send(message.data(), static_cast<int>(message.size()), MPI_UINT64_T, to, TAG_PART_WORK, MPI_COMM_WORLD);
  }

  // The next message of a worker: its index and part (if any).
  static int receive(int64_t& index, std::string& text) { return receive_indexed(TAG_PART_RESULT, index, text); }

  const sim::Scenario* scenario_;
  const Options& options_;
  Dispatcher dispatch_;
  const std::vector<std::vector<uint32_t>>* prefixes_ = nullptr;
  uint64_t budget_ = 0;
};

void part_worker(const Options& options) {
  const int64_t none = -1;
  std::string hello(sizeof(none), '\0');
  std::memcpy(hello.data(), &none, sizeof(none));
  MPI_Send(hello.data(), static_cast<int>(hello.size()), MPI_CHAR, 0, TAG_PART_RESULT, MPI_COMM_WORLD);
  std::optional<sim::Scenario> scenario;
  for (;;) {
    MPI_Status status;
    probe_politely(0, TAG_PART_WORK, status);
    int count = 0;
    MPI_Get_count(&status, MPI_UINT64_T, &count);
    std::vector<uint64_t> message(static_cast<size_t>(std::max(count, 2)));
    MPI_Recv(message.data(), count, MPI_UINT64_T, 0, TAG_PART_WORK, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    const auto index = static_cast<int64_t>(message[0]);
    if (index < 0 || count < 2) return;
    if (!scenario) {
      const std::string& input = options.inputs.front();
      sim::LoadResult loaded = sim::is_trace_path(input) ? sim::load_trace_file(input, options.overrides, options.load_limits)
                                                         : sim::load_scenario_file(input, options.overrides, options.load_limits);
      scenario = std::move(loaded.scenario);  // rank 0 loaded it too: it loads here
    }
    checker::PartResult part;
    if (scenario) {
      const std::vector<uint32_t> prefix(message.begin() + 2, message.begin() + count);
      part = checker::explore_part(*scenario, options.check, prefix, message[1]);
    }
    std::string reply(sizeof(index), '\0');
    std::memcpy(reply.data(), &index, sizeof(index));
    reply += part_json(part);
    MPI_Send(reply.data(), static_cast<int>(reply.size()), MPI_CHAR, 0, TAG_PART_RESULT, MPI_COMM_WORLD);
  }
}

int check_over_mpi(const CommandLine& line, std::ostream& out, std::ostream& err) {
  int provided = 0;
  MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
  int rank = 0, ranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  int code = EXIT_BAD_INPUT;
  if (rank == 0) {
    CommandLine mine = line;
    // The scenario the parts are replayed against: rank 0's own load of the input.
    const std::string& input = mine.options.inputs.front();
    sim::LoadResult loaded = sim::is_trace_path(input) ? sim::load_trace_file(input, mine.options.overrides, mine.options.load_limits)
                                                       : sim::load_scenario_file(input, mine.options.overrides, mine.options.load_limits);
    std::optional<sim::Scenario> scenario;
    if (loaded.scenario) scenario = std::move(*loaded.scenario);
    PartServer server(ranks, scenario ? &*scenario : nullptr, mine.options);
    if (scenario) {
      mine.options.check.run_parts = [&server](const std::vector<std::vector<uint32_t>>& prefixes, uint64_t budget) {
        return server.run(prefixes, budget);
      };
      if (mine.options.check.strategy != "dfs") {
        err << "lockstep: note: check --mpi spreads a dfs search (--strategy dfs); " << mine.options.check.strategy
            << " runs on rank 0 alone\n";
      }
      code = run_command(mine, out, err);
    } else {
      mine.options.check.run_parts = [](const std::vector<std::vector<uint32_t>>&, uint64_t) {
        return std::vector<checker::PartResult>();
      };
      code = run_command(mine, out, err);  // says why it does not load
    }
    server.release_all();
    if (!server.problem.empty()) {
      err << "lockstep: error: " << server.problem << "\n";
      code = EXIT_BAD_INPUT;
    }
  } else {
    part_worker(line.options);
  }
  code = share_code(code);
  MPI_Finalize();
  return code;
}

}  // namespace
}  // namespace lockstep::cli

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  const lockstep::cli::CommandLine line = lockstep::cli::parse_command_line(args);
  if (line.verb == "sweep" && line.options.mpi) return lockstep::cli::sweep_over_mpi(line.options, std::cout, std::cerr);
  if (line.verb == "check" && line.options.mpi) return lockstep::cli::check_over_mpi(line, std::cout, std::cerr);
  return lockstep::cli::run_command(line, std::cout, std::cerr);
}

// One execution of a scenario: every host thread of every rank runs as a Boost.Context fiber
// that interprets its program; the engine applies the NCCL/PyTorch semantics of docs/semantics.md
// (streams, kernels, per-communicator matching, rendezvous p2p) and asks a Strategy at every
// choice point.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "sim/diagnostic.h"
#include "sim/engine_limits.h"
#include "sim/scenario.h"
#include "sim/strategy.h"

namespace lockstep::sim {

// An operation as a rank issued it: expressions evaluated.
struct OpInstance {  // 40 bytes: the engine keeps one in every kernel
  int64_t size_bytes = 0;
  int64_t duration_ns = 0;     // compute, sleep; all_to_all_single: where its split sizes are
                               // (in its program's queue, then in the engine's split_values)
  const Stmt* stmt = nullptr;  // source location and tag
  uint32_t group = 0;         // GroupDef index
  int32_t peer = -1;          // send: destination; recv: source, -1 = any
  int32_t root = -1;
  OpKind kind = OpKind::COMPUTE;
  DType dtype = DType::BF16;
};

enum class KernelState : uint8_t { QUEUED, RUNNING, DONE, ABORTED /* its rank exited or crashed */ };
std::string_view kernel_state_name(KernelState state);

// An all_to_all_single's split sizes, in the order of its group's members.
struct SplitSizes {
  std::vector<int64_t> send;     // bytes to each member
  std::vector<int64_t> receive;  // bytes from each
};

// One issued operation of a rank, in the order the rank issued it.
struct OpRecord {
  uint32_t index = 0;       // position in the rank's issue order, 0-based
  uint32_t thread_index = 0;  // position among its thread's ops, 0-based
  OpInstance op;
  Box<SplitSizes> splits;   // all_to_all_single only: its split sizes
  std::string thread;       // host thread that issued it
  std::string stream;       // "main", "comm:world", ...
  uint32_t seq = 0;         // per-communicator sequence number (collectives), per (comm, src,
                            // dst) for p2p; 1-based; 0 for host/compute ops
  KernelState state = KernelState::DONE;
  int32_t matched_peer = -1;  // p2p: the rank it matched with, -1 if unmatched
  int64_t issue_ns = 0;
  int64_t start_ns = -1;
  int64_t end_ns = -1;
  // What set the times, for the critical path: the op (rank, index) whose end let this one
  // start (-1: it started when issued), and the op whose start let it end (-1: itself).
  int32_t start_cause_rank = -1;
  uint32_t start_cause_index = 0;
  int32_t end_cause_rank = -1;
  uint32_t end_cause_index = 0;
};

// NOT_STARTED: under `launch:`, no process joined as this rank (it never started, or the one
// meant for it raised at init); its program never runs.
enum class RankStatus : uint8_t { RUNNING, BLOCKED, FINISHED, EXITED, CRASHED, NOT_STARTED };
std::string_view rank_status_name(RankStatus status);

// A peer's op that never started because it waits for another thread's op on the stream the
// two threads share as their current stream (docs/semantics.md, "Streams, kernels, host threads").
struct QueuedBehind {
  int32_t rank = -1;
  OpRecord behind;                   // the other thread's op it waits for
  std::string stream;                // the shared current stream
  std::vector<std::string> threads;  // the rank's threads whose current stream it is
};

// An op that a rank is stuck in when the execution ends without finishing.
struct StuckOp {
  int32_t rank = -1;
  std::string thread;
  OpRecord op;
  std::vector<int32_t> waiting_for;   // ranks this op waits for, ascending
  std::vector<int32_t> never_issued;  // among waiting_for: ranks that never issued the matching op
  std::vector<QueuedBehind> queued_behind;  // among the others: those held back so
};

// Two ranks' k-th operations on a communicator differ.
struct MismatchInfo {
  uint32_t group = 0;
  uint32_t seq = 0;
  std::string field;   // "kind", "size", "split sizes", "dtype", "root", "tag"
  // "split sizes": rank split_from sends split_sent bytes to rank split_to, which expects
  // split_expected bytes from it
  int32_t split_from = -1;
  int32_t split_to = -1;
  int64_t split_sent = 0;
  int64_t split_expected = 0;
  int32_t rank_a = -1;
  OpRecord op_a;
  int32_t rank_b = -1;
  OpRecord op_b;
};

enum class ExecutionEnd : uint8_t {
  COMPLETED,  // every rank finished
  STUCK,      // no transition enabled, some rank unfinished
  MISMATCH,   // members of a collective (or a matched p2p pair) issued different ops
  TIMEOUT,    // every rank finished, but some communication op waited longer than the watchdog
  ERROR,      // a run-time error in the scenario (division by zero, rank outside a group, ...)
  LIMIT,      // a bound was hit (EngineLimits)
  PRUNED,     // the strategy ended it at a state whose future was already explored
};

struct ExecutionResult {
  ExecutionEnd end = ExecutionEnd::COMPLETED;
  std::vector<RankStatus> rank_status;
  std::vector<int64_t> rank_end_ns;     // virtual time each rank finished (or got stuck)
  std::vector<StuckOp> stuck;            // STUCK: ordered by rank, then issue index;
                                         // TIMEOUT: the ops that waited too long
  std::optional<MismatchInfo> mismatch;  // MISMATCH
  std::optional<Diagnostic> error;       // ERROR and LIMIT
  std::vector<std::vector<OpRecord>> ops;  // per rank, every op issued (when record_ops)
  uint64_t events = 0;                   // issued ops + kernel starts + completions
  uint64_t choice_points = 0;
};

// ---------------------------------------------------------------------------------------------
// Per-rank event logs (docs/logging.md): one line per event, stamped with virtual time,
//   [  12.500 ms] rank 3 main: reached barrier #2 on world (x.yaml:14:9)
// in the engine's (deterministic) order, written to `out` in 64 KiB chunks as the run goes.
// error: how the run ends (each stuck rank, where it is and whom it waits for; a mismatch; a
// run-time error); warn: also exits, crashes, ops past the watchdog, processes that raise at
// init; info: also every synchronisation point reached, init joined, ranks finished; debug:
// also every op's issue, start, match and completion, with its stream.

enum class LogLevel : uint8_t { ERROR, WARN, INFO, DEBUG };
std::string_view log_level_name(LogLevel level);
std::optional<LogLevel> parse_log_level(std::string_view name);

class EventLog {
 public:
  // `ranks`: the ranks to log (empty: all).
  EventLog(std::ostream& out, LogLevel level, const std::vector<int32_t>& ranks = {});
  ~EventLog();
  EventLog(const EventLog&) = delete;
  EventLog& operator=(const EventLog&) = delete;

  LogLevel level() const { return level_; }
  bool wants(int64_t rank) const {
    return all_ || (rank >= 0 && static_cast<size_t>(rank) < ranks_.size() && ranks_[static_cast<size_t>(rank)]);
  }
  // "[  12.500 ms] rank 3 main: " is written; append the text, then end_line().
  std::string& begin_line(int64_t time_ns, int64_t rank, std::string_view thread);
  void end_line();
  void flush();

 private:
  std::ostream& out_;
  LogLevel level_;
  bool all_ = true;
  std::vector<bool> ranks_;
  std::string buffer_;
};

// The ids of footprint objects and of actors (EngineOptions::footprints) that several engines of
// one scenario share, so that what one engine's steps touched can be compared with another's
// (check --jobs: a sleep set or a state cache filled on one thread, read on another). An engine
// without one numbers them itself, in the order it meets them. Thread-safe; each engine keeps a
// copy of the ids it looked up, so this is asked once per id and engine.
class FootprintIds {
 public:
  uint32_t object(uint32_t kind, uint64_t key);
  // A stream's or handle's name, as the objects' keys hold it: each engine interns names in the
  // order it meets them, so keys carry this id instead.
  uint32_t name(std::string_view name);
  // An actor that is not a thread (those are numbered by the scenario): a receive queue, a
  // kernel; `first`: the number of threads.
  uint32_t actor(uint32_t kind, uint64_t key, uint32_t first);
  // The key an object's index (its id without the kind bits) or an actor was made from.
  uint64_t object_key(uint32_t kind, uint32_t index);
  std::pair<uint32_t, uint64_t> actor_key(uint32_t actor, uint32_t first);  // (kind, key)

  // check --mpi: an object or actor in terms another process's FootprintIds reads back as its own
  // id of the same thing (a stream's or handle's name as text, not as its number here).
  struct Portable {
    uint32_t kind = 0;  // an object's kind; for an actor 0 or 1 as actor(), THREAD for a thread
    uint64_t key = 0;   // without the name's number, for a stream or handle
    std::string name;   // a stream's or handle's name
    static constexpr uint32_t THREAD = UINT32_MAX;
  };
  Portable portable_object(uint32_t object);
  uint32_t local_object(const Portable& p);
  Portable portable_actor(uint32_t actor);
  uint32_t local_actor(const Portable& p);
  // The number of threads (the first actor that is not one); the engines set it.
  void set_threads(uint32_t threads);

 private:
  std::mutex mutex_;
  std::unordered_map<uint64_t, uint32_t> objects_[32];
  std::vector<uint64_t> object_keys_[32];  // by index
  std::unordered_map<uint64_t, uint32_t> actors_[2];
  std::vector<std::pair<uint32_t, uint64_t>> actor_keys_;  // by actor - first
  std::unordered_map<std::string, uint32_t> names_;
  std::vector<std::string> name_texts_;  // by id
  uint32_t next_actor_ = 0;
  uint32_t threads_ = UINT32_MAX;  // set_threads (until then: no actor is known to be a thread)
};

struct EngineOptions {
  EngineLimits limits;
  bool record_ops = true;  // keep every rank's issued ops in the result (reports, timelines)
  // Give each choice point a fingerprint of the global state (ChoicePoint::state), for the
  // checker's state cache.
  bool track_state = false;
  // Report each step taken with its footprint and what it happened after (Strategy::taken,
  // sim::Step): what the checker's dpor computes races from.
  bool footprints = false;
  FootprintIds* ids = nullptr;  // shared with other engines (null: its own)
  // With track_state: find the ranks whose programs are equal up to their rank numbers
  // (sim/engine_symmetry.cc) and fingerprint each state as the lowest-named of the states that
  // rename those ranks among themselves (ChoicePoint::symmetry).
  bool symmetry = false;
  // Save the state at choice points the strategy will come back to (Strategy::revisits) and start
  // later executions from the deepest one their schedule shares (Strategy::resume_depth) instead of
  // replaying the prefix from the initial state. The checker's dfs and dpor turn it on; results are
  // the same either way. Not with a log (a resumed execution logs only its new part). Checkpoints
  // are kept within `checkpoint_budget_bytes` (an estimate of their copies); past it, executions
  // replay from an earlier one.
  bool checkpoints = false;
  size_t checkpoint_budget_bytes = size_t{64} << 20;
  // Per-rank event log (null: none; the engine then pays one pointer test per event).
  EventLog* log = nullptr;
  // Bounds checked inside an execution, every BOUND_CHECK_OPS issued operations (memory every
  // 16th time): past the deadline, or with more resident memory than max_resident_bytes (the
  // whole process's, resident_bytes()), the execution ends LIMIT with an error naming the bound.
  static constexpr uint64_t BOUND_CHECK_OPS = 4096;
  std::optional<std::chrono::steady_clock::time_point> deadline;  // none: no time bound
  uint64_t max_resident_bytes = 0;                                // 0: none
};

// The process's resident memory (/proc/self/statm), 0 where it cannot be read.
uint64_t resident_bytes();

class Engine {
 public:
  Engine(const Scenario& scenario, EngineOptions options = {});
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Runs one execution from the initial state. Can be called repeatedly (the checker does).
  ExecutionResult run(Strategy& strategy);
  // EngineOptions::symmetry: the classes of symmetric ranks (two ranks or more each), or why
  // there are none.
  const std::vector<std::vector<uint32_t>>& rank_classes() const;
  const std::string& symmetry_note() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace lockstep::sim

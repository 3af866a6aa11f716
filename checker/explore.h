// `lockstep check` for one scenario: run executions under a strategy until the space is
// covered or a bound is hit, collecting every distinct bug.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "checker/analysis.h"
#include "checker/split.h"
#include "sim/diagnostic.h"
#include "sim/engine.h"
#include "sim/scenario.h"

namespace lockstep::checker {

constexpr uint64_t DEFAULT_MAX_EXECUTIONS = 1'000'000;  // exhaustive strategies
constexpr uint64_t DEFAULT_SAMPLES = 1'000;             // random and pct
constexpr uint64_t DEFAULT_PATIENCE = 1'000;            // --patience
constexpr uint64_t DEFAULT_MAX_MEMORY_BYTES = uint64_t{8} << 30;  // --max-memory 8192 (MiB)

// What a long search has done so far (for a progress line on a terminal).
struct Progress {
  uint64_t executions = 0;
  double rate_per_s = 0;
  uint64_t depth = 0;   // choice points in the latest execution
  uint64_t states = 0;  // dpor: states in the cache
  uint64_t bugs = 0;    // distinct bugs so far (with --jobs, each part's counted apart)
  double elapsed_s = 0;
};

// What one part of a search found: the whole space, or the subtree under one schedule prefix
// (check --jobs with dfs; check --mpi). The checker merges parts in depth-first order.
struct PartResult {
  uint64_t executions = 0;
  uint64_t pruned = 0;           // executions ended at a state already explored (or all asleep)
  uint64_t sleep_blocked = 0;    // of them, ended because every option was asleep
  uint64_t states = 0;           // states in the cache at the end
  bool cache_full = false;
  uint64_t events = 0;
  std::vector<uint64_t> hashes;  // one per execution, in order
  // The hashes folded in order (F = F * FOLD_BASE + hash, from 0): the report's fingerprint takes
  // a whole part by it. A part run elsewhere (PartRunner) may come back with this and its totals
  // but without the four per-execution series: the merge needs them only where the execution
  // budget cuts into the part, and explores it again here up to the cut.
  uint64_t fold = 0;
  std::vector<uint64_t> events_after;   // events of the part's executions so far, per execution
  std::vector<uint64_t> pruned_after;   // pruned executions so far, per execution
  std::vector<uint64_t> blocked_after;  // sleep-blocked executions so far, per execution
  std::vector<Bug> bugs;         // first execution of each signature, `execution` local
  std::set<std::string> terminal_states;
  std::optional<sim::Diagnostic> error;
  std::string bound_hit;
  bool interrupted = false;      // CheckOptions::stop
  bool complete = false;         // the part was explored to its end
};

inline constexpr uint64_t FOLD_BASE = 0x100000001b3;

// The parts of a split search (a strategy that splits: dfs), in depth-first order, each at most
// `budget` executions: one result per part. A runner may have a running part give the
// executions it has yet to run to new parts (StealBox): it then leaves `parts` as they ended,
// with their bounds and the new parts after the others, its results in that order (the merge
// puts them in depth-first order).
using PartRunner = std::function<std::vector<PartResult>(std::vector<Part>& parts, uint64_t budget)>;

// check --jobs and --mpi with dfs: a request to a running part's search to give away the
// executions it has yet to run (Search::give_away), and its answer, between the thread that
// asks and the search, which looks between executions (from the end of its first). A search
// that ends first leaves it unanswered.
class StealBox {
 public:
  struct Answer {
    std::vector<std::vector<uint32_t>> prefixes;  // the parts given, in depth-first order (none: nothing)
    std::vector<uint32_t> bound;                  // the part's new bound (Part::bound)
  };
  void ask() {
    const std::lock_guard<std::mutex> lock(mutex_);
    answer_.reset();
    asked_.store(true, std::memory_order_release);
  }
  bool asked() const { return asked_.load(std::memory_order_acquire); }
  void answer(Answer a) {
    const std::lock_guard<std::mutex> lock(mutex_);
    answer_ = std::move(a);
    asked_.store(false, std::memory_order_release);
  }
  std::optional<Answer> take() {
    const std::lock_guard<std::mutex> lock(mutex_);
    std::optional<Answer> out = std::move(answer_);
    answer_.reset();
    return out;
  }

 private:
  std::atomic<bool> asked_{false};
  std::mutex mutex_;
  std::optional<Answer> answer_;
};

// What part i's search gave away (a StealBox answer), taken into `parts`: its new bound, and the
// parts given appended after the others. Returns how many were added, or nullopt where the
// answer does not fit the part (a bound that does not narrow it, a part not after the bound
// or outside the part; from a process whose message rank 0 cannot trust): `parts` unchanged.
std::optional<size_t> take_given(std::vector<Part>& parts, size_t i, StealBox::Answer given);

// check --mpi with dpor (cli/mpi.cc): the port through which the branches a search gives
// (checker/work_pool.h) go to other processes, and their results come back. Thread-safe.
class BranchPort {
 public:
  // How many other processes wait for a branch (the search gives one when it can).
  virtual void set_waiting(size_t n) = 0;
  // A branch to send, as text (checker/wire.h), and its id; nullopt when none is at hand.
  virtual std::optional<std::pair<uint64_t, std::string>> take() = 0;
  // Branch `id`'s result as its process sent it (BranchHost::explore). False where the text is
  // no result of that branch: the branch is then explored again (here or elsewhere). A late
  // result of a branch taken as lost is dropped.
  virtual bool answer(uint64_t id, std::string_view text) = 0;
  // Branch `id`'s process was lost: the branch is explored again.
  virtual void lost(uint64_t id) = 0;
  // The search has stopped early (--max-bugs, an error in an execution, interrupted): the
  // branches out are to stop too (BranchHost::halt); no more are handed out.
  virtual bool halted() = 0;

 protected:
  ~BranchPort() = default;
};
// Runs `root` (the search, which returns once every branch it gave is done) on a thread of its
// own and serves `port` on the calling thread meanwhile; returns once `root` has returned.
using BranchRunner = std::function<void(const std::function<void()>& root, BranchPort& port)>;

struct CheckOptions {
  std::string strategy = "dpor";
  uint64_t max_executions = 0;  // 0: the strategy's default
  uint32_t pct_depth = 3;       // PCT's d: d-1 priority change points
  unsigned jobs = 1;            // threads for dfs/dpor (sampling strategies run on one)
  // --jobs > 1: a search is first run on one thread for up to this many executions; only one
  // that needs more is cut into parts or gives work to other threads (so a small search
  // reports exactly what --jobs 1 does). 0: from the start (tests).
  uint64_t jobs_after = 1'000;
  bool collect_terminal_states = false;  // fill CheckResult::terminal_states (property tests)
  bool checkpoints = true;               // dfs, dpor: sim::EngineOptions::checkpoints (off to compare)
  bool sleep_sets = true;                // dpor: sleep sets (off only to measure what they save)
  bool state_cache = true;               // dpor: the state cache (off only to measure what it saves)
  bool dfs_state_cache = false;          // dfs: a stateful oracle (tests); sets engine.track_state
  // Called about twice a second once a search has run for a second (with --jobs, from the
  // calling thread only); never reaches a report.
  std::function<void(const Progress&)> progress;
  double time_budget_s = 0;  // 0 = none
  // Set (by a signal handler) to stop the search after the execution under way: the result is
  // then `interrupted`, not exhaustive, with what was found so far.
  const std::atomic<bool>* stop = nullptr;
  // The search stops once it has found this many distinct bugs (0 = list every bug). The verdict
  // is then the first bug's kind, not exhaustive, with bound_hit "--max-bugs N".
  uint64_t max_bugs = 0;
  // Once a bug is found, an exhaustive search stops after this many executions in a row that
  // found no new bug class (only variants of classes it has, or no bug): not exhaustive, with
  // bound_hit "--patience N". 0 = explore the whole space (docs/cli.md); `check` sets
  // DEFAULT_PATIENCE unless told otherwise.
  uint64_t patience = 0;
  // The search stops (inconclusive) once the process's resident memory passes this, checked
  // every 64 executions; 0 = none. The state cache has its own bound (StateCache).
  uint64_t max_memory_bytes = DEFAULT_MAX_MEMORY_BYTES;
  uint64_t seed = 0;
  sim::EngineOptions engine;
  // check --mpi: runs the parts of a split search (dfs, once it outgrows jobs_after) elsewhere,
  // returning their results in the prefixes' order; unset: threads of this process (--jobs).
  PartRunner run_parts;
  // check --mpi: a part run by explore_part looks here between executions for a request to
  // give work away.
  StealBox* steal = nullptr;
  // check --mpi with a strategy that gives branches (dpor): branches also go to other
  // processes through the port (BranchPort); unset: to threads of this process only (--jobs).
  BranchRunner run_branches;
  // check --mpi over several inputs: an input's whole search, run elsewhere as one part with no
  // prefix (explore_part), or nullopt to run it here.
  std::function<std::optional<PartResult>(const sim::Scenario&)> run_whole;
};

struct CheckResult {
  sim::Verdict verdict = sim::Verdict::OK;
  bool exhaustive = false;  // the whole space was explored
  std::string strategy;
  bool reduces = false;     // StrategyInfo::reduces: pruned, sleep_blocked, states mean something
  uint64_t executions = 0;  // including pruned ones
  uint64_t pruned = 0;      // dpor: executions ended at a state whose future was explored, or
                            // where every option was asleep (sleep_blocked of them)
  uint64_t sleep_blocked = 0;
  uint64_t states = 0;      // dpor: distinct states remembered (per --jobs part, summed)
  bool state_cache_full = false;  // the cache hit its bound (it then prunes less; still sound)
  uint64_t events = 0;
  double seconds = 0;       // wall time (the only non-deterministic number in a report)
  std::vector<Bug> bugs;    // distinct bugs in the order found
  std::optional<sim::Diagnostic> error;  // a run-time error in the scenario: exit 2
  std::string bound_hit;    // which bound made the result inconclusive, "" if none
  bool interrupted = false; // CheckOptions::stop stopped it
  uint64_t fingerprint = 0; // of every execution's schedule and end state
  uint64_t parts = 0;       // --jobs: the parts the search was cut into (0: not cut)
  // --jobs with dpor: the parts shared a state cache, so the counts, the fingerprint and which
  // execution shows each bug depend on the threads' timing (the verdict and the bugs do not)
  bool timing_dependent = false;
  std::set<std::string> terminal_states;  // how executions ended (collect_terminal_states)
  // --symmetry (sim::EngineOptions::symmetry): the classes of symmetric ranks, or why none.
  bool symmetry = false;
  std::vector<std::vector<int32_t>> rank_classes;
  std::string symmetry_note;
};

// The engine options a strategy explores with (replays must use the same).
sim::EngineOptions engine_options_for(const CheckOptions& options);

// One part of `scenario`'s search under `options`: the executions whose schedule starts with
// the part's prefix (up to its bound), at most `budget` of them. What a PartRunner runs on
// another process.
PartResult explore_part(const sim::Scenario& scenario, const CheckOptions& options, Part part, uint64_t budget);

// Whether a strategy samples (random, pct) rather than covers the space.
bool is_sampling(const std::string& strategy);

// The strategies `check` accepts (checker/strategies.cc).
std::vector<std::string> strategy_names();

CheckResult check_scenario(const sim::Scenario& scenario, const CheckOptions& options);

// A process exploring the branches another process's search gives it (check --mpi with dpor):
// one numbering of footprint objects and one state cache for every branch it explores.
class BranchHost {
 public:
  BranchHost(const sim::Scenario& scenario, const CheckOptions& options);
  ~BranchHost();
  BranchHost(const BranchHost&) = delete;
  BranchHost& operator=(const BranchHost&) = delete;
  // A branch's text (BranchPort::take) explored: its result, as text for BranchPort::answer;
  // "" where the text is no branch.
  std::string explore(std::string_view branch);
  // From another thread: the branch under way stops after its execution (the search that gave
  // it stopped early, BranchPort::halted); its result says what it ran.
  void halt();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace lockstep::checker

// Counterexample files (docs/counterexamples.md): the scenario inlined with its parameters, the semantics, the
// schedule, the ops each rank is stuck in and, per rank, the flat op sequence up to the hang
// trimmed to the causal past of the bug (docs/counterexamples.md).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "checker/analysis.h"
#include "sim/engine.h"
#include "sim/loader.h"
#include "sim/scenario.h"

namespace lockstep::checker {

// Runs the bug's schedule again with every op recorded (what the file lists per rank), under
// the engine options of the search that found it (engine_options_for). `diverged` is set when
// the schedule no longer fits the scenario.
sim::ExecutionResult replay_execution(const sim::Scenario& scenario, const std::vector<sim::Option>& schedule,
                                      sim::EngineOptions options, bool& diverged);

// One issued op of an execution: the rank and its index in the rank's issue order.
struct OpId {
  int32_t rank = -1;
  uint32_t index = 0;
  friend bool operator==(const OpId&, const OpId&) = default;
  friend auto operator<=>(const OpId&, const OpId&) = default;
};

// The ops of an execution (recorded with record_ops) that match each other, each set sorted
// and listed by its first op: the members' k-th op of a collective on one communicator, a send
// and the receive it matched, the k-th new_group call of every rank.
std::vector<std::vector<OpId>> matched_sets(const sim::Scenario& scenario, const sim::ExecutionResult& result);

// The ops a bug's causal past starts from: its stuck ops (timeout: the late ops; mismatch: the
// two mismatched ops) and, for a hang or deadlock, the last op of every thread of each rank a
// stuck op waits for that is not stuck itself (how that rank ended instead).
std::vector<OpId> causal_seeds(const Bug& bug, const sim::ExecutionResult& result);

// Per rank, per op of `result.ops[rank]` (by position): whether it happens before (or is) one
// of `seeds`. Happens-before: issue order on a host thread, order on a stream, the waits of
// `wait` (its async op) and `sync` (the streams' latest ops), the start and end causes the
// engine recorded, and matching (every member of a matched set, see matched_sets).
std::vector<std::vector<bool>> causal_past(const sim::Scenario& scenario, const sim::ExecutionResult& result,
                                           const std::vector<OpId>& seeds);

// What `check --minimize` did for one bug, for the counterexample file (see checker/minimize.h).
struct MinimizedInfo {
  std::string refused;               // why it was not minimized; the rest is unset then
  std::string trace;                 // the minimized trace's path
  uint64_t ranks = 0, ops = 0;       // ranks with ops, and ops, in the minimized trace
  uint64_t of_ranks = 0, of_ops = 0; // the same in the scenario checked
  uint64_t rechecks = 0;
  uint64_t budget = 0;
  bool budget_hit = false;
  std::vector<std::string> sources;  // per op line of the trace (from line 2): its source in the scenario checked
};

// The bound on the ops a counterexample lists: past it, only the ranks a bug involves (stuck,
// waited for, mismatched) are listed, each with the last ops of its causal past, and the file
// says so (`listed.bound_hit`).
constexpr uint64_t MAX_LISTED_OPS = 1'500;

// The counterexample JSON of one bug. Deterministic: the same inputs give the same bytes.
// The scenario and schedule are complete (replay needs them); the op lists per rank keep the
// causal past of the bug only and count what they leave out.
std::string counterexample_json(const sim::Scenario& scenario, const Bug& bug, const sim::ExecutionResult& replayed,
                                const std::string& strategy, uint64_t seed,
                                const MinimizedInfo* minimized = nullptr);

struct Counterexample {
  std::string input;                         // the scenario's path when it was checked
  std::string text;                          // the scenario file's text
  std::vector<sim::ParamOverride> params;    // every parameter's value
  std::vector<sim::Option> schedule;
  std::string strategy;                      // the strategy that found it
  std::string kind;                          // the bug's verdict
  std::string signature;
  std::vector<std::string> explanation;
};

// Reads a counterexample file; nullopt with `error` set ("file: error: ...") when it is not one.
std::optional<Counterexample> read_counterexample(const std::string& path, std::string& error);

}  // namespace lockstep::checker

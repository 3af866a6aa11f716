// Counterexample files (SPEC §5): the scenario inlined with its parameters, the semantics, the
// schedule, every rank's flat op sequence up to the hang and the ops each is stuck in.
#pragma once

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

// The counterexample JSON of one bug. Deterministic: the same inputs give the same bytes.
std::string counterexample_json(const sim::Scenario& scenario, const Bug& bug, const sim::ExecutionResult& replayed,
                                const std::string& strategy, uint64_t seed);

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

// `lockstep export promela`: a scenario as a Promela model for SPIN, an independent oracle for
// lockstep's verdicts (docs/spin.md). The model follows lockstep's semantics (docs/semantics.md) for the
// subset SPIN expresses well; anything outside it is refused with a diagnostic naming it.
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "sim/diagnostic.h"
#include "sim/loader.h"
#include "sim/scenario.h"

namespace lockstep::exporter {

struct PromelaOptions {
  // Prepended to every global name, proctype and inline of the model, so that several models
  // can share one file (promela_batch). Empty for a model on its own.
  std::string prefix;
  // A stuck state is an assertion `PREFIXfin == N` of a watchdog process at SPIN's `timeout`,
  // rather than an invalid end state: then every error of a batch names its model.
  bool stuck_as_assertion = false;
  // Bounds: operations expanded into the model (loops are unrolled, choices kept) and SPIN's
  // own limits (255 processes; array indices in a short).
  int64_t max_ops = 200'000;
};

struct PromelaModel {
  std::string text;        // a whole model (with `init`), or for a batch part its declarations
  std::string start;       // the `run` statements that start its processes
  int processes = 0;       // processes it starts (not counting init)
  int64_t vector_bytes = 0;  // an upper estimate of SPIN's state vector: compile pan.c with
                             // -DVECTORSZ of at least this
  int64_t ops = 0;         // operations expanded
};

struct PromelaExport {
  std::optional<PromelaModel> model;        // set iff there is no error
  std::vector<sim::Diagnostic> diagnostics;  // why not: constructs outside the subset, bounds
};

// The model of one scenario.
PromelaExport export_promela(const sim::Scenario& scenario, const PromelaOptions& options = {});

// One file for several models exported with distinct prefixes (and stuck_as_assertion): `init`
// starts exactly one of them, chosen nondeterministically, so one SPIN run (pan -c0) reports
// the errors of each, every one naming its model by prefix.
std::string promela_batch(const std::vector<PromelaModel>& models);

// `lockstep export promela SCENARIO -o FILE [-D name=value]...`, as cli/command_line.cc reads it.
struct ExportOptions {
  std::string format;  // "promela", the one format
  std::string input;   // a scenario or a trace
  std::string output;  // -o FILE
  std::vector<sim::ParamOverride> overrides;  // -D name=value
};

// Writes the model. Returns the exit code: 0 written, 2 bad input or outside the subset.
int export_command(const ExportOptions& options, std::ostream& out, std::ostream& err);

}  // namespace lockstep::exporter

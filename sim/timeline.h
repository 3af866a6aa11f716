// The timeline of a timed execution as Chrome Trace Event JSON (Perfetto, chrome://tracing):
// one process per rank, one track per host thread and per stream.
#pragma once

#include <string>
#include <vector>

#include "sim/engine.h"
#include "sim/scenario.h"

namespace lockstep::sim {

// Requires an execution run with EngineOptions::record_ops. Ops still running at the end
// (stuck) are drawn open to the end of the trace, red, named "... (stuck)"; the trace of an
// execution that got stuck ends a tenth after its last event (at least 1 us later).
std::string chrome_trace(const Scenario& scenario, const ExecutionResult& result);

// One op on the critical path.
struct PathStep {
  int32_t rank = -1;
  uint32_t index = 0;  // the op's position in the rank's issue order
};

// The chain of ops that set the finish time of the last op to finish, in time order: each op
// started when the one before it ended, or (for communication) ended when the last
// participant started. Requires record_ops.
std::vector<PathStep> critical_path(const ExecutionResult& result);

}  // namespace lockstep::sim

// The timeline of a timed execution as Chrome Trace Event JSON (Perfetto, chrome://tracing):
// one process per rank, one track per host thread and per stream.
#pragma once

#include <string>

#include "sim/engine.h"
#include "sim/scenario.h"

namespace lockstep::sim {

// Requires an execution run with EngineOptions::record_ops. Ops still running at the end
// (stuck) are drawn open to the end of the execution.
std::string chrome_trace(const Scenario& scenario, const ExecutionResult& result);

}  // namespace lockstep::sim

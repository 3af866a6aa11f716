// The timeline of a timed execution as Chrome Trace Event JSON (Perfetto, chrome://tracing):
// one process per rank, one track per host thread and per stream.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "sim/engine.h"
#include "sim/scenario.h"

namespace lockstep::sim {

// One started op as a timeline draws it: its name ("allreduce #3 world", "send->2 #1 pp",
// "compute") and its span; an op still running at the end (stuck) runs to the horizon.
struct TimelineSpan {
  std::string name;
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  bool stuck = false;
  bool comm = false;  // a collective or point-to-point op
};

// The time of an execution's last event (an op issued, started or ended, a rank ended): for
// one that got stuck, when it stalled.
int64_t timeline_last_event_ns(const ExecutionResult& result);

// Where a timeline of `result` ends: its last event, and for an execution that got stuck a
// tenth later (at least 1 us), so that a stuck op started at the last event still shows.
int64_t timeline_horizon_ns(const ExecutionResult& result);

// The span of one recorded op up to `horizon_ns`; nullopt for an op that never started.
std::optional<TimelineSpan> timeline_span(const Scenario& scenario, const OpRecord& rec, int64_t horizon_ns);

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

// A lint both loaders (YAML and trace) run once a scenario is read: an `exit` or `crash` that
// follows GPU work its host thread has not waited for (docs/semantics.md, "The host runs
// ahead"). The rank ends without waiting for that work, and what has not run never runs.
#pragma once

#include <functional>
#include <string>
#include <string_view>

#include "sim/scenario.h"

namespace lockstep::sim {

// Calls `warning` once for each `exit` or `crash` that some path of its thread's program reaches
// with GPU work (a kernel, a collective, a send or receive) the host has not waited for. The
// host waits for work with `sync` (all streams), `sync: S` (the work on S, and what S's later
// kernels wait for) and `barrier` (the work its current stream waits for, and its own stream);
// `wait: H` makes the current stream wait for H, not the host. `choose`, `new_group` and
// `sleep` wait for no GPU work. A statement written `exit: {queued_work: abort}` (or crash) is
// meant so and gets no warning. Each thread is read alone: another thread's work is its own.
// `path`: the file, for the queued op's position in the message.
void warn_exits_before_queued_work(const Scenario& scenario, std::string_view path,
                                   const std::function<void(SourceLoc, std::string)>& warning);

}  // namespace lockstep::sim

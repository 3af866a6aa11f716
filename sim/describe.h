// How reports, explanations and replay verdicts name an op of the model.
#pragma once

#include <string>

#include "sim/engine.h"
#include "sim/scenario.h"

namespace lockstep::sim {

// "allreduce #3 on world", "send to rank 1 #2 on pp", "recv from any on world".
std::string describe_op(const Scenario& scenario, const OpRecord& op);

// The `launch:` process an init_process_group record stands for (its statement), or null.
const LaunchProcess* launch_process(const Scenario& scenario, const Stmt* stmt);

}  // namespace lockstep::sim

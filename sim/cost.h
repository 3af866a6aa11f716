// The time model of `lockstep run`: alpha-beta costs of communication (ring algorithms).
#pragma once

#include <cstdint>

#include "sim/scenario.h"

namespace lockstep::sim {

using LinkModel = Link;

// Time a communication op takes once every participant's kernel runs. `group_size` counts
// the ranks of the communicator (2 for point to point).
int64_t comm_cost_ns(OpKind kind, int64_t size_bytes, int32_t group_size, const LinkModel& link);

}  // namespace lockstep::sim

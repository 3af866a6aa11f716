// The time model of `lockstep run`: alpha-beta costs of communication (ring algorithms).
#pragma once

#include <cstdint>

#include "sim/scenario.h"

namespace lockstep::sim {


// Time a communication op takes once every participant's kernel runs. `group_size` counts
// the ranks of the communicator (2 for point to point).
// `algorithm` applies to all-reduce (and barrier): ring or tree.
int64_t comm_cost_ns(OpKind kind, int64_t size_bytes, int32_t group_size, const Link& link,
                     Algorithm algorithm = Algorithm::RING);

}  // namespace lockstep::sim

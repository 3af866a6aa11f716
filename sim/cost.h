// The time model of `lockstep run`: alpha-beta costs of communication (ring algorithms).
#pragma once

#include <cstdint>

#include "sim/scenario.h"

namespace lockstep::sim {

struct LinkModel {
  int64_t latency_ns = 5'000;              // alpha, per ring step
  double bandwidth_bytes_per_s = 100e9;    // beta^-1, per link
};

// Time a communication op takes once every participant's kernel runs. `group_size` counts
// the ranks of the communicator (2 for point to point).
int64_t comm_cost_ns(OpKind kind, int64_t size_bytes, int32_t group_size, const LinkModel& link);

}  // namespace lockstep::sim

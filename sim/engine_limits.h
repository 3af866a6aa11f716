// The bounds of one execution that a scenario cannot raise itself (EngineOptions::limits): past
// one, the execution ends LIMIT with an error naming the bound and the option that raises it.
#pragma once

#include <cstddef>
#include <cstdint>

namespace lockstep::sim {

struct EngineLimits {
  uint64_t max_ops = 50'000'000;       // operations issued in one execution, all ranks
  int64_t max_repeat = 100'000'000;    // iterations of one repeat
  int32_t max_call_depth = 128;        // nested calls of defines
  size_t fiber_stack_bytes = 1 << 20;  // per host thread; guard-paged, touched pages only
};

}  // namespace lockstep::sim

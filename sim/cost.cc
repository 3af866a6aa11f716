#include "sim/cost.h"

#include <cmath>

namespace lockstep::sim {

int64_t comm_cost_ns(OpKind kind, int64_t size_bytes, int32_t group_size, const Link& link, Algorithm algorithm) {
  const double n = group_size;
  const double bytes = static_cast<double>(size_bytes);
  const double per_byte_ns = 1e9 / link.bandwidth_bytes_per_s;
  const double alpha = static_cast<double>(link.latency_ns);
  double steps = 0;      // latency terms
  double transfer = 0;   // bytes each rank moves over its link
  switch (op_info(kind).cost) {
    case CostShape::ALLREDUCE:
      if (algorithm == Algorithm::TREE) {
        // (double binary) tree: reduce up and broadcast down, pipelined: 2 log2(n) steps, the
        // buffer crosses a link twice
        steps = 2 * std::ceil(std::log2(n));
        transfer = 2 * bytes;
      } else {
        // ring: reduce-scatter then all-gather, 2(n-1) steps of S/n bytes
        steps = 2 * (n - 1);
        transfer = 2 * (n - 1) / n * bytes;
      }
      break;
    case CostShape::SHARDED:
      steps = n - 1;
      transfer = (n - 1) / n * bytes;
      break;
    case CostShape::WHOLE:
      // pipelined ring: the whole buffer crosses each link once
      steps = n - 1;
      transfer = bytes;
      break;
    case CostShape::POINT:
      steps = 1;
      transfer = bytes;
      break;
    case CostShape::NONE:
      return 0;
  }
  if (group_size <= 1 && !is_p2p(kind)) return 0;
  const double ns = steps * alpha + transfer * per_byte_ns;
  // Past what int64 holds (2^63 ns, 292 years): the largest time, which the engine reports as
  // an overflow of virtual time.
  if (!(ns < 9.2e18)) return INT64_MAX;
  return static_cast<int64_t>(std::llround(ns));
}

}  // namespace lockstep::sim

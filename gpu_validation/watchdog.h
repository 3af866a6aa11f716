// The replay workers' watchdog rule (docs/replay.md), shared by the MPI and NCCL workers and
// tested without either: a rank with ops outstanding and no progress (nothing posted, nothing
// completed) for the stall time is stuck; it reports its frontier, and reports again when it
// moves after all. Plain arithmetic on a clock the caller reads, so tests drive it with
// made-up times.
#pragma once

#include <cstdint>

namespace lockstep::gpu {

class StallWatchdog {
 public:
  enum class Action : uint8_t {
    NONE,
    REPORT_STUCK,    // write the frontier: stuck in the outstanding ops
    REPORT_RUNNING,  // it was reported stuck and progressed after all: take that back
  };

  explicit StallWatchdog(double stall_s) : stall_s_(stall_s) {}

  // One poll at `now_s` (seconds, monotonic): `progressed` when an op was posted or completed
  // since the last poll, `outstanding` when ops are posted and not completed.
  Action observe(double now_s, bool progressed, bool outstanding);

  bool stuck() const { return stuck_; }
  double stall_s() const { return stall_s_; }

 private:
  double stall_s_;
  double last_progress_s_ = -1;
  bool stuck_ = false;
};

// How long a worker's poll loop sleeps between polls: nothing right after progress, then
// doubling from `min_us` to `max_us` while nothing moves, so that a stuck rank costs almost no
// CPU and a busy one is polled often.
class PollBackoff {
 public:
  PollBackoff(uint32_t min_us, uint32_t max_us) : min_us_(min_us), max_us_(max_us) {}
  // The sleep before the next poll, given whether this one progressed.
  uint32_t next_us(bool progressed);

 private:
  uint32_t min_us_, max_us_;
  uint32_t current_us_ = 0;
};

}  // namespace lockstep::gpu

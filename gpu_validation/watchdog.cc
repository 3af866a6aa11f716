#include "gpu_validation/watchdog.h"

#include <algorithm>

namespace lockstep::gpu {

StallWatchdog::Action StallWatchdog::observe(double now_s, bool progressed, bool outstanding) {
  if (last_progress_s_ < 0 || progressed || !outstanding) {
    last_progress_s_ = now_s;
    if (stuck_ && (progressed || !outstanding)) {
      stuck_ = false;
      return Action::REPORT_RUNNING;
    }
    return Action::NONE;
  }
  if (!stuck_ && now_s - last_progress_s_ > stall_s_) {
    stuck_ = true;
    return Action::REPORT_STUCK;
  }
  return Action::NONE;
}

uint32_t PollBackoff::next_us(bool progressed) {
  if (progressed) {
    current_us_ = 0;
  } else {
    current_us_ = current_us_ == 0 ? min_us_ : std::min(max_us_, current_us_ * 2);
  }
  return current_us_;
}

}  // namespace lockstep::gpu

#include "gpu_validation/watchdog.h"

#include <doctest/doctest.h>

namespace lockstep::gpu {

TEST_CASE("watchdog: stuck only after the stall time with ops outstanding, and running again on progress") {
  StallWatchdog w(2.0);
  using A = StallWatchdog::Action;
  CHECK(w.observe(0.0, false, true) == A::NONE);  // the first poll starts the clock
  CHECK(w.observe(1.9, false, true) == A::NONE);
  CHECK(w.observe(2.1, false, true) == A::REPORT_STUCK);
  CHECK(w.stuck());
  CHECK(w.observe(5.0, false, true) == A::NONE);  // reported once
  CHECK(w.observe(5.1, true, true) == A::REPORT_RUNNING);  // it moved after all
  CHECK_FALSE(w.stuck());
  CHECK(w.observe(7.0, false, true) == A::NONE);
  CHECK(w.observe(7.2, false, true) == A::REPORT_STUCK);  // 2.1 s after the last progress
}

TEST_CASE("watchdog: nothing outstanding is never stuck, however long") {
  StallWatchdog w(1.0);
  using A = StallWatchdog::Action;
  CHECK(w.observe(0.0, false, false) == A::NONE);
  CHECK(w.observe(100.0, false, false) == A::NONE);
  CHECK(w.observe(100.5, false, true) == A::NONE);  // the clock restarted at 100
  CHECK(w.observe(101.1, false, true) == A::REPORT_STUCK);
}

TEST_CASE("poll backoff: no pause after progress, then doubling up to the maximum") {
  PollBackoff b(50, 400);
  CHECK(b.next_us(true) == 0);
  CHECK(b.next_us(false) == 50);
  CHECK(b.next_us(false) == 100);
  CHECK(b.next_us(false) == 200);
  CHECK(b.next_us(false) == 400);
  CHECK(b.next_us(false) == 400);
  CHECK(b.next_us(true) == 0);
  CHECK(b.next_us(false) == 50);
}

}  // namespace lockstep::gpu

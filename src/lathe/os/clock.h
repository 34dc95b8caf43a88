// Time, injectable: components take a Clock& so tests can advance time
// without sleeping (a fake lives in os/test_util/fake_clock.h).
#pragma once

#include <cstdint>

namespace lathe::os {

class Clock {
 public:
  virtual ~Clock() = default;
  virtual int64_t NowMs() = 0;        // wall clock, ms since the Unix epoch
  virtual int64_t MonotonicMs() = 0;  // never goes back; for timeouts
  // The same clock in microseconds (request latencies, batching delays).
  virtual int64_t MonotonicUs() { return MonotonicMs() * 1000; }
  virtual void SleepMs(int64_t ms) = 0;
};

// The real clocks. The returned object lives forever.
Clock& RealClock();

// RealClock().MonotonicUs(), as a plain function for options that take one.
int64_t RealMonotonicUs();

// The monotonic clock (the one std::chrono::steady_clock reads) at the
// kernel's tick resolution (a few ms, never ahead of steady_clock), in ns:
// for deadlines and ages of a second or more that a hot path stamps several
// times per request. A read costs ~3 ns against ~25 for steady_clock, which
// reads the clock source (CLOCK_MONOTONIC_COARSE).
int64_t CoarseMonotonicNs();

}  // namespace lathe::os

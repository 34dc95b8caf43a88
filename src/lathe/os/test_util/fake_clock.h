// A Clock that moves only when a test says so.
#pragma once

#include <atomic>

#include "lathe/os/clock.h"

namespace lathe::os {

class FakeClock final : public Clock {
 public:
  explicit FakeClock(int64_t start_ms = 1'700'000'000'000) : now_(start_ms) {}
  int64_t NowMs() override { return now_; }
  int64_t MonotonicMs() override { return now_; }
  void SleepMs(int64_t ms) override { now_ += ms; }
  void Advance(int64_t ms) { now_ += ms; }

 private:
  std::atomic<int64_t> now_;
};

}  // namespace lathe::os

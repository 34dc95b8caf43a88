// How long runs wait to be placed: from the moment an attempt is queued (its
// submission, or its requeue after a preemption or a retry) to the moment the
// daemon places it (the run goes to `starting`). GET /metrics exports it as
// the histogram lathe_scheduling_latency_seconds (docs/metrics.md).
// Thread-safe.
#pragma once

#include <cstdint>
#include <mutex>
#include <vector>

namespace lathe::daemon {

class SchedulingLatency {
 public:
  // Upper bounds in seconds, ascending: 0.1 s … 1 day; +Inf is implicit.
  static std::vector<double> DefaultBoundsSeconds();

  // `bounds_s`: ascending upper bounds in seconds (DefaultBoundsSeconds()).
  explicit SchedulingLatency(std::vector<double> bounds_s = DefaultBoundsSeconds());

  // One attempt placed `wait_ms` after it was queued; negative (a wall clock
  // that went back) counts as 0.
  void Observe(int64_t wait_ms);

  struct Snapshot {
    std::vector<double> bounds_s;  // as constructed
    std::vector<uint64_t> counts;  // per bound, not cumulative: bounds_s[i-1] < v <= bounds_s[i]
    uint64_t count = 0;            // every observation, those above the last bound too
    double sum_s = 0;              // their total, seconds
  };
  Snapshot Get() const;

 private:
  const std::vector<double> bounds_s_;
  mutable std::mutex mu_;
  std::vector<uint64_t> counts_;  // guarded by mu_
  uint64_t count_ = 0;            // guarded by mu_
  double sum_s_ = 0;              // guarded by mu_
};

}  // namespace lathe::daemon

#include "lathe/daemon/scheduling_latency.h"

#include <algorithm>

namespace lathe::daemon {

std::vector<double> SchedulingLatency::DefaultBoundsSeconds() {
  // A run placed on a free node waits one loop pass (~0.1 s); one behind
  // others waits for them to end: minutes to hours.
  return {0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 7200, 21600, 86400};
}

SchedulingLatency::SchedulingLatency(std::vector<double> bounds_s)
    : bounds_s_(std::move(bounds_s)), counts_(bounds_s_.size(), 0) {}

void SchedulingLatency::Observe(int64_t wait_ms) {
  double s = static_cast<double>(std::max<int64_t>(0, wait_ms)) / 1000.0;
  std::lock_guard<std::mutex> l(mu_);
  auto it = std::lower_bound(bounds_s_.begin(), bounds_s_.end(), s);
  if (it != bounds_s_.end()) ++counts_[static_cast<size_t>(it - bounds_s_.begin())];
  ++count_;
  sum_s_ += s;
}

SchedulingLatency::Snapshot SchedulingLatency::Get() const {
  std::lock_guard<std::mutex> l(mu_);
  return Snapshot{bounds_s_, counts_, count_, sum_s_};
}

}  // namespace lathe::daemon

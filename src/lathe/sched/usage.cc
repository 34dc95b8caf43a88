#include "lathe/sched/usage.h"

#include <algorithm>
#include <cmath>

namespace lathe::sched {
namespace {

// [start, end] of `a` clipped to [lo, now]; empty when end <= start.
std::pair<int64_t, int64_t> Span(const AttemptUsage& a, int64_t lo, int64_t now_ms) {
  int64_t end = std::min(a.end_ms.value_or(now_ms), now_ms);
  int64_t start = std::max(a.start_ms, lo);
  return {start, std::max(start, end)};
}

}  // namespace

double GpuHoursIn(const AttemptUsage& a, int64_t now_ms, int64_t period_ms) {
  if (period_ms <= 0 || a.gpus <= 0) return 0;
  auto [start, end] = Span(a, now_ms - period_ms, now_ms);
  return static_cast<double>(a.gpus) * static_cast<double>(end - start) / kHourMs;
}

double DecayedGpuHours(const AttemptUsage& a, int64_t now_ms, int64_t half_life_ms) {
  if (a.gpus <= 0) return 0;
  auto [start, end] = Span(a, INT64_MIN / 2, now_ms);
  if (end <= start) return 0;
  if (half_life_ms <= 0)
    return static_cast<double>(a.gpus) * static_cast<double>(end - start) / kHourMs;
  const double h = static_cast<double>(half_life_ms);
  auto weight = [&](int64_t t) { return std::exp2(-static_cast<double>(now_ms - t) / h); };
  return static_cast<double>(a.gpus) * (h / std::log(2.0)) * (weight(end) - weight(start)) /
         kHourMs;
}

}  // namespace lathe::sched

#include "lathe/telemetry/usage_warnings.h"

#include <algorithm>
#include <chrono>

#include <fmt/format.h>

#include "lathe/common/units.h"

namespace lathe::telemetry {
namespace {

constexpr int64_t kPercent = 100;

std::string Minutes(int64_t ms) { return FormatDuration(std::chrono::milliseconds(ms)); }

}  // namespace

std::vector<UsageWarning> UsageWarnings::Observe(const std::string& run_id, const RunObservation& o,
                                                 bool& told_idle, bool& told_throttled) {
  std::vector<UsageWarning> out;
  // Idle: a stretch of samples all under the threshold.
  const bool idle =
      o.gpus_held > 0 && o.max_utilization_pct && *o.max_utilization_pct < opts_.idle_pct;
  if (!idle) {
    idle_since_.erase(run_id);
  } else {
    int64_t since = idle_since_.try_emplace(run_id, o.t_ms).first->second;
    if (!told_idle && o.t_ms - since >= opts_.idle_ms) {
      told_idle = true;
      out.push_back({UsageWarning::Kind::kIdle,
                     "telemetry.idle_gpus",
                     {{"gpus", std::to_string(o.gpus_held)},
                      {"pct", std::to_string(opts_.idle_pct)},
                      {"duration", Minutes(o.t_ms - since)}}});
    }
  }
  // Throttled: a share of the observed time.
  if (!told_throttled && o.observed_ms >= opts_.throttle_min_ms && o.observed_ms > 0 &&
      o.throttled_ms * kPercent >= o.observed_ms * opts_.throttle_share_pct) {
    told_throttled = true;
    std::vector<std::pair<std::string, int64_t>> reasons(o.reason_ms.begin(), o.reason_ms.end());
    std::stable_sort(reasons.begin(), reasons.end(),
                     [](const auto& a, const auto& b) { return a.second > b.second; });
    std::vector<std::string> names;
    for (const auto& [name, ms] : reasons) names.push_back(name);
    out.push_back({UsageWarning::Kind::kThrottled,
                   "telemetry.throttled",
                   {{"share", std::to_string(o.throttled_ms * kPercent / o.observed_ms)},
                    {"throttled", Minutes(o.throttled_ms)},
                    {"observed", Minutes(o.observed_ms)},
                    {"reasons", fmt::format("{}", fmt::join(names, ", "))}}});
  }
  return out;
}

}  // namespace lathe::telemetry

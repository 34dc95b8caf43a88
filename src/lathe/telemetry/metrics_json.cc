#include "lathe/telemetry/metrics_json.h"

#include <cmath>

#include "lathe/gpu/inventory.h"

namespace lathe::telemetry {
namespace {

constexpr double kMsPerS = 1000;
constexpr double kPercent = 100;

Json Real(double v) {
  if (std::isnan(v)) return nullptr;
  return std::round(v * kPercent) / kPercent;  // two decimals are plenty for a chart
}
Json Whole(double v) { return std::isnan(v) ? Json(nullptr) : Json(std::llround(v)); }

Json Col(const std::vector<Point>& pts, Field f, bool max, bool whole) {
  Json a = Json::array();
  for (const Point& p : pts) {
    double v = max ? p.max[f] : p.mean[f];
    a.push_back(whole ? Whole(v) : Real(v));
  }
  return a;
}

Json Times(const std::vector<Point>& pts) {
  Json t = Json::array();
  for (const Point& p : pts) t.push_back(p.t_ms);
  return t;
}

}  // namespace

Json SummaryJson(const Totals& x) {
  Json reasons = Json::object();
  for (const auto& [name, ms] : x.reason_ms) reasons[name] = static_cast<double>(ms) / kMsPerS;
  return {
      {"samples", x.samples},
      {"first_ms", x.first_ms},
      {"last_ms", x.last_ms},
      {"observed_s", static_cast<double>(x.observed_ms) / kMsPerS},
      {"mean_utilization_pct", Real(x.MeanUtilization())},
      {"max_utilization_pct", Real(x.utilization_max)},
      {"peak_memory_bytes", Whole(x.memory_peak)},
      {"peak_process_memory_bytes", Whole(x.process_memory_peak)},
      {"throttled_s", static_cast<double>(x.throttled_ms) / kMsPerS},
      {"throttled_pct", x.observed_ms > 0 ? Real(kPercent * static_cast<double>(x.throttled_ms) /
                                                 static_cast<double>(x.observed_ms))
                                          : Json(0)},
      {"throttle_reasons", reasons},
      {"mean_cpu_cores",
       x.cpu_n > 0 ? Real(x.cpu_sum / static_cast<double>(x.cpu_n)) : Json(nullptr)},
      {"max_cpu_cores", Real(x.cpu_max)},
      {"peak_host_memory_bytes", Whole(x.host_memory_peak)}};
}

Json MetricsJson(const RunTelemetry& t, const TierOptions& tiers, int64_t since_ms) {
  Json out = {{"run", t.run_id},
              {"simulated", t.meta.simulated},
              {"interval_ms", t.meta.interval_ms},
              {"since_ms", since_ms},
              {"tiers", Json::array({{{"name", "raw"},
                                      {"resolution_ms", t.meta.interval_ms},
                                      {"window_ms", tiers.raw_window_ms},
                                      {"max_points", tiers.raw_max_points}},
                                     {{"name", "minute"},
                                      {"resolution_ms", tiers.bucket_ms},
                                      {"window_ms", tiers.bucket_window_ms}}})},
              {"gpus", Json::array()},
              {"summary", SummaryJson(t.meta.totals)}};
  for (const GpuSeries& g : t.gpus) {
    const auto& p = g.points;
    Json n = Json::array(), reasons = Json::array();
    for (const Point& q : p) {
      n.push_back(q.n);
      reasons.push_back(gpu::ThrottleReasonNames(q.reasons));
    }
    out["gpus"].push_back({{"index", g.index},
                           {"uuid", g.uuid},
                           {"name", g.name},
                           {"t", Times(p)},
                           {"n", n},
                           {"utilization_pct", Col(p, kUtilization, false, false)},
                           {"utilization_max_pct", Col(p, kUtilization, true, false)},
                           {"memory_used_bytes", Col(p, kMemoryUsed, false, true)},
                           {"memory_used_max_bytes", Col(p, kMemoryUsed, true, true)},
                           {"process_memory_bytes", Col(p, kProcessMemory, false, true)},
                           {"process_memory_max_bytes", Col(p, kProcessMemory, true, true)},
                           {"temperature_c", Col(p, kTemperature, false, false)},
                           {"power_w", Col(p, kPower, false, false)},
                           {"sm_clock_mhz", Col(p, kSmClock, false, false)},
                           {"throttled", Col(p, kThrottled, false, false)},
                           {"throttle_reasons", reasons},
                           {"summary", SummaryJson(g.totals)}});
  }
  out["cpu"] = {{"t", Times(t.host)},
                {"usage_cores", Col(t.host, kCpuCores, false, false)},
                {"usage_max_cores", Col(t.host, kCpuCores, true, false)}};
  out["memory"] = {{"t", Times(t.host)},
                   {"bytes", Col(t.host, kHostMemory, false, true)},
                   {"max_bytes", Col(t.host, kHostMemory, true, true)}};
  return out;
}

}  // namespace lathe::telemetry

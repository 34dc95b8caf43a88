// lathe inspect RUN --metrics [--json]: a run's GPU telemetry
// (GET /api/v1/runs/{run}/metrics, docs/telemetry.md).
#include <cmath>
#include <cstdio>

#include <fmt/format.h>

#include "cmd/commands.h"
#include "cmd/output.h"
#include "lathe/api/client.h"
#include "lathe/common/units.h"

namespace lathe::cmd {
namespace {

constexpr size_t kSparkWidth = 32;

// The last `kSparkWidth` stretches of `values` (nulls skipped) as ▁…█,
// scaled from 0 (or the lowest value, when negative) to `top` (the highest
// value when 0).
std::string Sparkline(const Json& values, double top = 0) {
  static const char* kBars[] = {"▁", "▂", "▃", "▄", "▅", "▆", "▇", "█"};
  std::vector<double> v;
  for (const auto& x : values) {
    if (x.is_number()) v.push_back(x.get<double>());
  }
  if (v.empty()) return "-";
  // Means of equal stretches, so a long series fits.
  std::vector<double> cells;
  const size_t n = std::min(kSparkWidth, v.size());
  for (size_t i = 0; i < n; ++i) {
    size_t a = i * v.size() / n, b = (i + 1) * v.size() / n;
    double sum = 0;
    for (size_t j = a; j < b; ++j) sum += v[j];
    cells.push_back(sum / static_cast<double>(b - a));
  }
  if (top <= 0) {
    for (double c : cells) top = std::max(top, c);
  }
  std::string out;
  for (double c : cells) {
    int level = top > 0 ? static_cast<int>(std::lround(c / top * 7)) : 0;
    out += kBars[std::clamp(level, 0, 7)];
  }
  return out;
}

std::string Last(const Json& values, const std::function<std::string(double)>& fmt) {
  for (auto it = values.rbegin(); it != values.rend(); ++it) {
    if (it->is_number()) return fmt(it->get<double>());
  }
  return "-";
}

std::string Pct(double v) { return fmt::format("{:.0f}%", v); }
std::string Bytes(double v) { return FormatBytes(static_cast<uint64_t>(std::max(0.0, v))); }

std::string Num(const Json& v, const std::function<std::string(double)>& f) {
  return v.is_number() ? f(v.get<double>()) : "-";
}

void PrintSummary(const Json& s, Lang lang) {
  std::string reasons;
  for (const auto& [name, secs] : s["throttle_reasons"].items()) {
    reasons +=
        (reasons.empty() ? "" : ", ") +
        fmt::format(
            "{} {}", name,
            FormatDuration(std::chrono::milliseconds(std::llround(secs.get<double>() * 1000))));
  }
  auto dur = [](const Json& secs) {
    return FormatDuration(std::chrono::milliseconds(std::llround(secs.get<double>() * 1000)));
  };
  std::printf(
      "%s\n",
      Tr("inspect.metrics.summary", lang,
         {{"samples", std::to_string(s.value("samples", 0))},
          {"observed", dur(s["observed_s"])},
          {"mean", Num(s["mean_utilization_pct"], Pct)},
          {"max", Num(s["max_utilization_pct"], Pct)},
          {"memory", Num(s["peak_memory_bytes"], Bytes)},
          {"process_memory", Num(s["peak_process_memory_bytes"], Bytes)},
          {"throttled", dur(s["throttled_s"])},
          {"throttled_pct", Num(s["throttled_pct"], Pct)},
          {"reasons", reasons.empty() ? "-" : reasons},
          {"cpu", Num(s["mean_cpu_cores"], [](double v) { return fmt::format("{:.2f}", v); })},
          {"ram", Num(s["peak_host_memory_bytes"], Bytes)}})
          .c_str());
}

}  // namespace

Status InspectMetrics(const std::string& ref, bool json, Lang lang) {
  ASSIGN_OR_RETURN(auto c, api::ApiClient::Connect());
  ASSIGN_OR_RETURN(Json m, c->Get("/api/v1/runs/" + ref + "/metrics"));
  if (json) {
    PrintJson(m);
    return Status::OK();
  }
  std::printf(
      "%s\n",
      Tr(m.value("simulated", false) ? "inspect.metrics.title_simulated" : "inspect.metrics.title",
         lang,
         {{"run", m.value("run", ref)},
          {"interval",
           FormatDuration(std::chrono::milliseconds(m.value("interval_ms", int64_t{0})))}})
          .c_str());
  PrintSummary(m["summary"], lang);
  if (m["gpus"].empty() && m["cpu"]["t"].empty()) {
    std::printf("%s\n", Tr("inspect.metrics.none", lang).c_str());
    return Status::OK();
  }
  std::vector<std::vector<std::string>> rows = {{
      Tr("inspect.metrics.col.gpu", lang),
      Tr("inspect.metrics.col.util", lang),
      Tr("inspect.metrics.col.util_series", lang),
      Tr("inspect.metrics.col.memory", lang),
      Tr("inspect.metrics.col.process_memory", lang),
      Tr("inspect.metrics.col.memory_series", lang),
      Tr("inspect.metrics.col.temperature", lang),
      Tr("inspect.metrics.col.power", lang),
      Tr("inspect.metrics.col.sm_clock", lang),
      Tr("inspect.metrics.col.throttled", lang),
  }};
  for (const auto& g : m["gpus"]) {
    const Json& s = g["summary"];
    std::string throttled = Num(s["throttled_pct"], Pct);
    rows.push_back({std::to_string(g.value("index", 0)), Last(g["utilization_pct"], Pct),
                    Sparkline(g["utilization_pct"], 100), Last(g["memory_used_bytes"], Bytes),
                    Last(g["process_memory_bytes"], Bytes), Sparkline(g["process_memory_bytes"]),
                    Last(g["temperature_c"], [](double v) { return fmt::format("{:.0f}C", v); }),
                    Last(g["power_w"], [](double v) { return fmt::format("{:.0f}W", v); }),
                    Last(g["sm_clock_mhz"], [](double v) { return fmt::format("{:.0f}MHz", v); }),
                    throttled});
  }
  PrintTable(rows);
  auto cores = [](double v) { return fmt::format("{:.2f}", v); };
  std::printf("%s\n", Tr("inspect.metrics.cpu", lang,
                         {{"last", Last(m["cpu"]["usage_cores"], cores)},
                          {"series", Sparkline(m["cpu"]["usage_cores"])}})
                          .c_str());
  std::printf("%s\n", Tr("inspect.metrics.ram", lang,
                         {{"last", Last(m["memory"]["bytes"], Bytes)},
                          {"series", Sparkline(m["memory"]["bytes"])}})
                          .c_str());
  return Status::OK();
}

}  // namespace lathe::cmd

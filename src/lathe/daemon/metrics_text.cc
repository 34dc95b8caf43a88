#include "lathe/daemon/metrics_text.h"

#include <optional>

#include "lathe/common/prometheus.h"

namespace lathe::daemon {
namespace {

using prom::Labels;
using prom::Metrics;

constexpr double kMhzToHz = 1e6;
// The throttle reasons with a series of their own: every bit inventory.h names.
const std::vector<std::string>& ThrottleReasons() {
  static const std::vector<std::string> names = gpu::ThrottleReasonNames((1u << 9) - 1);
  return names;
}

void DeclareGpuFamilies(Metrics& m) {
  auto gauge = [&](const char* name, const char* help) {
    m.Declare(name, Metrics::Type::kGauge, help);
  };
  gauge("lathe_gpus", "GPUs the daemon's source reports.");
  gauge("lathe_gpu_up", "1 when the GPU could be read, 0 when the driver reports an error for it.");
  gauge("lathe_gpu_allocated", "1 when a run holds the GPU (labels run, run_name, user), else 0.");
  gauge("lathe_gpu_utilization_ratio",
        "GPU utilization over the driver's last sample period, 0-1.");
  gauge("lathe_gpu_memory_utilization_ratio", "Memory controller utilization, 0-1.");
  gauge("lathe_gpu_memory_used_bytes", "GPU memory in use, bytes.");
  gauge("lathe_gpu_memory_total_bytes", "GPU memory in all, bytes.");
  gauge("lathe_gpu_temperature_celsius", "GPU temperature, degrees Celsius.");
  gauge("lathe_gpu_power_watts", "Power draw, watts.");
  gauge("lathe_gpu_power_limit_watts", "Enforced power limit, watts.");
  gauge("lathe_gpu_sm_clock_hertz", "SM clock, hertz.");
  gauge("lathe_gpu_sm_clock_max_hertz", "Maximum SM clock, hertz.");
  gauge("lathe_gpu_throttled",
        "1 when clocks are held down for a reason other than gpu_idle, else 0.");
  gauge("lathe_gpu_throttle_reason", "1 for each reason the GPU's clocks are held down now.");
  gauge("lathe_gpu_ecc_uncorrected_errors",
        "Uncorrected ECC errors since the driver loaded (volatile count).");
}

void SetIf(Metrics& m, const char* name, const Labels& l, std::optional<double> v) {
  if (v) m.Set(name, l, *v);
}

template <typename T>
std::optional<double> D(const std::optional<T>& v, double scale = 1) {
  if (!v) return std::nullopt;
  return static_cast<double>(*v) * scale;
}

void AddGpu(Metrics& m, const gpu::GpuInfo& g, bool simulated, const GpuHolder* holder) {
  Labels l = {{"gpu", std::to_string(g.index)},
              {"uuid", g.uuid},
              {"name", g.name},
              {"simulated", simulated ? "true" : "false"},
              {"run", holder ? holder->run_id : ""},
              {"run_name", holder ? holder->run_name : ""},
              {"user", holder ? holder->user : ""}};
  m.Set("lathe_gpu_up", l, g.error.empty() ? 1 : 0);
  m.Set("lathe_gpu_allocated", l, holder ? 1 : 0);
  SetIf(m, "lathe_gpu_utilization_ratio", l, D(g.utilization_gpu_pct, 0.01));
  SetIf(m, "lathe_gpu_memory_utilization_ratio", l, D(g.utilization_mem_pct, 0.01));
  SetIf(m, "lathe_gpu_memory_used_bytes", l, D(g.memory_used_bytes));
  SetIf(m, "lathe_gpu_memory_total_bytes", l, D(g.memory_total_bytes));
  SetIf(m, "lathe_gpu_temperature_celsius", l, D(g.temperature_c));
  SetIf(m, "lathe_gpu_power_watts", l, g.power_w);
  SetIf(m, "lathe_gpu_power_limit_watts", l, g.power_limit_w);
  SetIf(m, "lathe_gpu_sm_clock_hertz", l, D(g.sm_clock_mhz, kMhzToHz));
  SetIf(m, "lathe_gpu_sm_clock_max_hertz", l, D(g.sm_clock_max_mhz, kMhzToHz));
  SetIf(m, "lathe_gpu_ecc_uncorrected_errors", l, D(g.ecc_uncorrected_errors));
  if (!g.throttle_reasons) return;  // unknown: no throttle series
  bool throttled = false;
  for (const auto& r : g.throttle_reason_names) throttled |= r != "gpu_idle";
  m.Set("lathe_gpu_throttled", l, throttled ? 1 : 0);
  for (const std::string& reason : ThrottleReasons()) {
    Labels lr = l;
    lr.emplace_back("reason", reason);
    bool on = false;
    for (const auto& r : g.throttle_reason_names) on |= r == reason;
    m.Set("lathe_gpu_throttle_reason", lr, on ? 1 : 0);
  }
}

}  // namespace

std::string MetricsText(const MetricsSnapshot& s) {
  Metrics m;
  m.Declare("lathe_build_info", Metrics::Type::kGauge, "Always 1; the label says the version.");
  m.Declare("lathe_daemon_start_time_seconds", Metrics::Type::kGauge,
            "When the daemon started, seconds since the Unix epoch.");
  DeclareGpuFamilies(m);
  m.Declare("lathe_queue_length", Metrics::Type::kGauge, "Queued runs, per priority.");
  m.Declare("lathe_runs", Metrics::Type::kGauge, "Runs the daemon keeps, per state.");
  m.Declare("lathe_scheduling_latency_seconds", Metrics::Type::kHistogram,
            "From an attempt's queueing (submission or requeue) to its placement, seconds.",
            s.latency.bounds_s);

  m.Set("lathe_build_info", {{"version", s.version}}, 1);
  m.Set("lathe_daemon_start_time_seconds", {}, static_cast<double>(s.start_time_ms) / 1000.0);
  const gpu::Inventory& inv = s.inventory;
  m.Set("lathe_gpus", {{"source", inv.source}, {"simulated", inv.simulated ? "true" : "false"}},
        static_cast<double>(inv.gpus.size()));
  for (const auto& g : inv.gpus) {
    auto h = s.holders.find(g.index);
    AddGpu(m, g, inv.simulated, h == s.holders.end() ? nullptr : &h->second);
  }
  for (run::Priority p : {run::Priority::kLow, run::Priority::kNormal, run::Priority::kHigh}) {
    auto it = s.queued.find(p);
    m.Set("lathe_queue_length", {{"priority", std::string(run::PriorityName(p))}},
          it == s.queued.end() ? 0 : static_cast<double>(it->second));
  }
  for (int i = 0; i <= static_cast<int>(run::RunState::kLost); ++i) {
    auto st = static_cast<run::RunState>(i);
    auto it = s.runs.find(st);
    m.Set("lathe_runs", {{"state", std::string(run::StateName(st))}},
          it == s.runs.end() ? 0 : static_cast<double>(it->second));
  }
  m.SetHistogram("lathe_scheduling_latency_seconds", {}, s.latency.counts, s.latency.count,
                 s.latency.sum_s);
  return m.Render();
}

}  // namespace lathe::daemon

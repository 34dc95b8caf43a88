// GET /metrics: the daemon's side (metrics_text.h renders it).
#include "lathe/daemon/daemon.h"

namespace lathe::daemon {

using run::RunState;

MetricsSnapshot Daemon::CollectMetrics() {
  MetricsSnapshot m;
  auto sample = gpu_source_->Sample();  // outside mu_: NVML may take its time
  m.inventory = sample.ok() ? std::move(sample).value() : inventory_;
  m.latency = scheduling_latency_.Get();
  m.version = LATHE_VERSION;
  m.start_time_ms = started_at_ms_;
  MutexLock lock(&mu_);
  if (auto active =
          store_->InStates({RunState::kStarting, RunState::kRunning, RunState::kStopping});
      active.ok()) {
    for (const auto& r : *active) {
      for (int g : r.gpus) m.holders[g] = GpuHolder{r.id, r.name, r.user};
    }
  }
  if (auto queued = store_->InStates({RunState::kQueued}); queued.ok()) {
    for (const auto& r : *queued) m.queued[r.spec.priority]++;
  }
  if (auto counts = store_->CountByState(); counts.ok()) m.runs = std::move(counts).value();
  return m;
}

}  // namespace lathe::daemon

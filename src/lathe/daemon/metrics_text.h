// The text of the daemon's GET /metrics (Prometheus text format 0.0.4,
// clean under `promtool check metrics`): the GPUs, each labelled with the run
// and user holding it (as dcgm-exporter maps GPUs to jobs), the queue by
// priority, runs by state, the scheduling latency histogram, build info and
// start time. Every metric and label is listed in docs/metrics.md.
//
// A pure function of a snapshot the daemon takes (Daemon::CollectMetrics):
// what it shows of a run is what every local user sees in `lathe ps` (id,
// name, user), never its spec or environment.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "lathe/daemon/scheduling_latency.h"
#include "lathe/gpu/inventory.h"
#include "lathe/run/spec.h"
#include "lathe/run/state.h"

namespace lathe::daemon {

// The run that holds a GPU (starting, running or stopping on it).
struct GpuHolder {
  std::string run_id;
  std::string run_name;
  std::string user;
};

struct MetricsSnapshot {
  gpu::Inventory inventory;                 // a fresh sample of the GPU source
  std::map<int, GpuHolder> holders;         // GPU index -> its run; free GPUs are absent
  std::map<run::Priority, int64_t> queued;  // queued runs per priority; absent: 0
  std::map<run::RunState, int64_t> runs;    // every run the daemon keeps, per state; absent: 0
  SchedulingLatency::Snapshot latency;
  std::string version;        // LATHE_VERSION
  int64_t start_time_ms = 0;  // when the daemon started, epoch ms
};

// The exposition, "# HELP"/"# TYPE" for every family; a GPU value the source
// does not know (std::nullopt) has no sample. Every priority and every state
// has its sample, at 0 when none.
std::string MetricsText(const MetricsSnapshot& s);

// The Content-Type of that text.
inline constexpr const char* kMetricsContentType = "text/plain; version=0.0.4; charset=utf-8";

}  // namespace lathe::daemon

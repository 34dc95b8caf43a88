// What the front measures per deployment: the Prometheus series it exports
// on its admin socket (GET /metrics; names in docs/gateway.md) and the
// recent-window figures of GET /status (requests per second, p50 and p99 over
// the last 10 s).
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "lathe/common/prometheus.h"
#include "lathe/common/spin_lock.h"

namespace lathe::gateway {

// The requests of the last `window_ms` (at most `max_samples` of them):
// their rate and latency percentiles. Pure (times are passed in); not
// thread-safe.
class RequestWindow {
 public:
  static constexpr int64_t kWindowMs = 10'000;
  static constexpr size_t kMaxSamples = 8192;

  void Add(int64_t now_ms, double latency_ms);
  // Requests per second over the window (those older are dropped first).
  double Rps(int64_t now_ms);
  // The q-quantile (0..1) of the latencies in the window, nearest rank; 0 when empty.
  double PercentileMs(int64_t now_ms, double q);
  // Appends the latencies in the window to `out` (those older are dropped
  // first), so that a caller holding a lock copies them and computes
  // percentiles (Percentile) after releasing it.
  void AppendLatencies(int64_t now_ms, std::vector<double>& out);
  // The q-quantile of `latencies` (reordered), nearest rank; 0 when empty.
  static double Percentile(std::vector<double>& latencies, double q);

 private:
  void Drop(int64_t now_ms);
  std::deque<std::pair<int64_t, double>> samples_;  // (time, latency ms), oldest first
};

// The gauges of one deployment, read at scrape time.
struct DeploymentGauges {
  std::string deployment;
  int64_t in_flight = 0;
  int64_t held = 0;
  int64_t replicas_wanted = 0;
  int64_t replicas_healthy = 0;
};

// The front's Prometheus registry. Thread-safe.
class FrontMetrics {
 public:
  FrontMetrics();
  // One request answered with HTTP `code` after `seconds`.
  void Record(const std::string& deployment, int code, double seconds);
  // The exposition text, gauges set from `gauges`.
  std::string Render(const std::vector<DeploymentGauges>& gauges);

  // Series resolved once per deployment (and code), so that a request does
  // not render its labels: Record runs for every request.
  struct Handles {
    prom::Metrics::Series* duration = nullptr;
    std::map<int, prom::Metrics::Series*> by_code;
  };

 private:
  std::mutex render_mu_;  // one scrape at a time sets the gauges
  prom::Metrics m_;
  // Guarded by handles_mu_, which Render holds while it drops the series of
  // deployments that are gone (and their handles with them).
  SpinLock handles_mu_;  // taken for every request: short sections only
  std::unordered_map<std::string, Handles> handles_;
};

}  // namespace lathe::gateway

#include "lathe/gateway/front_metrics.h"

#include <set>

#include <algorithm>
#include <cmath>

namespace lathe::gateway {

void RequestWindow::Add(int64_t now_ms, double latency_ms) {
  samples_.emplace_back(now_ms, latency_ms);
  while (samples_.size() > kMaxSamples) samples_.pop_front();
}

void RequestWindow::Drop(int64_t now_ms) {
  while (!samples_.empty() && samples_.front().first <= now_ms - kWindowMs) samples_.pop_front();
}

double RequestWindow::Rps(int64_t now_ms) {
  Drop(now_ms);
  return static_cast<double>(samples_.size()) * 1000.0 / static_cast<double>(kWindowMs);
}

double RequestWindow::PercentileMs(int64_t now_ms, double q) {
  std::vector<double> v;
  AppendLatencies(now_ms, v);
  return Percentile(v, q);
}

void RequestWindow::AppendLatencies(int64_t now_ms, std::vector<double>& out) {
  Drop(now_ms);
  out.reserve(out.size() + samples_.size());
  for (const auto& s : samples_) out.push_back(s.second);
}

double RequestWindow::Percentile(std::vector<double>& v, double q) {
  if (v.empty()) return 0;
  // Nearest rank: the smallest value with at least q of the samples at or below it.
  size_t rank = static_cast<size_t>(std::ceil(std::clamp(q, 0.0, 1.0) * v.size()));
  size_t k = rank == 0 ? 0 : rank - 1;
  std::nth_element(v.begin(), v.begin() + k, v.end());
  return v[k];
}

FrontMetrics::FrontMetrics() {
  using T = prom::Metrics::Type;
  m_.Declare("lathe_deployment_requests_total", T::kCounter,
             "Requests the front answered, by deployment and HTTP status code.");
  m_.Declare("lathe_deployment_request_duration_seconds", T::kHistogram,
             "Time from a request's arrival at the front to its answer (holding included).",
             prom::Metrics::LatencyBuckets());
  m_.Declare("lathe_deployment_in_flight", T::kGauge,
             "Requests forwarded to a replica and not answered yet.");
  m_.Declare("lathe_deployment_held", T::kGauge,
             "Requests held while the deployment has no healthy replica.");
  m_.Declare("lathe_deployment_replicas", T::kGauge,
             "Replicas the daemon wants (state=wanted) and those healthy now (state=healthy).");
}

void FrontMetrics::Record(const std::string& deployment, int code, double seconds) {
  std::lock_guard lock(handles_mu_);
  Handles& h = handles_[deployment];
  if (h.duration == nullptr) {
    h.duration =
        m_.Resolve("lathe_deployment_request_duration_seconds", {{"deployment", deployment}});
  }
  prom::Metrics::Series*& requests = h.by_code[code];
  if (requests == nullptr) {
    requests = m_.Resolve("lathe_deployment_requests_total",
                          {{"deployment", deployment}, {"code", std::to_string(code)}});
  }
  m_.CountAndObserve(requests, h.duration, seconds);
}

std::string FrontMetrics::Render(const std::vector<DeploymentGauges>& gauges) {
  std::lock_guard<std::mutex> lock(render_mu_);
  for (const char* g :
       {"lathe_deployment_in_flight", "lathe_deployment_held", "lathe_deployment_replicas"}) {
    m_.ClearGauge(g);
  }
  // A deployment that is gone takes its counters and latencies with it
  // (their handles first: none may outlive its series).
  std::set<std::string> live;
  for (const auto& d : gauges) live.insert(d.deployment);
  {
    std::lock_guard lock(handles_mu_);
    std::erase_if(handles_, [&](const auto& h) { return live.count(h.first) == 0; });
    for (const char* f :
         {"lathe_deployment_requests_total", "lathe_deployment_request_duration_seconds"}) {
      m_.RetainSeries(f, "deployment", live);
    }
  }
  for (const auto& d : gauges) {
    const prom::Labels l = {{"deployment", d.deployment}};
    m_.Set("lathe_deployment_in_flight", l, static_cast<double>(d.in_flight));
    m_.Set("lathe_deployment_held", l, static_cast<double>(d.held));
    m_.Set("lathe_deployment_replicas", {{"deployment", d.deployment}, {"state", "wanted"}},
           static_cast<double>(d.replicas_wanted));
    m_.Set("lathe_deployment_replicas", {{"deployment", d.deployment}, {"state", "healthy"}},
           static_cast<double>(d.replicas_healthy));
  }
  return m_.Render();
}

}  // namespace lathe::gateway

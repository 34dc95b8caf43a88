// GET /metrics: the daemon's Prometheus exposition (docs/metrics.md).
#include "lathe/api/auth_limiter.h"
#include "lathe/api/credentials.h"
#include "lathe/api/routes.h"
#include "lathe/api/server.h"
#include "lathe/daemon/metrics_text.h"

namespace lathe::api {

net::HttpResponse ApiServer::MetricsResponse() {
  net::HttpResponse r;
  r.content_type = daemon::kMetricsContentType;
  r.body = daemon::MetricsText(daemon_.CollectMetrics());
  return r;
}

// Any authenticated caller may scrape: the text holds what every local user
// sees in `lathe ps` (run ids, names, users, GPUs), no spec or environment.
void ApiServer::GetMetrics(ApiCall& call) { call.Send(MetricsResponse()); }

bool ApiServer::OpenMetricsScrape(const net::HttpRequest& req) const {
  if (!opts_.metrics_open_on_loopback || req.peer || req.path != "/metrics") return false;
  if (req.method != "GET") return false;
  // A request that brings a credential is authenticated as usual (a bad one is 401).
  if (!req.Header("Authorization").empty() || !req.Header("Cookie").empty()) return false;
  std::string address = AddressOf(req.remote);
  if (address.rfind("::ffff:", 0) == 0) address = address.substr(7);  // IPv4-mapped
  return address != "localhost" && DaemonUrl{address, 0}.loopback();
}

}  // namespace lathe::api

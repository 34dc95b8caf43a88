// The daemon's REST API under /api/v1 (documented in docs/api.md), served on
// the unix socket and on loopback TCP through net::HttpServer.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "lathe/common/status.h"
#include "lathe/daemon/daemon.h"
#include "lathe/net/http_server.h"
#include "lathe/run/log_reader.h"

namespace lathe::api {

struct ApiOptions {
  std::string host = "127.0.0.1";  // TCP address; loopback unless configured
  int port = 0;                    // 0: any free port (see endpoint.json)
  std::function<void()> on_shutdown;  // POST /api/v1/shutdown
};

class ApiServer {
 public:
  // Listens on the daemon's socket (0666 in system mode, 0600 in user mode)
  // and on host:port; writes the token (first start) and endpoint.json.
  static Result<std::unique_ptr<ApiServer>> Create(daemon::Daemon& d, ApiOptions options);
  ~ApiServer();

  int port() const { return port_; }
  std::string tcp_endpoint() const;
  void Stop();  // ends streams, drains requests

 private:
  ApiServer(daemon::Daemon& d, ApiOptions o) : daemon_(d), opts_(std::move(o)) {}
  void Handle(net::HttpRequest req, std::unique_ptr<net::Responder> res);
  void Route(const net::HttpRequest& req, const daemon::Caller& caller,
             std::unique_ptr<net::Responder>& res);
  void RouteSnapshots(const net::HttpRequest& req, const std::vector<std::string>& p,
                      const daemon::Caller& caller, std::unique_ptr<net::Responder>& res);
  // GET /runs/{run}/logs (routes_logs.cc): checks the query and hands the
  // answer to a stream thread; an error comes back before anything is sent.
  Status RouteLogs(const net::HttpRequest& req, const state::RunRecord& run, const daemon::Caller& caller,
                   bool follow, std::unique_ptr<net::Responder>& res);
  void ServeLogs(const std::string& run_id, const std::string& path, const run::LogQuery& query, bool follow,
                 net::Responder& res);
  void FollowLogs(const std::string& run_id, run::LogReader& reader, net::ResponseStream& s);
  void FollowEvents(std::string run_id, int64_t after, net::ResponseStream& s);
  // Sends an SSE comment on a stream quiet for 15 s, so that a client's read
  // timeout (the CLI's is 60 s) does not end the follow of a silent run.
  struct KeepAlive {
    int64_t last_ms = 0;
    bool Tick(net::ResponseStream& s);  // false: the client is gone
  };
  void StreamRestore(daemon::Caller caller, std::string ref, std::string to, bool force, net::ResponseStream& s);
  void StartStreamThread(std::function<void()> body);

  daemon::Daemon& daemon_;
  const ApiOptions opts_;
  std::string token_;
  int port_ = 0;
  std::unique_ptr<net::HttpServer> server_;
  std::atomic<bool> stopping_{false};
  std::atomic<int> streams_{0};

  // Logs being read per uid, plain or followed; each holds a thread and up to
  // a few MiB (run/log_reader.h).
  static constexpr int kMaxLogReadersPerUser = 16;
  std::mutex log_mu_;
  std::map<uid_t, int> log_readers_;  // guarded by log_mu_
};

}  // namespace lathe::api

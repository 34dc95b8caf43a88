// The daemon's REST API under /api/v1 (documented in docs/api.md), served on
// the unix socket and on TCP (loopback, or TLS) through net::HttpServer.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "lathe/api/auth.h"
#include "lathe/api/deploy_keys.h"
#include "lathe/api/run_origin.h"
#include "lathe/api/run_origin_cache.h"
#include "lathe/api/run_tunnels.h"
#include "lathe/api/sessions.h"
#include "lathe/api/tokens.h"
#include "lathe/common/status.h"
#include "lathe/daemon/daemon.h"
#include "lathe/net/http_server.h"
#include "lathe/net/proxy.h"
#include "lathe/net/router.h"
#include "lathe/node/services.h"
#include "lathe/run/log_reader.h"
#include "lathe/run/secret_mask.h"

namespace lathe::api {

struct ApiCall;  // routes.h

struct ApiOptions {
  std::string host = "127.0.0.1";  // TCP address; loopback unless configured
  int port = 0;                    // 0: any free port (see endpoint.json)
  // With port 0: the port of the previous start (endpoint.json's) when it is
  // free, so that URLs stored by clients (`lathe login`) stay valid across
  // restarts; any free port otherwise, with a warning.
  bool keep_port = false;
  // Both files set: the TCP listener speaks TLS (docs/security.md, "TLS").
  // A host that is not loopback requires them; one without the other is an error.
  net::TlsFiles tls;
  // The TCP listener speaks TLS: session cookies get `Secure`, login URLs
  // and the expected Origin are https://.
  bool tls_on() const { return !tls.cert_file.empty(); }
  std::function<void()> on_shutdown;  // POST /api/v1/shutdown
  // Wall time for token expiry and monotonic time for the failed-login
  // limit; null: os::RealClock(). Not owned.
  os::Clock* clock = nullptr;
  // Host names (or addresses) besides localhost, 127.0.0.1, [::1] and `host`
  // that TCP requests may name in their Host header (config allowed_hosts).
  std::vector<std::string> allowed_hosts;
  // Lifetimes and bounds of login codes and browser sessions.
  SessionService::Options sessions;
  // GET /metrics answers a TCP request from a loopback address that brings
  // no credential (config metrics.open_on_loopback; docs/metrics.md).
  // Otherwise it takes the API's credentials, as every route does.
  bool metrics_open_on_loopback = false;
};

class ApiServer {
 public:
  // Listens on the daemon's socket (0666 in system mode, 0600 in user mode)
  // and on host:port; writes the token (first start) and endpoint.json.
  // FailedPrecondition tls.required for a host that is not loopback without
  // options.tls, InvalidArgument tls.incomplete for half of it, and the
  // listener's tls.* errors for files it cannot use.
  static Result<std::unique_ptr<ApiServer>> Create(node::Services& services, ApiOptions options);
  // The route table's (method, pattern) pairs, in order: docs/api.md and
  // data/openapi.yaml list the same (api/openapi_test.cc).
  static std::vector<std::pair<std::string, std::string>> RoutePatterns();
  ~ApiServer();

  int port() const { return port_; }
  std::string tcp_endpoint() const;
  // "https://HOST:PORT" with TLS, else "http://HOST:PORT"; a wildcard host
  // (0.0.0.0, ::) is given as loopback, where a local client reaches it.
  std::string url() const;
  void Stop();  // ends streams, drains requests

  // The browser sessions of this daemon (the run-origin proxy issues and
  // checks its own scopes with it). Thread-safe itself.
  SessionService& sessions() { return *sessions_; }

 private:
  // ApiOptions::keep_port: the previous start's TCP port, 0 when none or not kept.
  int PreviousPort(const std::string& endpoint_path) const;
  // Listens on `previous` when it is above 0 and free, else on options.port.
  Result<int> ListenTcpOrTls(int previous);
  ApiServer(node::Services& services, ApiOptions o)
      : daemon_(services.runs),
        models_(services.models),
        deployments_(services.deployments),
        opts_(std::move(o)),
        origin_cache_(opts_.clock ? *opts_.clock : os::RealClock()) {}
  // Authenticates, then dispatches through router_: 404 for an unknown path,
  // 405 with Allow for a known path and another method.
  void Handle(net::HttpRequest req, std::unique_ptr<net::Responder> res);
  // The route table (server.cc); it reads like docs/api.md's endpoint table.
  Status AddRoutes();
  // The Host allowlist of the daemon's own origin (host_check.h), for TCP
  // requests: OK, or PermissionDenied api.host_not_allowed (sent as 421).
  Status CheckDaemonHost(const net::HttpRequest& req) const;

  // The web UI under /ui/ (routes_ui.cc): /ui/login (a login code -> the
  // session cookie), its embedded files, and index.html for every other path.
  static bool IsUiPath(std::string_view path);
  void HandleUi(const net::HttpRequest& req, std::unique_ptr<net::Responder> res);
  void UiLogin(const net::HttpRequest& req, net::Responder& res);
  // http(s)://HOST:PORT/ui/login?code=CODE for a request that asked for it:
  // "localhost" for a loopback listener (it works through ssh -L).
  std::string LoginUrl(const net::HttpRequest& req, const std::string& code) const;

  // GET /metrics (routes_metrics.cc): the exposition, and whether `req` is a
  // scrape that needs no credential (metrics_open_on_loopback, a loopback
  // TCP client, no Authorization or Cookie header).
  net::HttpResponse MetricsResponse();
  bool OpenMetricsScrape(const net::HttpRequest& req) const;

  // Routes. Each answers through call.res or hands it to a stream thread.
  // routes_system.cc
  void GetStatus(ApiCall& call);
  void GetGpus(ApiCall& call);
  void GetPools(ApiCall& call);
  void GetProfiles(ApiCall& call);  // the same for every caller: nothing in it is private
  void GetEvents(ApiCall& call);
  void PostShutdown(ApiCall& call);
  void PostReload(ApiCall& call);
  void GetOpenApi(ApiCall& call);
  // routes_runs.cc
  void ListRuns(ApiCall& call);
  void PostRun(ApiCall& call);
  void GetRun(ApiCall& call);
  void StopRun(ApiCall& call);
  void RestartRun(ApiCall& call);
  void WatchNotebookClient(const net::HttpRequest& req, const std::string& run_id,
                           net::Upstream& up);
  void DeleteRun(ApiCall& call);
  void PruneRuns(ApiCall& call);
  void GetRunEvents(ApiCall& call);
  // routes_logs.cc
  void GetDoctor(ApiCall& call);
  void GetRunLogStats(ApiCall& call);
  void GetRunLogs(ApiCall& call);
  void GetRunMetrics(ApiCall& call);  // routes_telemetry.cc
  void GetGpuHistory(ApiCall& call);  // routes_telemetry.cc
  // routes_snapshots.cc
  void ListSnapshots(ApiCall& call);
  void GetSnapshot(ApiCall& call);
  void PostRestore(ApiCall& call);
  void DeleteSnapshot(ApiCall& call);
  // routes_tokens.cc
  void PostToken(ApiCall& call);
  void ListTokens(ApiCall& call);
  void DeleteToken(ApiCall& call);
  // routes_sessions.cc
  void PostSessionCode(ApiCall& call);
  void GetSession(ApiCall& call);
  void ListSessions(ApiCall& call);
  void DeleteSession(ApiCall& call);
  // routes_secrets.cc
  void PostSecret(ApiCall& call);
  void ListSecrets(ApiCall& call);
  void DeleteSecret(ApiCall& call);
  // routes_shares.cc
  void ListShares(ApiCall& call);
  void PostShare(ApiCall& call);
  void DeleteShare(ApiCall& call);
  void PostProject(ApiCall& call);
  void ListProjects(ApiCall& call);
  void GetProject(ApiCall& call);
  void PatchProject(ApiCall& call);
  void DeleteProject(ApiCall& call);
  // The object a share's target names ("run:REF", "deployment:NAME",
  // "model:NAME", or a bare name one kind of object has), as the caller sees it.
  Result<daemon::SharedObject> ShareTarget(const daemon::Caller& caller, const std::string& target);
  // routes_images.cc
  void PostImageImport(ApiCall& call);
  void PostImagePull(ApiCall& call);
  void PostImageBuild(ApiCall& call);
  // routes_images.cc: a pull or a build, given where its lines go.
  using LineSink = std::function<void(std::string_view)>;
  using ImageWork = std::function<Result<daemon::ImageView>(const LineSink&)>;
  void AnswerImage(ApiCall& call, ImageWork work);
  void PostImagePrune(ApiCall& call);
  void ListImages(ApiCall& call);
  void GetImage(ApiCall& call);
  void DeleteImage(ApiCall& call);
  // routes_models.cc
  void PostModel(ApiCall& call);
  void ListModels(ApiCall& call);
  void GetModel(ApiCall& call);
  void GetModelVersion(ApiCall& call);
  void DeleteModelVersion(ApiCall& call);
  void PutModelAlias(ApiCall& call);
  void DeleteModelAlias(ApiCall& call);
  void PostModelExport(ApiCall& call);
  // routes_deployments.cc
  void PostDeployment(ApiCall& call);
  void ListDeployments(ApiCall& call);
  void GetDeployment(ApiCall& call);
  void PatchDeployment(ApiCall& call);
  void DeleteDeployment(ApiCall& call);
  void GetDeploymentEvents(ApiCall& call);
  void GetDeploymentMetrics(ApiCall& call);
  void PostDeploymentKey(ApiCall& call);
  void ListDeploymentKeys(ApiCall& call);
  void DeleteDeploymentKey(ApiCall& call);
  // run_proxy.cc
  void PostOpen(ApiCall& call);
  // routes_metrics.cc
  void GetMetrics(ApiCall& call);

  // A request whose Host is a run's origin (run_proxy.cc): authenticated,
  // checked (owner, root or the daemon's user; same Origin; the run running)
  // and handed to proxy_. Nothing of the API is served there.
  void HandleRunOrigin(net::HttpRequest req, std::unique_ptr<net::Responder> res,
                       const RunOrigin& origin);
  // The names run origins live under: "localhost", and the TCP host when it
  // is a name.
  std::vector<std::string> RunOriginBases() const;
  void RunOriginLogin(const net::HttpRequest& req, net::Responder& res, const RunOrigin& o);
  std::string RunOriginUrl(const RunOrigin& o) const;
  // The run's ports for GET /runs/{run} (docs/api.md): [{name, kind,
  // address, env, url, state, listening, error?}], with the layer that keeps
  // a port from answering (run/ports.h).
  Json PortsJson(const state::RunRecord& r);
  // The URL of the run's main port on its origin ("" without ports).
  std::string MainPortUrl(const state::RunRecord& r) const;

  // GET /runs/{run}/logs (routes_logs.cc): checks the query and hands the
  // answer to a stream thread; an error comes back before anything is sent.
  Status RouteLogs(const net::HttpRequest& req, const state::RunRecord& run,
                   const Authenticated& auth, bool follow, std::unique_ptr<net::Responder>& res);
  // Both show the log with the run's secrets' values masked (`mask`).
  void ServeLogs(const std::string& run_id, const std::string& path, const run::LogQuery& query,
                 bool follow, const run::SecretMask& mask, const Authenticated& auth,
                 net::Responder& res);
  void FollowLogs(const std::string& run_id, run::LogReader& reader, const run::SecretMask& mask,
                  const Authenticated& auth, net::ResponseStream& s);
  // GET /runs?follow=1: `run` {id, state} at every state change of any
  // run, `removed` {total_all} when runs were removed.
  void FollowRunChanges(const Authenticated& auth, net::ResponseStream& stream);
  void FollowEvents(std::string run_id, int64_t after, const Authenticated& auth,
                    net::ResponseStream& s);
  // What a followed stream does now and then: an SSE comment when it was
  // quiet for 15 s, so that a client's read timeout (the CLI's is 60 s) does
  // not end the follow of a silent run; and every 5 s a check that the
  // credential it was opened with still holds — a revoked or expired token or
  // session ends the stream with an `error` event (api.credential_ended).
  // With `allowed`, also that the caller may still reach what the stream
  // shows (a share taken back ends it: api.access_ended).
  struct KeepAlive {
    KeepAlive(Authenticator& auth, const Authenticated& who, std::function<bool()> allowed = {})
        : auth_(auth), who_(who), allowed_(std::move(allowed)) {}
    bool Tick(net::ResponseStream& s);  // false: stop (the client is gone, or the credential)
    int64_t last_ms = 0;
    int64_t last_check_ms = 0;

   private:
    Authenticator& auth_;
    const Authenticated& who_;
    std::function<bool()> allowed_;
  };
  // After a share taken back (or a member removed): ends the proxied
  // websockets whose users may no longer open their run.
  void RecheckRunTunnels();
  // Whether `auth`'s caller may still read run `run_id` (for KeepAlive).
  std::function<bool()> StillReads(const Authenticated& auth, const std::string& run_id);
  void StreamRestore(daemon::Caller caller, std::string ref, std::string to, bool force,
                     net::ResponseStream& s);
  void StartStreamThread(std::function<void()> body);

  // GET /doctor: the machine's checks, run at most once a minute.
  std::mutex doctor_mu_;
  int64_t doctor_at_ms_ = 0;
  Json doctor_;

  daemon::Daemon& daemon_;            // the run supervisor
  deploy::Registry& models_;          // the model registry
  deploy::Deployments& deployments_;  // the deployment manager
  const ApiOptions opts_;
  std::string token_;
  std::unique_ptr<TokenService> tokens_;           // thread-safe itself
  std::unique_ptr<DeployKeyService> deploy_keys_;  // thread-safe itself
  std::unique_ptr<SessionService> sessions_;       // thread-safe itself
  std::unique_ptr<Authenticator> auth_;            // thread-safe itself
  int port_ = 0;
  using Route = void (ApiServer::*)(ApiCall&);
  struct RouteDef {
    const char* method;
    const char* pattern;
    Route handler;
  };
  static const std::vector<RouteDef>& RouteDefs();
  net::Router<Route> router_;  // constant after Create
  std::unique_ptr<net::ReverseProxy> proxy_;
  std::vector<std::string> origin_bases_;      // RunOriginBases(), constant after Create
  RunOriginCache origin_cache_;                // run origins' recent admissions (thread-safe)
  std::atomic<uint64_t> origin_cache_gen_{0};  // the Sharing::generation() it was made under
  RunTunnels run_tunnels_;  // websockets a shared run's non-owners opened (thread-safe)
  std::unique_ptr<net::HttpServer> server_;
  std::atomic<bool> stopping_{false};
  std::atomic<int> streams_{0};
  // GET /pools being answered (each on a thread of its own, for as long as a
  // cluster's sinfo takes).
  static constexpr int kMaxPoolsCalls = 8;
  std::atomic<int> pools_calls_{0};

  // Logs being read per uid, plain or followed; each holds a thread and up to
  // a few MiB (run/log_reader.h).
  static constexpr int kMaxLogReadersPerUser = 16;
  std::mutex log_mu_;
  std::map<uid_t, int> log_readers_;  // guarded by log_mu_
};

}  // namespace lathe::api

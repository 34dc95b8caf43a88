#include "lathe/api/server.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <thread>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "lathe/api/auth.h"
#include "lathe/api/credentials.h"
#include "lathe/api/host_check.h"
#include "lathe/api/limits.h"
#include "lathe/api/routes.h"
#include "lathe/common/embedded.h"
#include "lathe/common/ids.h"
#include "lathe/common/json.h"
#include "lathe/common/yaml_json.h"
#include "lathe/net/status_http.h"
#include "lathe/os/clock.h"
#include "lathe/os/files.h"
#include "lathe/os/process.h"
#include "lathe/run/event_text.h"
#include "lathe/run/log_format.h"
#include "lathe/run/spec.h"

namespace lathe::api {
namespace {

// A '/' sent percent-encoded ("alice%2Fdigits": a model's or a
// deployment's OWNER/NAME) is part of its segment, not a separator
// (RFC 3986 §2.2): the path is routed with it as this byte, which no
// request path can hold otherwise, then given back as '/'.
constexpr char kSlashInSegment = '\x1f';

std::string RoutingPath(const net::HttpRequest& req) {
  std::string_view raw = std::string_view(req.target).substr(0, req.target.find('?'));
  auto has = [&](std::string_view a, std::string_view b) {
    return raw.find(a) != std::string_view::npos || raw.find(b) != std::string_view::npos;
  };
  if (!has("%2F", "%2f") || has("%1F", "%1f") ||
      req.path.find(kSlashInSegment) != std::string::npos)
    return req.path;
  std::string marked;
  for (size_t i = 0; i < raw.size(); ++i) {
    if (raw[i] == '%' && i + 2 < raw.size() && raw[i + 1] == '2' &&
        (raw[i + 2] == 'F' || raw[i + 2] == 'f')) {
      marked += kSlashInSegment;
      i += 2;
    } else {
      marked += raw[i];
    }
  }
  return net::PercentDecode(marked, false);
}

constexpr int kStreamPollMs = 100;

Result<std::string> LoadOrCreateToken(const std::string& path) {
  auto existing = os::ReadFile(path);
  if (existing.ok() && existing->size() >= 32) {
    std::string t = *existing;
    while (!t.empty() && (t.back() == '\n' || t.back() == ' ')) t.pop_back();
    return t;
  }
  std::string token = NewSecret();
  RETURN_IF_ERROR(os::WriteFileAtomic(path, token + "\n", 0600));
  return token;
}

}  // namespace

void ApiCall::Reply(const Result<Json>& r, int ok_status) {
  Send(r.ok() ? JsonResponse(ok_status, *r) : ErrorResponse(r.status()));
}

void ApiCall::Send(net::HttpResponse r) {
  res->Send(std::move(r));
  res.reset();
}

net::HttpResponse JsonResponse(int status, const Json& body) {
  net::HttpResponse r;
  r.status = status;
  r.body = body.dump();
  r.body += '\n';
  return r;
}

net::HttpResponse ErrorResponse(const Status& s) {
  return JsonResponse(net::HttpStatusFor(s), StatusToJson(s));
}

std::string CreatedBy(const Authenticated& a) {
  switch (a.via) {
    case Via::kSocket:
      return "socket";
    case Via::kDaemonToken:
      return "daemon token";
    case Via::kUserToken:
      return "token " + a.token_id;
    case Via::kSession:
      return "session " + (a.session ? a.session->id : std::string());
  }
  return "";
}

int64_t CredentialEndMs(const Authenticated& a) {
  if (a.via == Via::kUserToken) return a.token_expires_at_ms;
  if (a.via == Via::kSession && a.session) return a.session->ends_ms;
  return 0;
}

Json EventJson(const state::EventRecord& e) {
  Json j = state::EventToJson(e);
  j["text"] = {{"en", run::EventText(j, Lang::kEn)}, {"zh", run::EventText(j, Lang::kZh)}};
  return j;
}

Json BothLanguages(const std::string& english) {
  return {{"en", run::ReasonText(english, Lang::kEn)}, {"zh", run::ReasonText(english, Lang::kZh)}};
}

bool Truthy(const std::optional<std::string>& v) {
  return v && (*v == "1" || *v == "true" || *v == "yes");
}

Result<int64_t> QueryNumber(const net::HttpRequest& req, std::string_view name, int64_t absent,
                            int64_t max) {
  constexpr size_t kShown = 64;
  std::optional<std::string> v = req.QueryParam(name);
  if (!v) return absent;
  int64_t n = -1;
  const char* end = v->data() + v->size();
  auto [at, ec] = std::from_chars(v->data(), end, n);
  if (v->empty() || (*v)[0] == '-' || ec != std::errc() || at != end || n > max) {
    std::string shown = v->substr(0, kShown);
    if (v->size() > kShown) shown += "...";
    return Status::Msg(
        Code::kInvalidArgument, "api.bad_number",
        {{"param", std::string(name)}, {"value", shown}, {"max", std::to_string(max)}});
  }
  return n;
}

// Connection limits of the API (docs/api.md, "Limits").
constexpr size_t kMaxConnections = 1024;
constexpr size_t kMaxTcpConnections = 768;  // the rest is kept for the unix socket
constexpr size_t kNewcomerConnections = 64;
constexpr size_t kMaxConnectionsPerUid = 128;  // on the socket, and over loopback TCP
constexpr size_t kMaxConnectionsPerAddress = 256;
constexpr size_t kReservedConnections = 64;

namespace {

// The TCP listener's TLS settings make sense together and are there off
// loopback (docs/security.md, "TLS").
Status CheckTls(const ApiOptions& o, const std::string& config) {
  const net::TlsFiles& t = o.tls;
  if (t.cert_file.empty() != t.key_file.empty()) {
    bool cert = !t.cert_file.empty();
    return Status::Msg(
        Code::kInvalidArgument, "tls.incomplete",
        {{"given", cert ? "tls.cert" : "tls.key"}, {"missing", cert ? "tls.key" : "tls.cert"}});
  }
  bool loopback = o.host.empty() || DaemonUrl{o.host, 0}.loopback();
  if (!loopback && t.cert_file.empty()) {
    return Status::Msg(Code::kFailedPrecondition, "tls.required",
                       {{"host", o.host}, {"config", config}});
  }
  return Status::OK();
}

}  // namespace

Result<std::unique_ptr<ApiServer>> ApiServer::Create(node::Services& services, ApiOptions options) {
  RETURN_IF_ERROR(CheckTls(options, services.runs.paths().home + "/config.yaml"));
  std::unique_ptr<ApiServer> s(new ApiServer(services, std::move(options)));
  const auto& paths = services.runs.paths();
  ASSIGN_OR_RETURN(s->token_, LoadOrCreateToken(paths.token));
  os::Clock& clock = s->opts_.clock ? *s->opts_.clock : os::RealClock();
  ASSIGN_OR_RETURN(s->tokens_, TokenService::Open(paths.db, clock));
  ASSIGN_OR_RETURN(s->deploy_keys_, DeployKeyService::Open(paths.db, clock));
  ASSIGN_OR_RETURN(s->sessions_, SessionService::Open(paths.db, clock, s->opts_.sessions));
  s->sessions_->SetTokenCheck(
      [tokens = s->tokens_.get()](const std::string& id) { return tokens->IsLive(id); });
  s->auth_ = std::make_unique<Authenticator>(s->token_, services.runs.uid(), *s->tokens_, clock,
                                             AuthLimiter::Options(), s->sessions_.get());
  net::ServerOptions so;
  so.io_threads = 2;
  so.max_body_bytes = kMaxRequestBodyBytes;
  // Every local user can reach the socket and the loopback port in system
  // mode: no one user (or client address) may hold enough connections to
  // lock the others out — a local user counts as one however many 127.x.y.z
  // they connect from; TCP clients leave part of the pool to the socket and
  // everyone leaves some to clients holding none; root and the daemon's own
  // user can connect on the socket even when all are taken.
  so.max_connections = kMaxConnections;
  so.max_tcp_connections = kMaxTcpConnections;
  so.newcomer_connections = kNewcomerConnections;
  so.max_connections_per_uid = kMaxConnectionsPerUid;
  so.max_connections_per_loopback_user = kMaxConnectionsPerUid;
  so.max_connections_per_address = kMaxConnectionsPerAddress;
  so.reserved_uids = {0, static_cast<unsigned>(services.runs.uid())};
  so.reserved_connections = kReservedConnections;
  RETURN_IF_ERROR(s->AddRoutes());
  s->origin_bases_ = s->RunOriginBases();
  s->proxy_ = std::make_unique<net::ReverseProxy>(net::ProxyOptions{}, ErrorResponse);
  ApiServer* self = s.get();
  ASSIGN_OR_RETURN(s->server_,
                   net::HttpServer::Create(
                       so, [self](net::HttpRequest req, std::unique_ptr<net::Responder> res) {
                         self->Handle(std::move(req), std::move(res));
                       }));
  std::string sock_dir = paths.socket.substr(0, paths.socket.rfind('/'));
  RETURN_IF_ERROR(os::MakeDirs(sock_dir, 0755));
  RETURN_IF_ERROR(s->server_->ListenUnix(paths.socket, paths.system ? 0666 : 0600));
  ASSIGN_OR_RETURN(s->port_, s->ListenTcpOrTls(s->PreviousPort(paths.endpoint)));
  // Written before the first request is served: a client that got an answer
  // finds the endpoint file.
  Json endpoint = {{"socket", paths.socket},
                   {"tcp", s->tcp_endpoint()},
                   {"tls", !s->opts_.tls.cert_file.empty()},
                   {"url", s->url()},
                   {"pid", os::SelfPid()},
                   {"mode", paths.system ? "system" : "user"}};
  RETURN_IF_ERROR(os::WriteFileAtomic(paths.endpoint, endpoint.dump() + "\n", 0644));
  RETURN_IF_ERROR(s->server_->Start());
  return s;
}

// The TCP port endpoint.json names (the previous start's), 0 when none.
int ApiServer::PreviousPort(const std::string& endpoint_path) const {
  if (opts_.port != 0 || !opts_.keep_port) return 0;
  auto text = os::ReadFileUpTo(endpoint_path, 64 * 1024);
  if (!text.ok()) return 0;
  auto j = ParseJson(*text);
  if (!j.ok() || !j->is_object()) return 0;
  const std::string tcp = j->value("tcp", "");
  const size_t colon = tcp.rfind(':');
  if (colon == std::string::npos) return 0;
  const int port = std::atoi(tcp.c_str() + colon + 1);
  return port > 0 && port < 65536 ? port : 0;
}

Result<int> ApiServer::ListenTcpOrTls(int previous) {
  auto listen = [this](int port) {
    return opts_.tls.cert_file.empty() ? server_->ListenTcp(opts_.host, port)
                                       : server_->ListenTls(opts_.host, port, opts_.tls);
  };
  if (previous > 0) {
    auto kept = listen(previous);
    if (kept.ok()) return kept;
    spdlog::warn(
        "port {} of the previous start cannot be had again ({}): listening on another; "
        "clients that stored the old address (lathe login) must log in again, or set port: in "
        "config.yaml",
        previous, kept.status().ToString());
  }
  return listen(opts_.port);
}

ApiServer::~ApiServer() { Stop(); }

std::string ApiServer::tcp_endpoint() const { return fmt::format("{}:{}", opts_.host, port_); }

std::string ApiServer::url() const {
  // A wildcard listener is reached on this machine through loopback: a
  // client given "0.0.0.0" would connect nowhere (or anywhere).
  std::string host = opts_.host == "0.0.0.0" ? "127.0.0.1"
                     : opts_.host == "::"    ? "::1"
                                             : opts_.host;
  bool v6 = host.find(':') != std::string::npos;
  return fmt::format("{}://{}{}{}:{}", opts_.tls.cert_file.empty() ? "http" : "https",
                     v6 ? "[" : "", host, v6 ? "]" : "", port_);
}

void ApiServer::Stop() {
  if (stopping_.exchange(true)) return;
  // Streams notice within one poll period; wait for them before the daemon goes.
  while (streams_.load() > 0) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  if (proxy_) proxy_->Stop();  // its requests end within a second
  if (server_) server_->Stop(2000);
}

void ApiServer::StartStreamThread(std::function<void()> body) {
  streams_++;
  std::thread([this, body = std::move(body)] {
    body();
    streams_--;
  }).detach();
}

// The API, as docs/api.md lists it (and data/openapi.yaml, generated from it:
// api/openapi_test.cc keeps the two equal).
const std::vector<ApiServer::RouteDef>& ApiServer::RouteDefs() {
  using A = ApiServer;
  static const std::vector<RouteDef> routes = {
      {"GET", "/api/v1/status", &A::GetStatus},
      {"GET", "/api/v1/gpus", &A::GetGpus},
      {"GET", "/api/v1/pools", &A::GetPools},
      {"GET", "/api/v1/profiles", &A::GetProfiles},
      {"GET", "/api/v1/gpus/history", &A::GetGpuHistory},
      {"GET", "/api/v1/runs", &A::ListRuns},
      {"POST", "/api/v1/runs", &A::PostRun},
      {"GET", "/api/v1/runs/{run}", &A::GetRun},
      {"DELETE", "/api/v1/runs/{run}", &A::DeleteRun},
      {"POST", "/api/v1/runs/{run}/stop", &A::StopRun},
      {"POST", "/api/v1/runs/{run}/restart", &A::RestartRun},
      {"POST", "/api/v1/runs/prune", &A::PruneRuns},
      {"GET", "/api/v1/runs/{run}/logs", &A::GetRunLogs},
      {"GET", "/api/v1/runs/{run}/logs/stats", &A::GetRunLogStats},
      {"GET", "/api/v1/runs/{run}/events", &A::GetRunEvents},
      {"GET", "/api/v1/runs/{run}/metrics", &A::GetRunMetrics},
      {"GET", "/api/v1/events", &A::GetEvents},
      {"GET", "/api/v1/snapshots", &A::ListSnapshots},
      {"GET", "/api/v1/snapshots/{snap}", &A::GetSnapshot},
      {"DELETE", "/api/v1/snapshots/{snap}", &A::DeleteSnapshot},
      {"POST", "/api/v1/snapshots/{snap}/restore", &A::PostRestore},
      {"POST", "/api/v1/models", &A::PostModel},
      {"GET", "/api/v1/models", &A::ListModels},
      {"GET", "/api/v1/models/{model}", &A::GetModel},
      {"GET", "/api/v1/models/{model}/versions/{version}", &A::GetModelVersion},
      {"DELETE", "/api/v1/models/{model}/versions/{version}", &A::DeleteModelVersion},
      {"POST", "/api/v1/models/{model}/versions/{version}/export", &A::PostModelExport},
      {"PUT", "/api/v1/models/{model}/aliases/{alias}", &A::PutModelAlias},
      {"DELETE", "/api/v1/models/{model}/aliases/{alias}", &A::DeleteModelAlias},
      {"POST", "/api/v1/deployments", &A::PostDeployment},
      {"GET", "/api/v1/deployments", &A::ListDeployments},
      {"GET", "/api/v1/deployments/{name}", &A::GetDeployment},
      {"PATCH", "/api/v1/deployments/{name}", &A::PatchDeployment},
      {"DELETE", "/api/v1/deployments/{name}", &A::DeleteDeployment},
      {"GET", "/api/v1/deployments/{name}/events", &A::GetDeploymentEvents},
      {"GET", "/api/v1/metrics/deployments", &A::GetDeploymentMetrics},
      {"POST", "/api/v1/deployments/{name}/keys", &A::PostDeploymentKey},
      {"GET", "/api/v1/deployments/{name}/keys", &A::ListDeploymentKeys},
      {"DELETE", "/api/v1/deployments/{name}/keys/{key}", &A::DeleteDeploymentKey},
      {"POST", "/api/v1/tokens", &A::PostToken},
      {"GET", "/api/v1/tokens", &A::ListTokens},
      {"DELETE", "/api/v1/tokens/{token}", &A::DeleteToken},
      {"POST", "/api/v1/sessions/code", &A::PostSessionCode},
      {"GET", "/api/v1/session", &A::GetSession},
      {"GET", "/api/v1/sessions", &A::ListSessions},
      {"DELETE", "/api/v1/sessions/{session}", &A::DeleteSession},
      {"GET", "/api/v1/shares", &A::ListShares},
      {"POST", "/api/v1/shares", &A::PostShare},
      {"DELETE", "/api/v1/shares", &A::DeleteShare},
      {"POST", "/api/v1/projects", &A::PostProject},
      {"GET", "/api/v1/projects", &A::ListProjects},
      {"GET", "/api/v1/projects/{name}", &A::GetProject},
      {"PATCH", "/api/v1/projects/{name}", &A::PatchProject},
      {"DELETE", "/api/v1/projects/{name}", &A::DeleteProject},
      {"POST", "/api/v1/secrets", &A::PostSecret},
      {"GET", "/api/v1/secrets", &A::ListSecrets},
      {"DELETE", "/api/v1/secrets/{name}", &A::DeleteSecret},
      {"GET", "/api/v1/images", &A::ListImages},
      {"POST", "/api/v1/images/import", &A::PostImageImport},
      {"POST", "/api/v1/images/pull", &A::PostImagePull},
      {"POST", "/api/v1/images/build", &A::PostImageBuild},
      {"POST", "/api/v1/images/prune", &A::PostImagePrune},
      {"GET", "/api/v1/images/{name}", &A::GetImage},
      {"DELETE", "/api/v1/images/{name}", &A::DeleteImage},
      {"POST", "/api/v1/runs/{run}/open", &A::PostOpen},
      {"GET", "/api/v1/doctor", &A::GetDoctor},
      {"POST", "/api/v1/shutdown", &A::PostShutdown},
      {"POST", "/api/v1/reload", &A::PostReload},
      {"GET", "/metrics", &A::GetMetrics},
      {"GET", "/api/v1/openapi.json", &A::GetOpenApi},
  };
  return routes;
}

std::vector<std::pair<std::string, std::string>> ApiServer::RoutePatterns() {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& r : RouteDefs()) out.emplace_back(r.method, r.pattern);
  return out;
}

Status ApiServer::AddRoutes() {
  for (const auto& r : RouteDefs()) RETURN_IF_ERROR(router_.Add(r.method, r.pattern, r.handler));
  return Status::OK();
}

// data/openapi.yaml as JSON, converted once.
void ApiServer::GetOpenApi(ApiCall& call) {
  static const Result<Json> doc = YamlTextToJson(FindEmbedded("openapi.yaml"), "openapi.yaml");
  if (!doc.ok()) return call.Reply(doc.status());
  call.Reply(*doc);
}

Status ApiServer::CheckDaemonHost(const net::HttpRequest& req) const {
  std::vector<std::string> allowed = opts_.allowed_hosts;
  allowed.push_back(opts_.host);
  if (DaemonHostAllowed(req.Header("Host"), allowed)) return Status::OK();
  std::string shown(req.Header("Host").substr(0, 100));
  for (char& ch : shown)
    if (ch < 0x20 || ch >= 0x7f) ch = '?';
  return Status::Msg(Code::kPermissionDenied, "api.host_not_allowed",
                     {{"host", shown}, {"config", daemon_.paths().home + "/config.yaml"}});
}

void ApiServer::Handle(net::HttpRequest req, std::unique_ptr<net::Responder> res) {
  // 1. A request for a run's origin (<run>.localhost, ...) goes to the proxy
  //    here, before anything below: the rest is the daemon's own origin.
  // 2. The daemon's own origin answers only to its own names (DNS rebinding).
  if (!req.peer) {
    if (auto o = ParseRunOrigin(req.Header("Host"), origin_bases_)) {
      return HandleRunOrigin(std::move(req), std::move(res), *o);
    }
    if (Status host = CheckDaemonHost(req); !host.ok()) {
      net::HttpResponse r = ErrorResponse(host);
      r.status = 421;  // Misdirected Request: not a name this server answers to
      res->Send(std::move(r));
      return;
    }
  }
  // 3. The web UI's pages authenticate by themselves (a login code, a cookie).
  if (IsUiPath(req.path)) {
    HandleUi(req, std::move(res));
    return;
  }
  // 4. A Prometheus scrape from loopback, when the config opens /metrics to them.
  if (OpenMetricsScrape(req)) {
    res->Send(MetricsResponse());
    return;
  }
  // 5. The API: who is calling, then (cookies only) CSRF and Origin.
  int64_t retry_after_s = 0;
  auto auth = auth_->Authenticate(req, &retry_after_s);
  if (!auth.ok()) {
    net::HttpResponse r = ErrorResponse(auth.status());
    if (retry_after_s > 0) {
      r.headers.emplace_back("Retry-After", std::to_string(retry_after_s));
    } else if (auth.status().IsPermissionDenied()) {
      r.status = 401;  // RFC 6750: which credential, and that this one is no good
      bool presented = !req.Header("Authorization").empty();
      r.headers.emplace_back(
          "WWW-Authenticate",
          presented ? R"(Bearer realm="lathe", error="invalid_token")" : R"(Bearer realm="lathe")");
    }
    res->Send(std::move(r));
    return;
  }
  if (Status csrf = auth_->CheckSessionRequest(req, *auth, opts_.tls_on()); !csrf.ok()) {
    res->Send(ErrorResponse(csrf));
    return;
  }
  // 6. The route.
  const Route* route = nullptr;
  std::string routed = RoutingPath(req);  // the params' views point into it
  net::RouteMatch m = router_.Find(req.method, routed, &route);
  std::replace(routed.begin(), routed.end(), kSlashInSegment, '/');
  if (m.kind == net::RouteMatch::Kind::kNotFound) {
    res->Send(ErrorResponse(Status::Msg(Code::kNotFound, "api.no_route",
                                        {{"method", req.method}, {"path", req.path}})));
    return;
  }
  if (m.kind == net::RouteMatch::Kind::kWrongMethod) {
    net::HttpResponse r = ErrorResponse(
        Status::Msg(Code::kInvalidArgument, "api.bad_method",
                    {{"method", req.method}, {"path", req.path}, {"allowed", m.allow}}));
    r.status = 405;
    r.headers.emplace_back("Allow", m.allow);
    res->Send(std::move(r));
    return;
  }
  ApiCall call{req, auth->caller, *auth, m.params, std::move(res)};
  (this->**route)(call);
}

bool ApiServer::KeepAlive::Tick(net::ResponseStream& s) {
  constexpr int64_t kQuietMs = 15000;
  constexpr int64_t kCheckMs = 5000;
  int64_t now = os::RealClock().MonotonicMs();
  if (last_ms == 0) last_ms = now;
  if (last_check_ms == 0) last_check_ms = now;
  if (now - last_check_ms >= kCheckMs) {
    last_check_ms = now;
    if (!auth_.StillValid(who_)) {
      s.Write(net::SseEvent(
          "error",
          StatusToJson(Status::Msg(Code::kPermissionDenied, "api.credential_ended")).dump()));
      return false;
    }
    if (allowed_ && !allowed_()) {
      s.Write(net::SseEvent(
          "error", StatusToJson(Status::Msg(Code::kPermissionDenied, "api.access_ended")).dump()));
      return false;
    }
  }
  if (now - last_ms < kQuietMs) return true;
  last_ms = now;
  return s.Write(net::kSseKeepAlive);
}

std::function<bool()> ApiServer::StillReads(const Authenticated& auth, const std::string& run_id) {
  if (auth.caller.admin) return {};
  return [this, caller = auth.caller, run_id] {
    return daemon_.Access(caller, run_id, daemon::AccessAction::kRead).ok();
  };
}

void ApiServer::FollowEvents(std::string run_id, int64_t after, const Authenticated& auth,
                             net::ResponseStream& stream) {
  net::ResponseStream* s = &stream;
  KeepAlive keep_alive(*auth_, auth, StillReads(auth, run_id));
  while (!stopping_ && !s->ClientGone()) {
    bool finished = !run_id.empty() && daemon_.IsFinished(run_id);
    auto events = daemon_.Events(run_id, after);
    if (!events.ok()) break;
    std::string out;
    for (const auto& e : *events) {
      out += net::SseEvent(e.type, EventJson(e).dump(), e.id);
      after = e.id;
    }
    if (!out.empty() && !s->Write(out)) break;
    if (finished && events->empty()) {
      s->Write(net::SseEvent("end", Json{{"run", run_id}}.dump()));
      break;
    }
    if (!keep_alive.Tick(*s)) break;
    daemon_.WaitForChange(kStreamPollMs * 5);
  }
  s->Close();
}

void ApiServer::FollowRunChanges(const Authenticated& auth, net::ResponseStream& stream) {
  net::ResponseStream* s = &stream;
  KeepAlive keep_alive(*auth_, auth);
  auto after = daemon_.LatestEventId();
  int64_t count = -1;
  while (after.ok() && !stopping_ && !s->ClientGone()) {
    auto events = daemon_.Events("", *after);
    if (!events.ok()) break;
    std::string out;
    for (const auto& e : *events) {
      *after = e.id;
      if (e.type != "state") continue;
      // What every caller may see of any run: its id and its state.
      out += net::SseEvent("run", Json{{"id", e.run_id}, {"state", e.data.value("to", "")}}.dump(),
                           e.id);
    }
    if (auto total_all = daemon_.CountRuns(); total_all.ok()) {
      if (count >= 0 && *total_all < count) {
        out += net::SseEvent("removed", Json{{"total_all", *total_all}}.dump());
      }
      count = *total_all;
    }
    if (!out.empty() && !s->Write(out)) break;
    if (!keep_alive.Tick(*s)) break;
    daemon_.WaitForChange(kStreamPollMs * 5);
  }
  s->Close();
}

}  // namespace lathe::api

#include "lathe/gateway/front.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <map>
#include <mutex>
#include <random>
#include <shared_mutex>
#include <thread>
#include <vector>

#include <spdlog/spdlog.h>

#include "lathe/common/json.h"
#include "lathe/common/owned_name.h"
#include "lathe/common/spin_lock.h"
#include "lathe/gateway/balancer.h"
#include "lathe/gateway/front_auth.h"
#include "lathe/gateway/front_metrics.h"
#include "lathe/gateway/front_routes.h"
#include "lathe/gateway/health_probe.h"
#include "lathe/gateway/hold_queue.h"
#include "lathe/gateway/replica_load.h"
#include "lathe/os/files.h"
#include "lathe/os/identity.h"
#include "lathe/os/process.h"

namespace lathe::gateway {
namespace {

constexpr size_t kMaxRoutesBytes = 64 << 20;
// Connections of the pool kept for the admin socket (the daemon's /status).
constexpr size_t kAdminConnections = 16;
// A routes.json changed this recently is read again even when its stat looks
// the same (timestamps are as coarse as the kernel's, os/files.h).
constexpr int64_t kRecentMtimeNs = 2'000'000'000;
// A replica's /metrics and model metadata are read up to this size.
constexpr size_t kMaxReplicaMetricsBytes = 4 << 20;
constexpr size_t kMaxMetadataBytes = 1 << 20;

std::string Shown(std::string_view s) {
  constexpr size_t kShown = 128;
  std::string out;
  for (char c : s.substr(0, kShown)) out += (c >= 0x20 && c < 0x7f) ? c : '?';
  if (s.size() > kShown) out += "...";
  return out;
}

// The error body of every answer (common/json.h: the daemon's and `lathe
// serve`'s too), with both languages; `error` is the English text.
net::HttpResponse ErrorResponse(int code, const Status& s, net::Headers headers = {}) {
  return net::HttpResponse{code, "application/json", std::move(headers),
                           StatusToJson(s).dump(-1, ' ', false, Json::error_handler_t::replace)};
}

// The answer for an error of the proxy (a replica that failed): the proxy's
// ids, which speak of runs and sockets, become the front's.
net::HttpResponse ProxyErrorPage(const Status& s) {
  const std::string& id = s.msg_id();
  auto reason = [&] {
    for (const auto& a : s.args()) {
      if (a.key == "reason") return a.value;
    }
    return s.message();
  };
  if (id == "proxy.busy") {
    return ErrorResponse(503, Status::Msg(s.code(), "gateway.busy"), {{"Retry-After", "1"}});
  }
  if (id == "proxy.stopping") {
    return ErrorResponse(503, Status::Msg(s.code(), "gateway.stopping"), {{"Retry-After", "1"}});
  }
  if (id == "proxy.timeout") {
    return ErrorResponse(504, Status::Msg(s.code(), "gateway.replica_timeout"));
  }
  if (id == "proxy.wrong_owner") {
    return ErrorResponse(502, Status::Msg(s.code(), "gateway.replica_wrong_owner"));
  }
  if (id == "proxy.unreachable") {
    return ErrorResponse(502, Status::Msg(s.code(), "gateway.replica_unreachable"));
  }
  if (id == "proxy.bad_response") {
    return ErrorResponse(
        502, Status::Msg(s.code(), "gateway.replica_bad_answer", {{"reason", reason()}}));
  }
  return ErrorResponse(502,
                       Status::Msg(s.code(), "gateway.replica_failed", {{"reason", reason()}}));
}

std::function<double()> NewRandom() {
  return [rng = std::mt19937_64(std::random_device{}())]() mutable {
    return std::uniform_real_distribution<double>(0.0, 1.0)(rng);
  };
}

class FrontImpl final : public Front {
 public:
  FrontImpl(FrontOptions o, os::Clock& clock)
      : opts_(std::move(o)),
        clock_(clock),
        routes_path_(opts_.dir + "/routes.json"),
        admin_path_(opts_.dir + "/admin.sock"),
        proxy_(opts_.proxy, ProxyErrorPage) {}
  ~FrontImpl() override { Stop(); }

  Status Bind() {
    net::ServerOptions so;
    so.io_threads = opts_.io_threads;
    so.loop_per_thread = true;  // its handlers never block (net/http_server.h)
    so.server_name = "lathe-gateway";
    // One client must not be able to take every connection (or every
    // descriptor): each holds at most its share, the rest stay for others.
    const uint64_t open_files = os::RaiseOpenFileLimit(kFrontOpenFiles);
    so.max_connections =
        opts_.max_connections > 0 ? opts_.max_connections : ClientConnectionBudget(open_files);
    so.max_connections_per_address = opts_.max_connections_per_client;
    so.max_connections_per_loopback_user = opts_.max_connections_per_client;
    so.max_tcp_connections = so.max_connections > 4 * kAdminConnections
                                 ? so.max_connections - kAdminConnections
                                 : so.max_connections;
    so.newcomer_connections = std::min(opts_.newcomer_connections, so.max_connections / 4);
    spdlog::info("gateway: up to {} client connections, {} per client ({} open files)",
                 so.max_connections, opts_.max_connections_per_client, open_files);
    auto server = net::HttpServer::Create(
        so, [this](net::HttpRequest req, std::unique_ptr<net::Responder> res) {
          Handle(std::move(req), std::move(res));
        });
    if (!server.ok()) return server.status();
    server_ = std::move(*server);
    Result<int> port = opts_.tls ? server_->ListenTls(opts_.host, opts_.port, *opts_.tls)
                                 : server_->ListenTcp(opts_.host, opts_.port);
    if (!port.ok()) return port.status();
    port_ = *port;
    return server_->ListenUnix(admin_path_, 0600);
  }

  int port() const override { return port_; }
  std::string admin_socket() const override { return admin_path_; }

  Status Start() override {
    if (started_) return Status::FailedPrecondition("the front was started already");
    started_ = true;
    started_ms_ = clock_.NowMs();
    ReloadRoutes();
    RETURN_IF_ERROR(server_->Start());
    ticker_ = std::thread([this] { Tick(); });
    return Status::OK();
  }

  void Stop() override {
    if (stopped_.exchange(true)) return;
    // 1. No new connections; requests in flight (held ones too, which the
    //    ticker and the probes may still release) get drain_ms.
    if (server_) server_->Stop(opts_.drain_ms);
    {
      std::lock_guard<std::mutex> lock(tick_mu_);
      stopping_ = true;
    }
    tick_cv_.notify_all();
    if (ticker_.joinable()) ticker_.join();
    // 2. Probes end; what is still held gets its answer (dropped if the
    //    server is gone).
    std::vector<std::shared_ptr<Prober>> probers;
    {
      std::lock_guard<std::mutex> lock(probers_mu_);
      for (auto& [key, p] : probers_) probers.push_back(p);
      probers_.clear();
      probers.insert(probers.end(), retired_.begin(), retired_.end());
      retired_.clear();
    }
    for (auto& p : probers) p->Signal();
    for (auto& p : probers) p->thread.join();
    for (auto& [name, dep] : Table()) {
      std::vector<Held> held;
      {
        std::lock_guard lock(dep->mu);
        held = dep->held.TakeAll();
      }
      for (auto& h : held) {
        Answer(*dep, std::move(h.res), h.start_us,
               ErrorResponse(503, Status::Msg(Code::kUnavailable, "gateway.stopping"),
                             {{"Retry-After", "1"}}));
      }
    }
    proxy_.Stop();
  }

 private:
  struct Held {
    net::HttpRequest req;
    std::unique_ptr<net::Responder> res;
    int64_t start_us = 0;
  };

  // What a replica said of itself: its load from its /metrics (the last
  // read; none when it has no such figure) and its model metadata (read
  // once, when it first answered).
  struct Report {
    std::optional<ReplicaLoad> load;
    Json metadata;  // {"inputs": [...], "outputs": [...]}; null until read
  };

  // One deployment: its route and everything measured about it.
  struct Deployment {
    SpinLock mu;  // short sections only, shared by the loops (common/spin_lock.h)
    Route route;  // guarded by mu (as all below)
    Balancer balancer{NewRandom()};
    HoldQueue<Held> held;
    RequestWindow window;
    int64_t requests = 0;
    int64_t errors = 0;
    int64_t in_flight = 0;
    bool removed = false;  // gone from routes.json
    // Keys the routes held and no longer do (revoked since this front
    // started), so that their holders are told so (ExplainKeyRefusal).
    std::vector<RouteKey> gone_keys;
    // What each replica says of itself, by replica id (its prober's).
    std::map<std::string, Report> reports;
    // Each replica as the proxy's upstream, by replica id: made when the
    // routes change, not for every request.
    std::map<std::string, std::shared_ptr<const net::PreparedUpstream>, std::less<>> upstreams;
  };
  using DeploymentPtr = std::shared_ptr<Deployment>;
  using TableMap = std::map<std::string, DeploymentPtr, std::less<>>;

  // The probe loop of one replica (a thread of its own).
  struct Prober {
    std::thread thread;
    std::mutex mu;
    std::condition_variable cv;
    bool stop = false;  // guarded by mu
    std::atomic<bool> finished{false};
    void Signal() {
      {
        std::lock_guard<std::mutex> lock(mu);
        stop = true;
      }
      cv.notify_all();
    }
  };

  // ---- requests ----

  void Handle(net::HttpRequest req, std::unique_ptr<net::Responder> res) {
    if (req.peer) return Admin(req, std::move(res));
    const int64_t start_us = clock_.MonotonicUs();
    // 1. /d/NAME/REST?Q: the deployment's name and what the replica gets.
    std::string_view t = req.target;
    if (t.substr(0, 3) != "/d/") {
      return res->Send(ErrorResponse(
          404, Status::Msg(Code::kNotFound, "gateway.not_found", {{"path", Shown(req.path)}})));
    }
    // /d/OWNER/NAME/ (its ref), else /d/NAME/ (an older deployment's key,
    // or the name only one deployment has).
    size_t end = t.find_first_of("/?", 3);
    std::string_view raw_name = t.substr(3, end == std::string_view::npos ? end : end - 3);
    bool escaped = raw_name.find('%') != std::string_view::npos;
    std::string decoded = escaped ? net::PercentDecode(raw_name, false) : std::string();
    std::string_view name = escaped ? std::string_view(decoded) : raw_name;
    DeploymentPtr dep;
    if (end != std::string_view::npos && t[end] == '/') {
      const size_t end2 = t.find_first_of("/?", end + 1);
      const std::string_view raw2 = t.substr(0, end2).substr(3);
      const std::string two = net::PercentDecode(raw2, false);
      if ((dep = LookupRef(two))) {  // two segments: OWNER/NAME
        end = end2;
        raw_name = raw2;
        escaped = true;  // the decoded path is made again below
        decoded = two;
        name = decoded;
      }
    }
    std::vector<std::string> several;
    if (!dep) dep = LookupName(name, &several);
    // Several of that name: the one whose key the request carries.
    if (!dep && several.size() > 1) dep = ByKey(several, req.Header("Authorization"));
    if (!dep && several.size() > 1) {
      std::string refs;
      for (const auto& r : several) refs += (refs.empty() ? "" : ", ") + ("/d/" + r + "/");
      return res->Send(
          ErrorResponse(409, Status::Msg(Code::kFailedPrecondition, "gateway.ambiguous_deployment",
                                         {{"name", Shown(name)}, {"urls", refs}})));
    }
    if (!dep) {
      return res->Send(ErrorResponse(404, Status::Msg(Code::kNotFound, "gateway.unknown_deployment",
                                                      {{"name", Shown(name)}})));
    }
    if (end == std::string_view::npos || t[end] == '?') {
      std::string to = "/d/" + std::string(raw_name) + "/";
      if (!req.query.empty()) to += "?" + req.query;
      return Answer(*dep, std::move(res), start_us,
                    net::HttpResponse{308, "", {{"Location", to}}, ""});
    }
    // What the replica gets: the target after /d/NAME, in place. The decoded
    // path loses the same prefix unless the name itself was escaped.
    const size_t prefix = end;
    req.target.erase(0, prefix);
    if (!escaped && req.path.size() >= prefix) {
      req.path.erase(0, prefix);
    } else {
      req.path =
          net::PercentDecode(std::string_view(req.target).substr(0, req.target.find('?')), false);
    }
    // 2. The key, and 3. the replica (one lock of the deployment for both).
    Dispatch(dep, std::move(req), std::move(res), start_us, /*check_key=*/true);
  }

  // The keys `dep` had that `next` no longer has, kept (the newest 256).
  static void RememberGoneKeys(Deployment& dep, const std::vector<RouteKey>& next) {
    constexpr size_t kKeptGoneKeys = 256;
    for (const RouteKey& k : dep.route.keys) {
      const bool kept =
          std::any_of(next.begin(), next.end(), [&](const RouteKey& n) { return n.id == k.id; });
      if (!kept) dep.gone_keys.push_back(k);
    }
    if (dep.gone_keys.size() > kKeptGoneKeys) {
      dep.gone_keys.erase(dep.gone_keys.begin(),
                          dep.gone_keys.end() - static_cast<long>(kKeptGoneKeys));
    }
  }

  // A refused key's refusal, with what the front knows of it elsewhere:
  // revoked here, or another deployment's (off the request's fast path).
  Status ExplainRefusal(Deployment& dep, const Status& auth, std::string_view authorization) {
    if (auth.msg_id() != "deploy_key.invalid") return auth;
    std::vector<RouteKey> gone;
    Route route;
    {
      std::lock_guard lock(dep.mu);
      gone = dep.gone_keys;
      route.name = dep.route.name;
    }
    std::vector<std::pair<std::string, std::vector<RouteKey>>> others;
    for (const auto& [name, other] : Table()) {
      if (other.get() == &dep) continue;
      std::lock_guard lock(other->mu);
      others.emplace_back(name, other->route.keys);
    }
    return ExplainKeyRefusal(auth, route, authorization, gone, others);
  }

  // Checks the key (check_key: a request that was not held before), then
  // forwards to a replica, holds, or answers 401 or 503.
  void Dispatch(const DeploymentPtr& dep, net::HttpRequest req, std::unique_ptr<net::Responder> res,
                int64_t start_us, bool check_key = false) {
    std::shared_ptr<const net::PreparedUpstream> up;
    std::string replica;
    Status refused;
    Status auth;
    bool idempotent = true;
    {
      std::lock_guard lock(dep->mu);
      const std::string& name = dep->route.name;
      idempotent = dep->route.idempotent;
      const RouteReplica* pick = nullptr;
      if (check_key) {
        const int64_t now_ms = dep->route.is_public ? 0 : clock_.NowMs();  // keys' expiry
        auth = CheckDeployKey(dep->route, req.Header("Authorization"), now_ms);
      }
      if (!auth.ok()) {
        // answered below
      } else if (dep->removed) {
        refused = Status::Msg(Code::kNotFound, "gateway.unknown_deployment", {{"name", name}});
      } else if ((pick = dep->balancer.Choose())) {
        ++dep->in_flight;
        replica = pick->id;
        up = UpstreamOf(*dep, *pick);
      } else if (dep->route.hold &&
                 !dep->held.Full(static_cast<size_t>(std::max<int64_t>(0, dep->route.max_held)))) {
        dep->held.Hold(Held{std::move(req), std::move(res), start_us},
                       clock_.MonotonicMs() + dep->route.hold_ms);
        return;
      } else if (dep->route.hold) {
        refused = Status::Msg(Code::kUnavailable, "gateway.hold_full",
                              {{"name", name}, {"max", std::to_string(dep->route.max_held)}});
      } else {
        refused = Status::Msg(Code::kUnavailable, "gateway.no_replica", {{"name", name}});
      }
    }
    if (!auth.ok()) {
      auth = ExplainRefusal(*dep, auth, req.Header("Authorization"));
      return Answer(*dep, std::move(res), start_us,
                    ErrorResponse(401, auth, {{"WWW-Authenticate", "Bearer"}}));
    }
    if (!up) {
      const int code = refused.IsNotFound() ? 404 : 503;
      net::Headers h;
      if (code == 503) h.emplace_back("Retry-After", "1");
      return Answer(*dep, std::move(res), start_us, ErrorResponse(code, refused, h));
    }
    Forward(dep, idempotent, std::move(replica), std::move(up), std::move(req), std::move(res),
            start_us);
  }

  // The prepared upstream of a replica the balancer picked (requires dep.mu).
  std::shared_ptr<const net::PreparedUpstream> UpstreamOf(const Deployment& dep,
                                                          const RouteReplica& r) const {
    auto it = dep.upstreams.find(r.id);
    return it != dep.upstreams.end() ? it->second : net::Prepare(UpstreamFor(dep.route.name, r));
  }

  net::Upstream UpstreamFor(const std::string& name, const RouteReplica& r) const {
    net::Upstream up;
    up.kind = net::Upstream::Kind::kUnix;
    up.socket = r.socket;
    up.owner_uid = r.uid;
    up.add_headers = {{"X-Forwarded-Prefix", "/d/" + name}};
    up.add_response_headers = {{"Lathe-Model-Version", r.version}, {"Lathe-Replica", r.id}};
    return up;
  }

  void Forward(const DeploymentPtr& dep, bool idempotent, std::string replica,
               std::shared_ptr<const net::PreparedUpstream> up, net::HttpRequest req,
               std::unique_ptr<net::Responder> res, int64_t start_us) {
    // What the hooks share (they run one after the other, on the thread that
    // serves the request): one allocation, kept by the hooks, which capture
    // a plain pointer to it.
    struct Attempts {
      FrontImpl* front;
      DeploymentPtr dep;
      std::string current;  // the replica the current attempt went to
      int64_t start_us;
      bool idempotent;
      bool retried = false;
    };
    auto kept =
        std::make_shared<Attempts>(Attempts{this, dep, std::move(replica), start_us, idempotent});
    Attempts* at = kept.get();
    net::ForwardHooks hooks;
    hooks.repeatable = idempotent;
    hooks.retry = [at](const Status& why, const net::Upstream&) -> std::optional<net::Upstream> {
      Deployment& d = *at->dep;
      std::lock_guard lock(d.mu);
      d.balancer.RequestFailed(at->current, why.message(), at->front->clock_.NowMs());
      spdlog::warn("gateway: deployment {}: replica {} failed a request before answering: {}",
                   d.route.name, at->current, why.message());
      if (!at->idempotent || at->retried) return std::nullopt;
      const RouteReplica* next = d.balancer.Choose(at->current);
      if (next == nullptr) return std::nullopt;
      d.balancer.Finish(at->current, true);
      at->current = next->id;
      at->retried = true;
      return at->front->UpstreamOf(d, *next)->up;
    };
    hooks.done = [at](const net::ForwardResult& r) {
      FrontImpl& f = *at->front;
      const bool error = !r.error.ok() || r.status >= 500;
      const int64_t now_us = f.clock_.MonotonicUs();
      const double ms = static_cast<double>(now_us - at->start_us) / 1000.0;
      Deployment& d = *at->dep;
      std::string name;
      {
        // One lock for all of it: the front's loops share the deployment.
        std::lock_guard lock(d.mu);
        d.balancer.Finish(at->current, error);
        --d.in_flight;
        name = f.CountLocked(d, ms, error, now_us / 1000);
      }
      f.metrics_.Record(name, r.status, ms / 1000.0);
    };
    hooks.keep = std::move(kept);
    proxy_.Forward(std::move(req), std::move(up), std::move(res), std::move(hooks));
  }

  // Sends the front's own answer for a request of `dep` and counts it.
  void Answer(Deployment& dep, std::unique_ptr<net::Responder> res, int64_t start_us,
              net::HttpResponse r) {
    const int code = r.status;
    res->Send(std::move(r));
    Count(dep, code, start_us, code >= 500);
  }

  void Count(Deployment& dep, int code, int64_t start_us, bool error) {
    const int64_t now_us = clock_.MonotonicUs();
    const double ms = static_cast<double>(now_us - start_us) / 1000.0;
    std::string name;
    {
      std::lock_guard lock(dep.mu);
      name = CountLocked(dep, ms, error, now_us / 1000);
    }
    metrics_.Record(name, code, ms / 1000.0);
  }
  // Requires dep.mu. `now_ms`: the monotonic clock when the request ended.
  // Returns the deployment's name, for the metrics.
  std::string CountLocked(Deployment& dep, double ms, bool error, int64_t now_ms) {
    ++dep.requests;
    if (error) ++dep.errors;
    dep.window.Add(now_ms, ms);
    return dep.route.name;
  }

  // ---- the admin socket ----

  void Admin(const net::HttpRequest& req, std::unique_ptr<net::Responder> res) {
    if (req.peer->uid != 0 && req.peer->uid != os::EffectiveUid()) {
      return res->Send(
          ErrorResponse(403, Status::Msg(Code::kPermissionDenied, "gateway.admin_forbidden")));
    }
    if (req.method == "GET" && req.path == "/status") {
      return res->Send(net::HttpResponse{200, "application/json", {}, StatusJson().dump()});
    }
    if (req.method == "POST" && req.path == "/reload") {
      // The daemon wrote routes.json and needs them in force now (a key
      // just printed works at once): read at once, not at the next tick.
      ReloadRoutes();
      int64_t generation = 0;
      {
        std::shared_lock lock(table_mu_);
        generation = generation_;
      }
      return res->Send(
          net::HttpResponse{200, "application/json", {}, Json{{"generation", generation}}.dump()});
    }
    if (req.method == "GET" && req.path == "/metrics") {
      return res->Send(net::HttpResponse{
          200, "text/plain; version=0.0.4; charset=utf-8", {}, metrics_.Render(Gauges())});
    }
    res->Send(ErrorResponse(
        404, Status::Msg(Code::kNotFound, "gateway.admin_not_found", {{"path", Shown(req.path)}})));
  }

  Json StatusJson() {
    Json deployments = Json::array();
    const int64_t now = clock_.MonotonicMs();
    for (const auto& [name, dep] : Table()) {
      // The window's latencies are copied under the lock and their
      // percentiles computed after it: the loops take this lock for every
      // request, and must not wait for a sort.
      std::vector<double> latencies;
      double rps = 0;
      {
        std::lock_guard lock(dep->mu);
        dep->window.AppendLatencies(now, latencies);
        rps = dep->window.Rps(now);
      }
      const double p50 = RequestWindow::Percentile(latencies, 0.5);
      const double p99 = RequestWindow::Percentile(latencies, 0.99);
      std::lock_guard lock(dep->mu);
      Json replicas = Json::array();
      for (const ReplicaState& r : dep->balancer.replicas()) {
        replicas.push_back({{"id", r.route.id},
                            {"version", r.route.version},
                            {"healthy", r.healthy},
                            {"draining", r.route.draining},
                            {"in_flight", r.in_flight},
                            {"requests", r.requests},
                            {"errors", r.errors},
                            {"last_probe_ms", r.last_probe_ms},
                            {"last_error", r.last_error}});
        auto rep = dep->reports.find(r.route.id);
        if (rep == dep->reports.end()) continue;
        if (rep->second.load) {
          replicas.back()["queued"] = rep->second.load->queued;
          replicas.back()["running"] = rep->second.load->running;
        }
        if (!rep->second.metadata.is_null()) replicas.back()["metadata"] = rep->second.metadata;
      }
      deployments.push_back({{"name", name},
                             {"requests", dep->requests},
                             {"errors", dep->errors},
                             {"in_flight", dep->in_flight},
                             {"held", dep->held.size()},
                             {"rps", rps},
                             {"p50_ms", p50},
                             {"p99_ms", p99},
                             {"replicas_wanted", dep->route.replicas_wanted},
                             {"replicas_healthy", dep->balancer.healthy_count()},
                             {"replicas", replicas}});
    }
    std::shared_lock lock(table_mu_);
    return Json{{"generation", generation_},
                {"started_ms", started_ms_},
                {"pid", os::SelfPid()},
                {"port", port_},
                {"deployments", deployments}};
  }

  std::vector<DeploymentGauges> Gauges() {
    std::vector<DeploymentGauges> out;
    for (const auto& [name, dep] : Table()) {
      std::lock_guard lock(dep->mu);
      out.push_back({name, dep->in_flight, static_cast<int64_t>(dep->held.size()),
                     dep->route.replicas_wanted, dep->balancer.healthy_count()});
    }
    return out;
  }

  // ---- routes ----

  DeploymentPtr Lookup(std::string_view name) {
    std::shared_lock lock(table_mu_);
    auto it = table_.find(name);
    return it == table_.end() ? nullptr : it->second;
  }

  // The deployment whose ref (OWNER/NAME) is `ref`.
  DeploymentPtr LookupRef(std::string_view ref) {
    std::shared_lock lock(table_mu_);
    auto r = refs_.find(ref);
    auto it = table_.find(r != refs_.end() ? std::string_view(r->second) : ref);
    return it == table_.end() ? nullptr : it->second;
  }

  // Of the deployments `refs`, the one (not public) whose live key
  // `authorization` is; null when none or several are.
  DeploymentPtr ByKey(const std::vector<std::string>& refs, std::string_view authorization) {
    if (authorization.empty()) return nullptr;
    DeploymentPtr found;
    const int64_t now_ms = clock_.NowMs();
    for (const auto& r : refs) {
      DeploymentPtr dep = LookupRef(r);
      if (!dep) continue;
      std::lock_guard dl(dep->mu);
      if (dep->route.is_public || !CheckDeployKey(dep->route, authorization, now_ms).ok()) continue;
      if (found) return nullptr;
      found = dep;
    }
    return found;
  }

  // The deployment keyed `name` (an older one's bare key), else the one
  // deployment of that name; when several have it, null and their refs.
  DeploymentPtr LookupName(std::string_view name, std::vector<std::string>* several) {
    std::shared_lock lock(table_mu_);
    if (auto it = table_.find(name); it != table_.end()) return it->second;
    auto s = shorts_.find(name);
    if (s == shorts_.end()) return nullptr;
    if (s->second.size() > 1) {
      *several = s->second;
      return nullptr;
    }
    auto it = refs_.find(s->second.front());
    auto d = table_.find(it != refs_.end() ? std::string_view(it->second)
                                           : std::string_view(s->second.front()));
    return d == table_.end() ? nullptr : d->second;
  }

  TableMap Table() {
    std::shared_lock lock(table_mu_);
    return table_;
  }

  // Reads routes.json when it changed (ticker thread, and Start).
  void ReloadRoutes() {
    std::lock_guard reload(reload_mu_);  // the ticker's, and an admin's POST /reload
    auto stamp = os::StatFile(routes_path_);
    if (!stamp.ok()) {
      if (stamp.status().IsNotFound()) {
        if (have_routes_file_ || !loaded_once_) {
          have_routes_file_ = false;
          last_text_.clear();
          Apply(Routes{});
        }
      } else {
        LogRoutesError(stamp.status().ToString());
      }
      loaded_once_ = true;
      return;
    }
    const bool recent = clock_.NowMs() * 1'000'000 - stamp->mtime_ns < kRecentMtimeNs;
    if (have_routes_file_ && *stamp == stamp_ && !recent) return;
    auto text = os::ReadFileUpTo(routes_path_, kMaxRoutesBytes);
    // Unread (e.g. replaced meanwhile): the same stamp is tried again.
    if (!text.ok()) return LogRoutesError(text.status().ToString());
    stamp_ = *stamp;
    if (text->size() > kMaxRoutesBytes) return LogRoutesError("larger than 64 MiB");
    if (have_routes_file_ && *text == last_text_) return;
    if (*text == last_bad_text_) return;  // logged already
    auto routes = ParseRoutes(*text);
    if (!routes.ok()) {
      last_bad_text_ = *text;
      return LogRoutesError(routes.status().message());
    }
    last_bad_text_.clear();
    have_routes_file_ = true;
    loaded_once_ = true;
    last_text_ = std::move(*text);
    spdlog::info("gateway: routes generation {}: {} deployment(s)", routes->generation,
                 routes->deployments.size());
    Apply(std::move(*routes));
  }

  void LogRoutesError(const std::string& what) {
    spdlog::error("gateway: {} not applied, the last good routes stay: {}", routes_path_, what);
  }

  void Apply(Routes routes) {
    std::vector<std::pair<DeploymentPtr, std::vector<Held>>> release, orphans;
    {
      std::lock_guard lock(table_mu_);
      TableMap next;
      std::map<std::string, std::string, std::less<>> refs;
      std::map<std::string, std::vector<std::string>, std::less<>> shorts;
      for (const Route& d : routes.deployments) {
        const std::string ref = d.ref.empty() ? d.name : d.ref;
        if (ref != d.name) refs.emplace(ref, d.name);
        shorts[std::string(ShortName(d.name))].push_back(ref);
      }
      for (Route& d : routes.deployments) {
        auto it = table_.find(d.name);
        DeploymentPtr dep = it != table_.end() ? it->second : std::make_shared<Deployment>();
        {
          std::lock_guard dl(dep->mu);
          dep->balancer.Update(d.replicas, d.traffic);
          dep->upstreams.clear();
          for (const RouteReplica& r : d.replicas) {
            dep->upstreams.emplace(r.id, net::Prepare(UpstreamFor(d.name, r)));
          }
          std::map<std::string, Report> kept;
          for (const RouteReplica& r : d.replicas) {
            auto rep = dep->reports.find(r.id);
            if (rep != dep->reports.end()) kept.insert(*rep);
          }
          dep->reports = std::move(kept);
          RememberGoneKeys(*dep, d.keys);
          dep->route = std::move(d);
          if (dep->held.size() > 0 && dep->balancer.AnyReady()) {
            release.emplace_back(dep, dep->held.TakeAll());
          }
        }
        next.emplace(dep->route.name, dep);
      }
      for (auto& [name, dep] : table_) {
        if (next.count(name) != 0) continue;
        std::lock_guard dl(dep->mu);
        dep->removed = true;
        orphans.emplace_back(dep, dep->held.TakeAll());
      }
      table_ = std::move(next);
      refs_ = std::move(refs);
      shorts_ = std::move(shorts);
      generation_ = routes.generation;
    }
    for (auto& [dep, held] : orphans) {
      for (auto& h : held) Dispatch(dep, std::move(h.req), std::move(h.res), h.start_us);
    }
    for (auto& [dep, held] : release) {
      for (auto& h : held) Dispatch(dep, std::move(h.req), std::move(h.res), h.start_us);
    }
    SyncProbers();
  }

  // ---- probes ----

  // What one prober reads of its replica.
  struct ProbeTarget {
    DeploymentPtr dep;
    RouteReplica replica;
    std::string health_path;
    std::string metrics_path;  // "": not read
  };

  // One prober per (deployment, replica, socket, uid, paths it reads): a
  // change of any of them is a new prober, and a new replica is probed at once.
  void SyncProbers() {
    std::map<std::string, ProbeTarget> want;
    for (const auto& [name, dep] : Table()) {
      std::lock_guard lock(dep->mu);
      for (const ReplicaState& r : dep->balancer.replicas()) {
        std::string key = name + '\n' + r.route.id + '\n' + r.route.socket + '\n' +
                          std::to_string(r.route.uid) + '\n' + dep->route.health_path + '\n' +
                          dep->route.metrics_path + '\n' + r.route.metadata_path;
        want.emplace(std::move(key),
                     ProbeTarget{dep, r.route, dep->route.health_path, dep->route.metrics_path});
      }
    }
    std::lock_guard<std::mutex> lock(probers_mu_);
    if (stopped_) return;
    for (auto it = probers_.begin(); it != probers_.end();) {
      if (want.count(it->first) == 0) {
        it->second->Signal();
        retired_.push_back(it->second);
        it = probers_.erase(it);
      } else {
        ++it;
      }
    }
    for (auto& [key, what] : want) {
      if (probers_.count(key) != 0) continue;
      auto p = std::make_shared<Prober>();
      p->thread = std::thread([this, p, target = what] { ProbeLoop(*p, target); });
      probers_.emplace(key, std::move(p));
    }
  }

  void ProbeLoop(Prober& p, const ProbeTarget& target) {
    const DeploymentPtr& dep = target.dep;
    const RouteReplica& r = target.replica;
    const std::string& path = target.health_path;
    for (;;) {
      auto code = ProbeHealth(r.socket, r.uid, path, opts_.probe_timeout_ms);
      const bool ok = code.ok() && *code == 200;
      std::string why;
      if (!code.ok()) {
        why = code.status().message();
      } else if (!ok) {
        why = Status::Msg(Code::kUnavailable, "gateway.probe_status",
                          {{"path", path}, {"code", std::to_string(*code)}})
                  .message();
      }
      Report report = ReadReport(target, ok);
      std::vector<Held> release;
      {
        std::lock_guard lock(dep->mu);
        Report& kept = dep->reports[r.id];
        kept.load = report.load;
        if (kept.metadata.is_null()) kept.metadata = std::move(report.metadata);
        const bool became = dep->balancer.ProbeResult(r.id, ok, why, clock_.NowMs());
        if (became)
          spdlog::info("gateway: deployment {}: replica {} is healthy", dep->route.name, r.id);
        if (dep->held.size() > 0 && dep->balancer.AnyReady()) release = dep->held.TakeAll();
      }
      for (auto& h : release) {
        Dispatch(dep, std::move(h.req), std::move(h.res), h.start_us);
      }
      std::unique_lock<std::mutex> lock(p.mu);
      if (p.cv.wait_for(lock, std::chrono::milliseconds(opts_.probe_interval_ms),
                        [&] { return p.stop; })) {
        break;
      }
    }
    p.finished = true;
  }

  // The replica's load from its /metrics (when the route names the path and
  // the replica answers with lathe serve's figures), and, while not read yet,
  // its model metadata once it is healthy. What cannot be read is left out.
  Report ReadReport(const ProbeTarget& t, bool healthy) {
    Report out;
    const RouteReplica& r = t.replica;
    if (!t.metrics_path.empty()) {
      auto m = FetchFromReplica(r.socket, r.uid, t.metrics_path, opts_.probe_timeout_ms,
                                kMaxReplicaMetricsBytes);
      if (m.ok() && m->status == 200) out.load = ParseReplicaLoad(m->body);
    }
    if (healthy && !r.metadata_path.empty()) {
      bool have = false;
      {
        std::lock_guard lock(t.dep->mu);
        auto it = t.dep->reports.find(r.id);
        have = it != t.dep->reports.end() && !it->second.metadata.is_null();
      }
      if (!have) {
        auto m = FetchFromReplica(r.socket, r.uid, r.metadata_path, opts_.probe_timeout_ms,
                                  kMaxMetadataBytes);
        if (m.ok() && m->status == 200) {
          auto j = ParseJson(m->body);
          if (j.ok() && j->is_object() && j->contains("inputs") && j->contains("outputs") &&
              (*j)["inputs"].is_array() && (*j)["outputs"].is_array()) {
            out.metadata = {{"inputs", (*j)["inputs"]}, {"outputs", (*j)["outputs"]}};
          }
        }
      }
    }
    return out;
  }

  // ---- the ticker: routes.json, held requests' deadlines, ended probers ----

  void Tick() {
    std::unique_lock<std::mutex> lock(tick_mu_);
    while (!stopping_) {
      lock.unlock();
      ReloadRoutes();
      ExpireHeld();
      JoinFinishedProbers();
      lock.lock();
      tick_cv_.wait_for(lock, std::chrono::milliseconds(opts_.routes_poll_ms),
                        [this] { return stopping_; });
    }
  }

  void ExpireHeld() {
    const int64_t now = clock_.MonotonicMs();
    for (const auto& [name, dep] : Table()) {
      std::vector<Held> expired;
      int64_t hold_ms = 0;
      {
        std::lock_guard lock(dep->mu);
        if (dep->held.size() == 0) continue;
        expired = dep->held.TakeExpired(now);
        hold_ms = dep->route.hold_ms;
      }
      for (auto& h : expired) {
        Answer(*dep, std::move(h.res), h.start_us,
               ErrorResponse(503,
                             Status::Msg(Code::kUnavailable, "gateway.hold_timeout",
                                         {{"name", name}, {"ms", std::to_string(hold_ms)}}),
                             {{"Retry-After", "1"}}));
      }
    }
  }

  void JoinFinishedProbers() {
    std::vector<std::shared_ptr<Prober>> done;
    {
      std::lock_guard<std::mutex> lock(probers_mu_);
      for (auto it = retired_.begin(); it != retired_.end();) {
        if ((*it)->finished) {
          done.push_back(*it);
          it = retired_.erase(it);
        } else {
          ++it;
        }
      }
    }
    for (auto& p : done) p->thread.join();
  }

  // Constant after construction.
  const FrontOptions opts_;
  os::Clock& clock_;
  const std::string routes_path_;
  const std::string admin_path_;

  net::ReverseProxy proxy_;
  FrontMetrics metrics_;
  std::unique_ptr<net::HttpServer> server_;
  int port_ = 0;
  int64_t started_ms_ = 0;
  bool started_ = false;
  std::atomic<bool> stopped_{false};

  std::shared_mutex table_mu_;  // read for every request (Lookup): readers share it
  TableMap table_;              // guarded by table_mu_
  // ref (OWNER/NAME) -> key, where they differ (an older bare key); guarded by table_mu_
  std::map<std::string, std::string, std::less<>> refs_;
  // a deployment's name -> the refs of those that have it; guarded by table_mu_
  std::map<std::string, std::vector<std::string>, std::less<>> shorts_;
  int64_t generation_ = 0;  // guarded by table_mu_

  // The ticker's own (and Start's, before the ticker runs).
  os::FileStamp stamp_;
  bool have_routes_file_ = false;
  bool loaded_once_ = false;
  std::string last_text_, last_bad_text_;

  std::mutex probers_mu_;
  std::map<std::string, std::shared_ptr<Prober>> probers_;  // guarded by probers_mu_
  std::vector<std::shared_ptr<Prober>> retired_;            // guarded by probers_mu_; ending

  std::mutex tick_mu_;
  std::mutex reload_mu_;  // ReloadRoutes: its stamps and texts below
  std::condition_variable tick_cv_;
  bool stopping_ = false;  // guarded by tick_mu_
  std::thread ticker_;
};

}  // namespace

net::ProxyOptions FrontOptions::DefaultProxyOptions() {
  net::ProxyOptions o;
  o.max_workers = 512;  // requests at replicas at once (each holds a worker while it waits)
  o.max_queued = 4096;
  o.max_idle_upstreams = 256;
  o.strip_cookie_prefixes = {"lathe_"};
  return o;
}

Result<std::unique_ptr<Front>> Front::Create(FrontOptions options) {
  if (options.dir.empty()) return Status::InvalidArgument("the front needs a directory");
  os::Clock& clock = options.clock != nullptr ? *options.clock : os::RealClock();
  auto front = std::make_unique<FrontImpl>(std::move(options), clock);
  RETURN_IF_ERROR(front->Bind());
  return std::unique_ptr<Front>(std::move(front));
}

size_t ClientConnectionBudget(uint64_t open_files) {
  constexpr size_t kMinConnections = 128;
  return std::max<size_t>(kMinConnections, static_cast<size_t>(open_files / 2));
}

Status WriteGatewayJson(const std::string& dir, int port, const std::string& admin_socket,
                        int64_t started_ms) {
  Json j = {{"pid", os::SelfPid()},
            {"port", port},
            {"admin_socket", admin_socket},
            {"started_ms", started_ms}};
  return os::WriteFileAtomic(dir + "/gateway.json", j.dump() + "\n", 0644);
}

}  // namespace lathe::gateway

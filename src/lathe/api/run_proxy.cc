// The run origins (api/run_origin.h): who may open a run's ports, and the
// hand-over to the reverse proxy (net/proxy.h). docs/security.md, "Run
// origins", states the rules.
#include <charconv>

#include <fmt/format.h>

#include "lathe/api/host_check.h"
#include "lathe/api/routes.h"
#include "lathe/api/run_origin.h"
#include "lathe/api/run_origin_cache.h"
#include "lathe/api/server.h"
#include "lathe/daemon/notebooks.h"
#include "lathe/net/status_http.h"

#include <spdlog/spdlog.h>

namespace lathe::api {
namespace {

// A page may act on a run's origin only from that same origin: an Origin
// header, when the browser sends one, must name the Host being asked.
bool SameOrigin(const net::HttpRequest& req) {
  std::string_view origin = req.Header("Origin");
  if (origin.empty()) return true;
  std::string_view host = req.Header("Host");
  for (std::string_view scheme : {"http://", "https://"}) {
    if (origin.size() == scheme.size() + host.size() && origin.starts_with(scheme) &&
        net::EqualsIgnoreCase(origin.substr(scheme.size()), host)) {
      return true;
    }
  }
  return false;
}

// The endpoint a run origin names: the run's first one, or the one with
// the origin's port name.
const exec::Endpoint* FindEndpoint(const std::vector<exec::Endpoint>& endpoints,
                                   const std::string& name) {
  for (const auto& e : endpoints) {
    if (name.empty() || e.name == name) return &e;
  }
  return nullptr;
}

// The port of a tcp endpoint's "HOST:PORT" (0 when there is none).
int PortOf(std::string_view address) {
  int port = 0;
  const std::string_view digits = address.substr(address.rfind(':') + 1);
  std::from_chars(digits.data(), digits.data() + digits.size(), port);
  return port;
}

std::string PortNames(const state::RunRecord& r) {
  std::string s;
  for (const auto& p : daemon::ServedPorts(r)) s += (s.empty() ? "" : ", ") + p.name;
  return s.empty() ? "-" : s;
}

}  // namespace

std::vector<std::string> ApiServer::RunOriginBases() const {
  std::vector<std::string> bases = {"localhost"};
  auto is_name = [](const std::string& h) {
    return !IsLoopbackListenHost(h) && h.find_first_not_of("0123456789.:[]") != std::string::npos;
  };
  if (is_name(opts_.host)) bases.push_back(opts_.host);  // a host name, not an address literal
  for (const auto& h : opts_.allowed_hosts) {
    if (is_name(h)) bases.push_back(h);
  }
  return bases;
}

std::string ApiServer::RunOriginUrl(const RunOrigin& o) const {
  return fmt::format("{}://{}:{}/", opts_.tls_on() ? "https" : "http", RunOriginHost(o), port_);
}

std::string ApiServer::MainPortUrl(const state::RunRecord& r) const {
  if (r.spec.ports.empty()) return "";
  return RunOriginUrl(RunOrigin{r.id, "", origin_bases_.empty() ? "localhost" : origin_bases_[0]});
}

Json ApiServer::PortsJson(const state::RunRecord& r) {
  Json out = Json::array();
  const std::string base = origin_bases_.empty() ? "localhost" : origin_bases_[0];
  bool first = true;
  for (const auto& s : daemon_.CheckPorts(r)) {
    Json j = {{"name", s.spec.name},
              {"kind", s.kind},
              {"address", s.address},
              {"env", run::PortEnvName(s.spec)},
              {"url", RunOriginUrl(RunOrigin{r.id, first ? "" : s.spec.name, base})},
              {"state", run::PortStateName(s.check.state)},
              {"listening", s.check.run_listens}};
    if (s.spec.port != 0) j["declared_port"] = s.spec.port;
    Status why = s.check.state == run::PortState::kNotRunning
                     ? run::ExplainNotRunning(r.id, s.spec, run::StateName(r.state))
                     : run::ExplainPort(r.id, s.spec, s.address.empty() ? "-" : s.address, s.check);
    if (!why.ok()) j["error"] = StatusToJson(why);
    out.push_back(std::move(j));
    first = false;
  }
  return out;
}

// GET /_lathe/login?code=CODE[&next=/path] on a run's origin: the code
// (from POST /runs/{run}/open) becomes that origin's own cookie.
void ApiServer::RunOriginLogin(const net::HttpRequest& req, net::Responder& res,
                               const RunOrigin& o) {
  int64_t retry_after_s = 0;
  std::string code = req.QueryParam("code").value_or("");
  auto issued = auth_->RedeemCode(req, code, RunScope(o.run_id), &retry_after_s);
  if (!issued.ok()) {
    const bool refused = issued.status().IsPermissionDenied();
    net::HttpResponse r = ErrorResponse(
        refused ? Status::Msg(Code::kPermissionDenied, "proxy.code_invalid", {{"run", o.run_id}})
                : issued.status());
    if (retry_after_s > 0) r.headers.emplace_back("Retry-After", std::to_string(retry_after_s));
    if (refused) r.status = 401;
    return res.Send(std::move(r));
  }
  std::string next = req.QueryParam("next").value_or("/");
  if (!IsOwnOriginPath(next)) next = "/";  // never a redirect elsewhere
  std::string cookie =
      fmt::format("{}={}; HttpOnly; SameSite=Strict; Path=/; Max-Age={}", kRunCookie,
                  issued->cookie_value, opts_.sessions.absolute_ttl_ms / 1000);
  if (opts_.tls_on()) cookie += "; Secure";
  spdlog::info("api: browser session {} started on run {}'s origin for {} (uid {})",
               issued->record.id, o.run_id, issued->record.user, issued->record.uid);
  net::HttpResponse r{303,
                      "",
                      {{"Location", next},
                       {"Set-Cookie", cookie},
                       {"Cache-Control", "no-store"},
                       {"Referrer-Policy", "no-referrer"}},
                      ""};
  // A run's origin is another site than the page that opened the link (the
  // web UI's, say): a browser leaves a SameSite=Strict cookie off every step
  // of a navigation another site started, the redirect included. Such a
  // navigation gets a page of this origin that moves on by itself, so the
  // next request is this site's own and carries the cookie.
  if (net::EqualsIgnoreCase(req.Header("Sec-Fetch-Site"), "cross-site")) {
    std::string to = HtmlEscape(next);
    r.status = 200;
    r.headers.erase(r.headers.begin());  // no Location
    r.content_type = "text/html; charset=utf-8";
    r.headers.emplace_back("Content-Security-Policy", "default-src 'none'");
    r.body = fmt::format(
        "<!doctype html><meta charset=\"utf-8\"><meta http-equiv=\"refresh\" content=\"0; "
        "url={0}\">"
        "<title>…</title><p><a href=\"{0}\">{0}</a></p>\n",
        to);
  }
  res.Send(std::move(r));
}

// What the user does through the proxy keeps their notebook from being
// stopped as idle (daemon/notebook_watch.h): the request itself, and each
// websocket data frame, counted by a parser of this connection's own.
void ApiServer::WatchNotebookClient(const net::HttpRequest& req, const std::string& run_id,
                                    net::Upstream& up) {
  auto& watch = daemon_.notebooks();
  if (daemon::IsClientActivity(req.method, req.path)) watch.NoteClient(run_id);
  up.on_client_bytes = [&watch, run_id,
                        frames = std::make_shared<daemon::WsDataFrames>()](std::string_view b) {
    if (frames->Feed(b) > 0) watch.NoteClient(run_id);
  };
}

void ApiServer::HandleRunOrigin(net::HttpRequest req, std::unique_ptr<net::Responder> res,
                                const RunOrigin& o) {
  auto refuse = [&](const Status& s) { res->Send(ErrorResponse(s)); };
  if (req.path.starts_with(kRunOriginPrefix)) {
    if (req.path == std::string(kRunOriginPrefix) + "login" && req.method == "GET") {
      return RunOriginLogin(req, *res, o);
    }
    return refuse(
        Status::Msg(Code::kNotFound, "api.no_route", {{"method", req.method}, {"path", req.path}}));
  }
  // A credential admitted to this origin a moment ago (run_origin_cache.h),
  // unless what may reach a run changed since.
  if (const uint64_t gen = daemon_.sharing().generation(); origin_cache_gen_.exchange(gen) != gen) {
    origin_cache_.Clear();
  }
  const std::string cache_key =
      req.peer ? ""
               : RunOriginCache::Key(o.run_id, o.port_name, req.Header("Authorization"),
                                     req.Header("Cookie"));
  if (auto hit = origin_cache_.Find(cache_key)) {
    if (!SameOrigin(req)) {
      return refuse(Status::Msg(Code::kPermissionDenied, "proxy.bad_origin",
                                {{"origin", std::string(req.Header("Origin"))}}));
    }
    if (!hit->notebook.empty()) WatchNotebookClient(req, hit->notebook, hit->upstream);
    return proxy_->Forward(std::move(req), std::move(hit->upstream), std::move(res));
  }
  int64_t retry_after_s = 0;
  auto auth = auth_->AuthenticateRunOrigin(req, RunScope(o.run_id), &retry_after_s);
  if (!auth.ok()) {
    net::HttpResponse r =
        ErrorResponse(retry_after_s > 0 ? auth.status()
                                        : Status::Msg(Code::kPermissionDenied, "proxy.login_needed",
                                                      {{"run", o.run_id}}));
    if (retry_after_s > 0) r.headers.emplace_back("Retry-After", std::to_string(retry_after_s));
    if (retry_after_s == 0) r.status = 401;
    return res->Send(std::move(r));
  }
  auto r = daemon_.Access(auth->caller, o.run_id, daemon::AccessAction::kOpen);
  if (!r.ok()) return refuse(r.status());
  if (r->id != o.run_id) {  // a run's origin names its id, never its name
    return refuse(Status::Msg(Code::kNotFound, "run.not_found", {{"run", o.run_id}}));
  }
  if (!SameOrigin(req)) {
    return refuse(Status::Msg(Code::kPermissionDenied, "proxy.bad_origin",
                              {{"origin", std::string(req.Header("Origin"))}}));
  }
  if (!run::IsActive(r->state)) {
    return refuse(Status::Msg(Code::kUnavailable, "proxy.not_running",
                              {{"run", r->id}, {"state", std::string(run::StateName(r->state))}}));
  }
  const std::vector<exec::Endpoint> endpoints = daemon_.Endpoints(*r);
  const exec::Endpoint* e = FindEndpoint(endpoints, o.port_name);
  if (!e) {
    if (r->state == run::RunState::kStarting && !daemon::ServedPorts(*r).empty()) {
      // Being launched: its ports' addresses are recorded once it runs.
      return refuse(daemon_.ExplainPort(r->id, o.port_name,
                                        Status::Msg(Code::kUnavailable, "proxy.not_running",
                                                    {{"run", r->id}, {"state", "starting"}})));
    }
    if (daemon::ServedPorts(*r).empty()) {
      return refuse(Status::Msg(Code::kNotFound, "proxy.no_ports", {{"run", r->id}}));
    }
    return refuse(Status::Msg(Code::kNotFound, "proxy.no_port",
                              {{"run", r->id},
                               {"port", o.port_name.empty() ? "-" : o.port_name},
                               {"ports", PortNames(*r)}}));
  }
  net::Upstream up;
  const std::string& address = e->address;
  if (e->kind == "unix") {
    up.kind = net::Upstream::Kind::kUnix;
    up.socket = address;
    up.host = "localhost";
  } else {
    up.kind = net::Upstream::Kind::kTcp;
    up.port = PortOf(address);
    up.host = address;
    up.netns_pid = e->netns_pid;  // an isolated run's: connect in its namespace
    up.netns_start = e->netns_start;
  }
  // Whoever else binds the port first serves nobody; root's run may also be
  // served by the daemon's own user.
  up.owner_uid = r->uid;
  if (r->uid == 0) up.also_owner_uid = static_cast<unsigned>(daemon_.uid());
  if (!auth->caller.admin && auth->caller.uid != r->uid) {
    // A websocket opened through a share ends when the share does.
    up.on_tunnel_open = [this, id = r->id, caller = auth->caller](auto control) {
      run_tunnels_.Add(id, caller, std::move(control));
    };
  }
  up.explain_unreachable = [this, id = r->id, port = e->name](const Status& s) {
    return daemon_.ExplainPort(id, port, s);  // which layer failed (docs/ports.md)
  };
  std::string notebook;
  if (r->kind == run::RunKind::kNotebook && e->name == daemon::kNotebookPort) {
    // The user never needs Jupyter's token: the proxy shows it to Jupyter.
    up.add_headers.emplace_back("Authorization", "token " + daemon_.NotebookTokenOf(*r));
    notebook = r->id;
  }
  origin_cache_.Put(cache_key, RunOriginAdmission{up, notebook});
  if (!notebook.empty()) WatchNotebookClient(req, notebook, up);
  proxy_->Forward(std::move(req), std::move(up), std::move(res));
}

void ApiServer::RecheckRunTunnels() {
  size_t ended = run_tunnels_.Recheck([this](const std::string& id, const daemon::Caller& c) {
    return daemon_.Access(c, id, daemon::AccessAction::kOpen).ok();
  });
  if (ended > 0) spdlog::info("sharing changed: {} proxied websocket(s) ended", ended);
}

// POST /runs/{run}/open {"port": name?}: where the run's port is served.
void ApiServer::PostOpen(ApiCall& call) {
  auto r = daemon_.Access(call.caller, call.Param("run"), daemon::AccessAction::kOpen);
  if (!r.ok()) return call.Reply(r.status());
  std::string port;
  if (!call.req.body.empty()) {
    auto body = ParseJson(call.req.body);
    if (!body.ok()) return call.Reply(body.status());
    if (body->contains("port")) {
      if (!(*body)["port"].is_string()) {
        return call.Reply(Status::Msg(Code::kInvalidArgument, "json.wrong_type",
                                      {{"field", "port"}, {"type", "string"}}));
      }
      port = (*body)["port"].get<std::string>();
    }
  }
  const std::vector<run::PortSpec> ports = daemon::ServedPorts(*r);
  if (ports.empty()) {
    return call.Reply(Status::Msg(Code::kNotFound, "proxy.no_ports", {{"run", r->id}}));
  }
  const run::PortSpec* chosen = &ports.front();
  if (!port.empty()) {
    chosen = nullptr;
    for (const auto& p : ports) {
      if (p.name == port) chosen = &p;
    }
    if (!chosen) {
      return call.Reply(Status::Msg(Code::kNotFound, "proxy.no_port",
                                    {{"run", r->id}, {"port", port}, {"ports", PortNames(*r)}}));
    }
  }
  RunOrigin o{r->id, chosen == &ports.front() ? "" : chosen->name, RunOriginBases()[0]};
  const std::string url = RunOriginUrl(o);
  auto code = sessions_->IssueCode(call.caller.uid, call.caller.user, RunScope(r->id),
                                   CreatedBy(call.auth), CredentialEndMs(call.auth));
  if (!code.ok()) return call.Reply(code.status());
  call.Reply(Json{{"run", r->id},
                  {"port", chosen->name},
                  {"url", url},
                  {"login_url", url + "_lathe/login?code=" + *code},
                  {"code_expires_in_s", opts_.sessions.code_ttl_ms / 1000}});
}

}  // namespace lathe::api

#include "lathe/api/server.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include <fmt/format.h>

#include "lathe/api/auth.h"
#include "lathe/api/limits.h"
#include "lathe/common/ids.h"
#include "lathe/os/clock.h"
#include "lathe/os/files.h"
#include "lathe/run/log_format.h"
#include "lathe/run/spec.h"

namespace lathe::api {
namespace {

constexpr int kStreamPollMs = 100;

// A full disk is 507 Insufficient Storage (RFC 4918), not a rate limit (429).
bool IsOutOfSpace(const Status& s) {
  const std::string& id = s.msg_id();
  return id == "state.disk_full" || id == "snap.disk_full" || id == "snap.reserve";
}

int HttpStatusFor(const Status& s) {
  switch (s.code()) {
    case Code::kInvalidArgument: return s.msg_id() == "run.idempotency_key_reused" ? 422 : 400;
    case Code::kNotFound: return 404;
    case Code::kPermissionDenied: return s.msg_id() == "api.unauthenticated" ? 401 : 403;
    case Code::kAlreadyExists:
    case Code::kFailedPrecondition: return 409;
    case Code::kResourceExhausted: return IsOutOfSpace(s) ? 507 : 429;
    case Code::kUnavailable: return 503;
    default: return 500;
  }
}

net::HttpResponse JsonResponse(int status, const Json& body) {
  net::HttpResponse r;
  r.status = status;
  r.body = body.dump();
  r.body += '\n';
  return r;
}

net::HttpResponse ErrorResponse(const Status& s) { return JsonResponse(HttpStatusFor(s), StatusToJson(s)); }

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

// Splits "/api/v1/runs/abc/logs" into {"runs", "abc", "logs"}.
std::vector<std::string> ApiParts(const std::string& path) {
  constexpr std::string_view kPrefix = "/api/v1/";
  if (path.compare(0, kPrefix.size(), kPrefix) != 0) return {};
  return net::PathSegments(std::string_view(path).substr(kPrefix.size()));
}

bool Truthy(const std::optional<std::string>& v) {
  return v && (*v == "1" || *v == "true" || *v == "yes");
}

std::string SseEvent(std::string_view event, const Json& data, int64_t id = 0) {
  std::string out;
  if (id > 0) out += fmt::format("id: {}\n", id);
  out += fmt::format("event: {}\ndata: {}\n\n", event, data.dump());
  return out;
}

// The Idempotency-Key header of a request: "" when absent; the IETF draft's
// quoted form ("…") and Stripe's bare one are the same key.
Result<std::string> IdempotencyKeyOf(const net::HttpRequest& req) {
  constexpr size_t kMaxKey = 255;
  constexpr std::string_view kAllowed =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.:~+/=";
  constexpr size_t kShown = 64;
  auto it = std::find_if(req.headers.begin(), req.headers.end(),
                         [](const auto& h) { return net::EqualsIgnoreCase(h.first, "Idempotency-Key"); });
  if (it == req.headers.end()) return std::string();
  std::string_view key = it->second;
  if (key.size() >= 2 && key.front() == '"' && key.back() == '"') key = key.substr(1, key.size() - 2);
  if (key.empty() || key.size() > kMaxKey || key.find_first_not_of(kAllowed) != std::string_view::npos) {
    std::string shown;
    for (char c : it->second.substr(0, kShown)) shown += c >= 0x20 && c < 0x7f ? c : '?';
    if (it->second.size() > kShown) shown += "...";
    return Status::Msg(Code::kInvalidArgument, "api.bad_idempotency_key",
                       {{"value", shown}, {"length", std::to_string(it->second.size())},
                        {"max", std::to_string(kMaxKey)}});
  }
  return std::string(key);
}

// POST /runs: 201 with the run; a replay of an earlier request with the same
// Idempotency-Key is 201 too, with the run as it is now and
// "Idempotent-Replayed: true".
net::HttpResponse PostRun(daemon::Daemon& d, const net::HttpRequest& req, const daemon::Caller& caller) {
  auto key = IdempotencyKeyOf(req);
  if (!key.ok()) return ErrorResponse(key.status());
  auto body = run::ParseSpecJson(req.body);  // a number out of range names its field
  if (!body.ok()) return ErrorResponse(body.status());
  auto r = d.Submit(caller, *body, *key);
  if (!r.ok()) return ErrorResponse(r.status());
  net::HttpResponse out = JsonResponse(201, state::RunToJson(r->run));
  if (r->replayed) out.headers.emplace_back("Idempotent-Replayed", "true");
  return out;
}

}  // namespace

// Connection limits of the API (docs/api.md, "Limits").
constexpr size_t kMaxConnectionsPerUid = 128;
constexpr size_t kMaxConnectionsPerAddress = 256;
constexpr size_t kReservedConnections = 64;

Result<std::unique_ptr<ApiServer>> ApiServer::Create(daemon::Daemon& d, ApiOptions options) {
  std::unique_ptr<ApiServer> s(new ApiServer(d, std::move(options)));
  const auto& paths = d.paths();
  ASSIGN_OR_RETURN(s->token_, LoadOrCreateToken(paths.token));
  net::ServerOptions so;
  so.io_threads = 2;
  so.max_body_bytes = kMaxRequestBodyBytes;
  // Every local user can reach the socket in system mode: no one user (or
  // client address) may hold enough connections to lock the others out, and
  // root and the daemon's own user can connect even when all are taken.
  so.max_connections_per_uid = kMaxConnectionsPerUid;
  so.max_connections_per_address = kMaxConnectionsPerAddress;
  so.reserved_uids = {0, static_cast<unsigned>(d.uid())};
  so.reserved_connections = kReservedConnections;
  ApiServer* self = s.get();
  ASSIGN_OR_RETURN(s->server_,
                   net::HttpServer::Create(so, [self](net::HttpRequest req,
                                                      std::unique_ptr<net::Responder> res) {
                     self->Handle(std::move(req), std::move(res));
                   }));
  std::string sock_dir = paths.socket.substr(0, paths.socket.rfind('/'));
  RETURN_IF_ERROR(os::MakeDirs(sock_dir, 0755));
  RETURN_IF_ERROR(s->server_->ListenUnix(paths.socket, paths.system ? 0666 : 0600));
  ASSIGN_OR_RETURN(s->port_, s->server_->ListenTcp(s->opts_.host, s->opts_.port));
  // Written before the first request is served: a client that got an answer
  // finds the endpoint file.
  Json endpoint = {{"socket", paths.socket},
                   {"tcp", s->tcp_endpoint()},
                   {"pid", ::getpid()},
                   {"mode", paths.system ? "system" : "user"}};
  RETURN_IF_ERROR(os::WriteFileAtomic(paths.endpoint, endpoint.dump() + "\n", 0644));
  RETURN_IF_ERROR(s->server_->Start());
  return s;
}

ApiServer::~ApiServer() { Stop(); }

std::string ApiServer::tcp_endpoint() const { return fmt::format("{}:{}", opts_.host, port_); }

void ApiServer::Stop() {
  if (stopping_.exchange(true)) return;
  // Streams notice within one poll period; wait for them before the daemon goes.
  while (streams_.load() > 0) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  if (server_) server_->Stop(2000);
}

void ApiServer::StartStreamThread(std::function<void()> body) {
  streams_++;
  std::thread([this, body = std::move(body)] {
    body();
    streams_--;
  }).detach();
}

void ApiServer::Handle(net::HttpRequest req, std::unique_ptr<net::Responder> res) {
  auto caller = Authenticate(req, token_, daemon_.uid());
  if (!caller.ok()) {
    res->Send(ErrorResponse(caller.status()));
    return;
  }
  Route(req, *caller, res);
  if (res) {
    res->Send(ErrorResponse(Status::Msg(Code::kNotFound, "api.no_route",
                                        {{"method", req.method}, {"path", req.path}})));
  }
}

// Each branch either answers through `res` (and resets it) or leaves it for
// the 404 in Handle.
void ApiServer::Route(const net::HttpRequest& req, const daemon::Caller& caller,
                      std::unique_ptr<net::Responder>& res) {
  std::vector<std::string> p = ApiParts(req.path);
  const std::string& m = req.method;
  auto reply = [&](const Result<Json>& r, int ok_status = 200) {
    res->Send(r.ok() ? JsonResponse(ok_status, *r) : ErrorResponse(r.status()));
    res.reset();
  };
  if (p.size() == 1 && p[0] == "status" && m == "GET") {
    Json s = daemon_.StatusJson();
    s["tcp"] = tcp_endpoint();
    s["caller"] = {{"uid", caller.uid}, {"user", caller.user}, {"admin", caller.admin}};
    return reply(s);
  }
  if (p.size() == 1 && p[0] == "gpus" && m == "GET") return reply(daemon_.GpusJson());
  if (p.size() == 1 && p[0] == "shutdown" && m == "POST") {
    if (!caller.admin) return reply(Status::Msg(Code::kPermissionDenied, "api.admin_only"));
    reply(Json{{"shutting_down", true}}, 202);
    if (opts_.on_shutdown) opts_.on_shutdown();
    return;
  }
  if (p.size() == 1 && p[0] == "runs" && m == "GET") {
    constexpr int kDefaultLimit = 1000;
    int limit = std::atoi(req.QueryParam("limit").value_or("0").c_str());
    if (limit <= 0) limit = kDefaultLimit;
    int64_t total = 0;
    auto runs = daemon_.List(Truthy(req.QueryParam("all")), limit, &total);
    if (!runs.ok()) return reply(runs.status());
    Json arr = Json::array();
    for (const auto& r : *runs) {
      // Another user's run shows who, what state and which GPUs, never its spec.
      bool whole = caller.admin || caller.uid == r.uid;
      Json j = whole ? state::RunToJson(r) : state::RunToPublicJson(r);
      if (whole && r.state == run::RunState::kQueued) j["waiting"] = daemon_.WaitingWhy(r.id);
      arr.push_back(std::move(j));
    }
    return reply(Json{{"runs", arr}, {"total", total}});
  }
  if (p.size() == 1 && p[0] == "runs" && m == "POST") {
    res->Send(PostRun(daemon_, req, caller));
    res.reset();
    return;
  }
  if (p.size() == 1 && p[0] == "events" && m == "GET") {
    if (!caller.admin) return reply(Status::Msg(Code::kPermissionDenied, "api.admin_only"));
    int64_t after = std::atoll(req.QueryParam("after").value_or("0").c_str());
    std::shared_ptr<net::ResponseStream> s =
        res->StartStream(200, "text/event-stream", {{"Cache-Control", "no-cache"}});
    res.reset();
    StartStreamThread([this, after, s] { FollowEvents("", after, *s); });
    return;
  }
  if (!p.empty() && p[0] == "snapshots") return RouteSnapshots(req, p, caller, res);
  if (p.size() < 2 || p[0] != "runs") return;
  const std::string action = p.size() == 2 && m == "GET" ? "read" : "stop";
  if (p.size() == 3 && p[2] == "stop" && m == "POST") {
    auto r = daemon_.StopRun(caller, p[1]);
    if (!r.ok()) return reply(r.status());
    return reply(state::RunToJson(*r), 202);
  }
  if (m != "GET" || p.size() > 3) return;
  auto r = daemon_.Access(caller, p[1], "read");
  if (!r.ok()) return reply(r.status());
  if (p.size() == 2) {
    Json j = state::RunToJson(*r);
    if (r->state == run::RunState::kQueued) j["waiting"] = daemon_.WaitingWhy(r->id);
    auto events = daemon_.Events(r->id, 0);
    if (events.ok()) {
      Json ev = Json::array();
      for (const auto& e : *events) ev.push_back(state::EventToJson(e));
      j["events"] = ev;
    }
    return reply(j);
  }
  bool follow = Truthy(req.QueryParam("follow"));
  if (p[2] == "logs") {
    Status s = RouteLogs(req, *r, caller, follow, res);
    if (!s.ok()) return reply(s);
    return;
  }
  if (p[2] == "events") {
    int64_t after = std::atoll(req.QueryParam("after").value_or("0").c_str());
    if (!follow) {
      auto events = daemon_.Events(r->id, after);
      if (!events.ok()) return reply(events.status());
      Json ev = Json::array();
      for (const auto& e : *events) ev.push_back(state::EventToJson(e));
      return reply(Json{{"events", ev}});
    }
    std::shared_ptr<net::ResponseStream> s =
        res->StartStream(200, "text/event-stream", {{"Cache-Control", "no-cache"}});
    res.reset();
    StartStreamThread([this, id = r->id, after, s] { FollowEvents(id, after, *s); });
  }
  (void)action;
}

// /snapshots[?run=REF], /snapshots/{ref}, POST /snapshots/{ref}/restore {to, force}
void ApiServer::RouteSnapshots(const net::HttpRequest& req, const std::vector<std::string>& p,
                               const daemon::Caller& caller, std::unique_ptr<net::Responder>& res) {
  auto reply = [&](const Result<Json>& r) {
    res->Send(r.ok() ? JsonResponse(200, *r) : ErrorResponse(r.status()));
    res.reset();
  };
  if (p.size() == 1 && req.method == "GET") {
    return reply(daemon_.ListSnapshots(caller, req.QueryParam("run").value_or("")));
  }
  if (p.size() == 2 && req.method == "GET") return reply(daemon_.GetSnapshot(caller, p[1]));
  if (p.size() == 3 && p[2] == "restore" && req.method == "POST") {
    auto body = ParseJson(req.body);
    if (!body.ok()) return reply(body.status());
    if (!body->is_object() || !(*body)["to"].is_string()) {
      return reply(Status::Msg(Code::kInvalidArgument, "snap.restore_needs_absolute",
                               {{"path", body->is_object() ? body->value("to", Json()).dump() : ""}}));
    }
    std::string to = (*body)["to"].get<std::string>();
    bool force = body->value("force", false);
    if (!Truthy(req.QueryParam("progress"))) return reply(daemon_.RestoreSnapshot(caller, p[1], to, force));
    std::shared_ptr<net::ResponseStream> s =
        res->StartStream(200, "text/event-stream", {{"Cache-Control", "no-cache"}});
    res.reset();
    StartStreamThread([this, caller, ref = p[1], to, force, s] { StreamRestore(caller, ref, to, force, *s); });
  }
}

// Restore with progress, as server-sent events: "progress" {done_bytes,
// total_bytes} as it goes, then "result" (the plain answer's JSON) or "error"
// ({"error": …} as an error response would carry it, plus its HTTP status).
void ApiServer::StreamRestore(daemon::Caller caller, std::string ref, std::string to, bool force,
                              net::ResponseStream& s) {
  auto send = [&s](const char* event, const Json& data) {
    return s.Write(std::string("event: ") + event + "\ndata: " + data.dump() + "\n\n");
  };
  auto r = daemon_.RestoreSnapshot(caller, ref, to, force, [&](const snap::Progress& p) {
    send("progress", Json{{"done_bytes", p.done_bytes}, {"total_bytes", p.total_bytes}});
  });
  if (r.ok()) {
    send("result", *r);
  } else {
    Json err = StatusToJson(r.status());
    err["http"] = HttpStatusFor(r.status());
    send("error", err);
  }
  s.Close();
}

bool ApiServer::KeepAlive::Tick(net::ResponseStream& s) {
  constexpr int64_t kQuietMs = 15000;
  int64_t now = os::RealClock().MonotonicMs();
  if (last_ms == 0) last_ms = now;
  if (now - last_ms < kQuietMs) return true;
  last_ms = now;
  return s.Write(": keep-alive\n\n");
}

void ApiServer::FollowEvents(std::string run_id, int64_t after, net::ResponseStream& stream) {
  net::ResponseStream* s = &stream;
  KeepAlive keep_alive;
  while (!stopping_ && !s->ClientGone()) {
    bool finished = !run_id.empty() && daemon_.IsFinished(run_id);
    auto events = daemon_.Events(run_id, after);
    if (!events.ok()) break;
    std::string out;
    for (const auto& e : *events) {
      out += SseEvent(e.type, state::EventToJson(e), e.id);
      after = e.id;
    }
    if (!out.empty() && !s->Write(out)) break;
    if (finished && events->empty()) {
      s->Write(SseEvent("end", Json{{"run", run_id}}));
      break;
    }
    if (!keep_alive.Tick(*s)) break;
    daemon_.WaitForChange(kStreamPollMs * 5);
  }
  s->Close();
}

}  // namespace lathe::api

// Snapshots: GET /snapshots[?run=REF], GET and DELETE /snapshots/{snap},
// POST /snapshots/{snap}/restore {to, force}[?progress=1].
#include "lathe/api/routes.h"
#include "lathe/api/server.h"
#include "lathe/net/status_http.h"

namespace lathe::api {

void ApiServer::ListSnapshots(ApiCall& call) {
  call.Reply(daemon_.ListSnapshots(call.caller, call.req.QueryParam("run").value_or("")));
}

void ApiServer::GetSnapshot(ApiCall& call) {
  call.Reply(daemon_.GetSnapshot(call.caller, call.Param("snap")));
}

void ApiServer::DeleteSnapshot(ApiCall& call) {
  call.Reply(daemon_.DeleteSnapshot(call.caller, call.Param("snap")));
}

void ApiServer::PostRestore(ApiCall& call) {
  const net::HttpRequest& req = call.req;
  const daemon::Caller& caller = call.caller;
  auto reply = [&](const Result<Json>& r) { call.Reply(r); };
  auto body = ParseJson(req.body);
  if (!body.ok()) return reply(body.status());
  if (!body->is_object() || !(*body)["to"].is_string()) {
    return reply(
        Status::Msg(Code::kInvalidArgument, "snap.restore_needs_absolute",
                    {{"path", body->is_object() ? body->value("to", Json()).dump() : ""}}));
  }
  std::string to = (*body)["to"].get<std::string>();
  bool force = body->value("force", false);
  std::string ref = call.Param("snap");
  if (!Truthy(req.QueryParam("progress")))
    return reply(daemon_.RestoreSnapshot(caller, ref, to, force));
  std::shared_ptr<net::ResponseStream> s = net::StartEventStream(*call.res);
  call.res.reset();
  StartStreamThread(
      [this, caller, ref, to, force, s] { StreamRestore(caller, ref, to, force, *s); });
}

// Restore with progress, as server-sent events: "progress" {done_bytes,
// total_bytes} as it goes, then "result" (the plain answer's JSON) or "error"
// ({"error": …} as an error response would carry it, plus its HTTP status).
void ApiServer::StreamRestore(daemon::Caller caller, std::string ref, std::string to, bool force,
                              net::ResponseStream& s) {
  auto send = [&s](const char* event, const Json& data) {
    return s.Write(net::SseEvent(event, data.dump()));
  };
  auto r = daemon_.RestoreSnapshot(caller, ref, to, force, [&](const snap::Progress& p) {
    send("progress", Json{{"done_bytes", p.done_bytes}, {"total_bytes", p.total_bytes}});
  });
  if (r.ok()) {
    send("result", *r);
  } else {
    Json err = StatusToJson(r.status());
    err["http"] = net::HttpStatusFor(r.status());
    send("error", err);
  }
  s.Close();
}

}  // namespace lathe::api

// The daemon itself: GET /status, GET /gpus, GET /events, POST /shutdown.
#include "lathe/api/routes.h"
#include "lathe/api/server.h"

namespace lathe::api {

void ApiServer::GetStatus(ApiCall& call) {
  const daemon::Caller& caller = call.caller;
  Json s = daemon_.StatusJson();
  s["tcp"] = tcp_endpoint();
  s["tls"] = !opts_.tls.cert_file.empty();
  s["url"] = url();
  s["caller"] = {{"uid", caller.uid}, {"user", caller.user}, {"admin", caller.admin}};
  s["quotas"] = daemon_.QuotaJson(caller);  // the caller's own; everyone's for an admin
  s["disk"] = daemon_.DiskJson(caller);     // likewise
  call.Reply(s);
}

void ApiServer::GetGpus(ApiCall& call) { call.Reply(daemon_.GpusJson()); }

void ApiServer::GetProfiles(ApiCall& call) { call.Reply(daemon_.ProfilesJson()); }

// Every run's events as server-sent events, for root and the daemon's user.
void ApiServer::GetEvents(ApiCall& call) {
  if (!call.caller.admin) return call.Reply(Status::Msg(Code::kPermissionDenied, "api.admin_only"));
  auto after = QueryNumber(call.req, "after", 0, INT64_MAX);
  if (!after.ok()) return call.Reply(after.status());
  std::shared_ptr<net::ResponseStream> s = net::StartEventStream(*call.res);
  call.res.reset();
  StartStreamThread(
      [this, after = *after, s, auth = call.auth] { FollowEvents("", after, auth, *s); });
}

void ApiServer::PostShutdown(ApiCall& call) {
  if (!call.caller.admin) return call.Reply(Status::Msg(Code::kPermissionDenied, "api.admin_only"));
  call.Reply(Json{{"shutting_down", true}}, 202);
  if (opts_.on_shutdown) opts_.on_shutdown();
}

}  // namespace lathe::api

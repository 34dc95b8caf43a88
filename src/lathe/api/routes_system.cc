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
  // The caller's projects (an admin's: every one) and what each used.
  Json projects = Json::array();
  if (auto list = daemon_.sharing().Projects(caller); list.ok()) {
    for (const auto& p : *list) {
      projects.push_back({{"name", p.name},
                          {"owner", p.user},
                          {"usage", daemon_.ProjectUsage(p.name)},
                          {"limits", daemon_.ProjectLimits(p.name)}});
    }
  }
  s["projects"] = projects;
  call.Reply(s);
}

void ApiServer::GetGpus(ApiCall& call) { call.Reply(daemon_.GpusJson()); }

namespace {

Json PartitionJson(const exec::Partition& p) {
  return Json{{"name", p.name},
              {"default", p.is_default},
              {"state", p.state},
              {"max_time_ms", p.max_time_ms},
              {"nodes",
               {{"total", p.nodes_total},
                {"idle", p.nodes_idle},
                {"allocated", p.nodes_allocated},
                {"down", p.nodes_down}}},
              {"cpus", {{"total", p.cpus_total}, {"allocated", p.cpus_allocated}}},
              {"gpus", {{"total", p.gpus_total}, {"used", p.gpus_used}, {"types", p.gpu_types}}},
              {"memory_mb", p.memory_mb}};
}

Json PoolJson(const daemon::PoolView& v) {
  Json parts = Json::array();
  for (const auto& p : v.description.partitions) parts.push_back(PartitionJson(p));
  auto runs = [](const std::vector<std::string>& ids) {
    return Json{{"count", ids.size()}, {"ids", ids}};
  };
  return Json{
      {"name", v.name},
      {"type", v.type},
      {"default", v.is_default},
      {"capabilities", exec::CapabilitiesToJson(v.caps)},
      {"partition", v.description.partition},
      {"account", v.description.account},
      {"qos", v.description.qos},
      {"partitions", parts},
      {"error", v.description.error.ok() ? Json(nullptr) : StatusToJson(v.description.error)},
      {"runs",
       {{"queued", runs(v.queued)}, {"starting", runs(v.starting)}, {"running", runs(v.running)}}}};
}

}  // namespace

// Every pool with its partitions (a cluster's sinfo, which may take a while:
// answered from a thread of its own, at most kMaxPoolsCalls at once) and the
// caller's own runs there.
void ApiServer::GetPools(ApiCall& call) {
  if (pools_calls_.fetch_add(1) >= kMaxPoolsCalls) {
    pools_calls_--;
    return call.Reply(Status::Msg(Code::kResourceExhausted, "api.pools_busy",
                                  {{"max", std::to_string(kMaxPoolsCalls)}}));
  }
  std::shared_ptr<net::Responder> responder(call.res.release());
  StartStreamThread([this, responder, caller = call.caller] {
    Json pools = Json::array();
    std::string default_pool;
    for (const daemon::PoolView& v : daemon_.Pools(caller)) {
      if (v.is_default) default_pool = v.name;
      pools.push_back(PoolJson(v));
    }
    responder->Send(JsonResponse(200, Json{{"pools", pools}, {"default_pool", default_pool}}));
    pools_calls_--;
  });
}

// A profile on a cluster is checked against its sinfo, which may take a
// while: answered from a thread of its own, counted with the pools' calls.
void ApiServer::GetProfiles(ApiCall& call) {
  if (pools_calls_.fetch_add(1) >= kMaxPoolsCalls) {
    pools_calls_--;
    return call.Reply(Status::Msg(Code::kResourceExhausted, "api.pools_busy",
                                  {{"max", std::to_string(kMaxPoolsCalls)}}));
  }
  std::shared_ptr<net::Responder> responder(call.res.release());
  StartStreamThread([this, responder] {
    responder->Send(JsonResponse(200, daemon_.ProfilesJson()));
    pools_calls_--;
  });
}

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

// config.yaml read again (Daemon::ReloadConfig): the daemon's own users only.
void ApiServer::PostReload(ApiCall& call) {
  if (!call.caller.admin) return call.Reply(Status::Msg(Code::kPermissionDenied, "api.admin_only"));
  auto r = daemon_.ReloadConfig();
  if (!r.ok()) return call.Reply(r.status());
  call.Reply(*r);
}

void ApiServer::PostShutdown(ApiCall& call) {
  if (!call.caller.admin) return call.Reply(Status::Msg(Code::kPermissionDenied, "api.admin_only"));
  call.Reply(Json{{"shutting_down", true}}, 202);
  if (opts_.on_shutdown) opts_.on_shutdown();
}

}  // namespace lathe::api

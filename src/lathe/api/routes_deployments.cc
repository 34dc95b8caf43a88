// Deployments (docs/api.md, "Deployments"): POST /deployments, GET
// /deployments, GET, PATCH and DELETE /deployments/{name}, GET
// /deployments/{name}/events, GET /metrics/deployments, and the deployment keys: POST and GET
// /deployments/{name}/keys, DELETE /deployments/{name}/keys/{key}. The rules
// are the daemon's (daemon/deployments.h, api/deploy_keys.h); this file
// reads bodies.
#include <spdlog/spdlog.h>

#include "lathe/api/routes.h"
#include "lathe/api/server.h"

namespace lathe::api {
namespace {

Result<Json> ObjectBody(const net::HttpRequest& req) {
  ASSIGN_OR_RETURN(Json body, ParseJson(req.body.empty() ? "{}" : req.body));
  if (!body.is_object()) return Status::Msg(Code::kInvalidArgument, "json.not_object");
  return body;
}

// A key request's fields are "name" and "expires", each a string; anything
// else is refused (docs/api.md: unknown fields are errors, never ignored).
Status CheckKeyRequest(const Json& body) {
  for (const auto& [key, value] : body.items()) {
    if (key != "name" && key != "expires") {
      return Status::Msg(Code::kInvalidArgument, "deploy.key_unknown_field",
                         {{"field", key}, {"allowed", "name, expires"}});
    }
    if (!value.is_string()) {
      return Status::Msg(Code::kInvalidArgument, "spec.wrong_type",
                         {{"field", key}, {"type", "string"}});
    }
    // Left out means "never"; an empty value is no way to say so (as for tokens).
    if (key == "expires" && value.get<std::string>().empty()) {
      return Status::Msg(Code::kInvalidArgument, "token.bad_expires", {{"value", ""}});
    }
  }
  return Status::OK();
}

// Whose keys of a deployment a caller lists and revokes: every key with role
// manage or as its owner, else their own.
std::optional<uid_t> KeysSeenBy(const deploy::KeyAccess& a, const daemon::Caller& caller) {
  if (a.role >= daemon::Role::kManage) return std::nullopt;
  return caller.uid;
}

}  // namespace

void ApiServer::PostDeployment(ApiCall& call) {
  auto body = ObjectBody(call.req);
  if (!body.ok()) return call.Reply(body.status());
  call.Reply(deployments_.Create(call.caller, *body), 201);
}

void ApiServer::ListDeployments(ApiCall& call) { call.Reply(deployments_.List(call.caller)); }

void ApiServer::GetDeployment(ApiCall& call) {
  call.Reply(deployments_.Get(call.caller, call.Param("name")));
}

void ApiServer::PatchDeployment(ApiCall& call) {
  auto body = ObjectBody(call.req);
  if (!body.ok()) return call.Reply(body.status());
  call.Reply(deployments_.Update(call.caller, call.Param("name"), *body));
}

void ApiServer::DeleteDeployment(ApiCall& call) {
  auto r = deployments_.Delete(call.caller, call.Param("name"));
  call.Reply(r, 202);
}

void ApiServer::GetDeploymentEvents(ApiCall& call) {
  auto after = QueryNumber(call.req, "after", 0, INT64_MAX);
  if (!after.ok()) return call.Reply(after.status());
  call.Reply(deployments_.Events(call.caller, call.Param("name"), *after));
}

// The front's Prometheus metrics of every deployment (they name them all):
// for an admin, e.g. a Prometheus scraping with the daemon's token.
void ApiServer::GetDeploymentMetrics(ApiCall& call) {
  if (!call.caller.admin) {
    return call.Reply(Status::Msg(Code::kPermissionDenied, "api.admin_only"));
  }
  net::HttpResponse r;
  r.content_type = "text/plain; version=0.0.4; charset=utf-8";
  r.body = deployments_.Metrics();
  call.Send(std::move(r));
}

void ApiServer::PostDeploymentKey(ApiCall& call) {
  auto body = ObjectBody(call.req);
  if (!body.ok()) return call.Reply(body.status());
  const std::string asked = call.Param("name");
  auto access = deployments_.KeyAccessFor(call.caller, asked);
  if (!access.ok()) return call.Reply(access.status());
  const std::string& name = access->name;  // its key: OWNER/NAME (or an older bare NAME)
  if (Status s = CheckKeyRequest(*body); !s.ok()) return call.Reply(s);
  DeployKeyRequest req;
  req.deployment = name;
  // The owner's keys (an admin makes them for the owner); a user it is
  // shared with holds their own, which go when the share does.
  req.uid = access->role == daemon::Role::kOwner ? access->owner : call.caller.uid;
  auto u = os::LookupUser(req.uid);
  req.user = u.ok() ? u->name : std::to_string(req.uid);
  req.name = body->value("name", "");
  req.expires = body->value("expires", "");
  req.created_by = CreatedBy(call.auth);
  auto issued = deploy_keys_->Issue(req);
  if (!issued.ok()) return call.Reply(issued.status());
  // The key is in the front's routes before it is printed: it works at once.
  if (Status s = deployments_.SyncFront(5000); !s.ok()) {
    spdlog::warn("deployment {}: key {} reaches the front late: {}", name, issued->record.id,
                 s.ToString());
  }
  Json j =
      DeployKeyToJson(issued->record, opts_.clock ? opts_.clock->NowMs() : os::RealClock().NowMs());
  j["key"] = issued->key;
  call.Reply(j, 201);
}

void ApiServer::ListDeploymentKeys(ApiCall& call) {
  const std::string asked = call.Param("name");
  auto access = deployments_.KeyAccessFor(call.caller, asked);
  if (!access.ok()) return call.Reply(access.status());
  const std::string& name = access->name;  // its key: OWNER/NAME (or an older bare NAME)
  auto keys = deploy_keys_->List(name, KeysSeenBy(*access, call.caller));
  if (!keys.ok()) return call.Reply(keys.status());
  int64_t now = opts_.clock ? opts_.clock->NowMs() : os::RealClock().NowMs();
  Json out = Json::array();
  for (const auto& k : *keys) out.push_back(DeployKeyToJson(k, now));
  call.Reply(Json{{"keys", out}});
}

void ApiServer::DeleteDeploymentKey(ApiCall& call) {
  const std::string asked = call.Param("name");
  auto access = deployments_.KeyAccessFor(call.caller, asked);
  if (!access.ok()) return call.Reply(access.status());
  const std::string& name = access->name;  // its key: OWNER/NAME (or an older bare NAME)
  auto keys = deploy_keys_->List(name, KeysSeenBy(*access, call.caller));
  if (!keys.ok()) return call.Reply(keys.status());
  const std::string id = call.Param("key");
  bool ours = false;
  for (const auto& k : *keys) ours = ours || k.id == id;
  if (!ours) {
    return call.Reply(Status::Msg(Code::kNotFound, "deploy_key.not_found", {{"id", id}}));
  }
  auto gone = deploy_keys_->Revoke(id, std::nullopt);
  if (!gone.ok()) return call.Reply(gone.status());
  if (Status s = deployments_.SyncFront(5000); !s.ok()) {
    spdlog::warn("deployment {}: key {} leaves the front late: {}", name, id, s.ToString());
  }
  call.Reply(Json{{"id", id}, {"deployment", name}, {"revoked", true}});
}

}  // namespace lathe::api

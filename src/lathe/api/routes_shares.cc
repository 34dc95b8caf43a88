// Sharing (docs/sharing.md, docs/api.md "Sharing and projects"):
//   GET    /shares                 what is shared with the caller, and by them
//   GET    /shares?target=T        who T is shared with
//   POST   /shares {target, user | group, role}
//   DELETE /shares?target=T&user=U (or &group=G)
// and projects: POST /projects {name, members}, GET /projects,
// GET /projects/{name}, PATCH /projects/{name} {add, remove},
// DELETE /projects/{name}.
//
// A target is "run:REF", "notebook:REF", "deployment:NAME", "model:NAME", or
// a bare REF or NAME when exactly one kind of object the caller can see has
// it. The rules are daemon/sharing.h's; this file reads bodies and targets.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <initializer_list>

#include "lathe/api/routes.h"
#include "lathe/api/server.h"

namespace lathe::api {
namespace {

using daemon::Role;
using daemon::SharedObject;

Json ShareToJson(const daemon::ShareView& v) {
  const auto& r = v.record;
  Json j = {
      {"kind", r.kind},           {"object", r.object},        {"role", r.role},
      {"owner_uid", r.owner_uid}, {"shared_by", r.granted_by}, {"created_at_ms", r.created_at_ms}};
  j[r.grantee_kind] = v.grantee_name;
  return j;
}

Json SharesJson(const std::vector<daemon::ShareView>& list) {
  Json arr = Json::array();
  for (const auto& v : list) arr.push_back(ShareToJson(v));
  return arr;
}

Json ProjectToJson(const state::ProjectRecord& p) {
  Json members = Json::array();
  for (const auto& m : p.members) {
    members.push_back({{"user", m.user}, {"uid", m.uid}, {"role", m.role}});
  }
  return {{"name", p.name},
          {"owner", p.user},
          {"uid", p.uid},
          {"created_at_ms", p.created_at_ms},
          {"members", members}};
}

Status CheckFields(const Json& body, std::initializer_list<std::string_view> allowed,
                   const char* msg_id) {
  if (!body.is_object()) return Status::Msg(Code::kInvalidArgument, "json.not_object");
  for (const auto& [key, value] : body.items()) {
    if (std::find(allowed.begin(), allowed.end(), key) == allowed.end()) {
      std::string names;
      for (std::string_view a : allowed) names += (names.empty() ? "" : ", ") + std::string(a);
      return Status::Msg(Code::kInvalidArgument, msg_id, {{"field", key}, {"allowed", names}});
    }
  }
  return Status::OK();
}

// A list of strings in `field` ("alice", "bob:manage").
Result<std::vector<std::string>> Strings(const Json& body, const char* field) {
  std::vector<std::string> out;
  if (!body.contains(field)) return out;
  const Json& v = body[field];
  if (!v.is_array()) {
    return Status::Msg(Code::kInvalidArgument, "spec.wrong_type",
                       {{"field", field}, {"type", "a list of strings"}});
  }
  for (const auto& e : v) {
    if (!e.is_string()) {
      return Status::Msg(Code::kInvalidArgument, "spec.wrong_type",
                         {{"field", field}, {"type", "a list of strings"}});
    }
    out.push_back(e.get<std::string>());
  }
  return out;
}

Result<std::vector<daemon::MemberRequest>> Members(const Json& body, const char* field) {
  ASSIGN_OR_RETURN(auto texts, Strings(body, field));
  std::vector<daemon::MemberRequest> out;
  for (const auto& t : texts) {
    ASSIGN_OR_RETURN(auto m, daemon::ParseMember(field, t));
    out.push_back(std::move(m));
  }
  return out;
}

// "user", "group": exactly one of them, a non-empty string.
Result<std::pair<std::string, std::string>> GranteeOf(const std::string& user,
                                                      const std::string& group) {
  if (user.empty() == group.empty()) return Status::Msg(Code::kInvalidArgument, "share.no_grantee");
  return user.empty() ? std::make_pair(std::string("group"), group)
                      : std::make_pair(std::string("user"), user);
}

}  // namespace

Result<SharedObject> ApiServer::ShareTarget(const daemon::Caller& caller,
                                            const std::string& target) {
  if (target.empty()) {
    return Status::Msg(Code::kInvalidArgument, "share.no_target");
  }
  const auto colon = target.find(':');
  const std::string kind = colon == std::string::npos ? "" : target.substr(0, colon);
  const std::string name = colon == std::string::npos ? target : target.substr(colon + 1);
  auto run = [&]() -> Result<SharedObject> {
    ASSIGN_OR_RETURN(auto r, daemon_.Access(caller, name, daemon::AccessAction::kRead));
    return daemon::RunObjectOf(r);
  };
  if (kind == "run" || kind == "notebook") return run();
  if (kind == "deployment" || kind == "deploy") return deployments_.ObjectOf(caller, name);
  if (kind == "model") return models_.ObjectOf(caller, name);
  if (!kind.empty()) {
    return Status::Msg(Code::kInvalidArgument, "share.bad_kind",
                       {{"kind", kind}, {"allowed", "run, notebook, deployment, model"}});
  }
  // A bare name: the one kind of object the caller can see that has it.
  std::vector<Result<SharedObject>> found = {run(), deployments_.ObjectOf(caller, name),
                                             models_.ObjectOf(caller, name)};
  std::vector<SharedObject> seen;
  for (auto& f : found) {
    if (f.ok()) seen.push_back(*f);
  }
  if (seen.size() == 1) return seen[0];
  if (seen.empty()) {
    // A run of another user's answers "forbidden": say that, not "unknown".
    if (found[0].status().code() == Code::kPermissionDenied) return found[0].status();
    return Status::Msg(Code::kNotFound, "share.unknown_target", {{"target", target}});
  }
  std::string choices;
  for (const auto& o : seen) choices += (choices.empty() ? "" : ", ") + o.kind + ":" + name;
  return Status::Msg(Code::kInvalidArgument, "share.ambiguous",
                     {{"target", target}, {"choices", choices}});
}

void ApiServer::ListShares(ApiCall& call) {
  const std::string target = call.req.QueryParam("target").value_or("");
  daemon::Sharing& sharing = daemon_.sharing();
  if (!target.empty()) {
    auto o = ShareTarget(call.caller, target);
    if (!o.ok()) return call.Reply(o.status());
    auto shares = sharing.SharesOf(call.caller, *o);
    if (!shares.ok()) return call.Reply(shares.status());
    Json j = {{"kind", o->kind},
              {"object", o->object},
              {"owner", o->owner_user},
              {"project", o->project},
              {"shares", SharesJson(*shares)}};
    if (o->notebook) j["notebook"] = true;
    return call.Reply(j);
  }
  auto with = sharing.SharedWith(call.caller);
  if (!with.ok()) return call.Reply(with.status());
  auto by = sharing.SharedBy(call.caller);
  if (!by.ok()) return call.Reply(by.status());
  call.Reply(Json{{"shared_with_me", SharesJson(*with)}, {"shared_by_me", SharesJson(*by)}});
}

void ApiServer::PostShare(ApiCall& call) {
  auto body = ParseJson(call.req.body.empty() ? "{}" : call.req.body);
  if (!body.ok()) return call.Reply(body.status());
  if (Status s = CheckFields(*body, {"target", "user", "group", "role"}, "share.unknown_field");
      !s.ok()) {
    return call.Reply(s);
  }
  for (const char* f : {"target", "user", "group", "role"}) {
    if (body->contains(f) && !(*body)[f].is_string()) {
      return call.Reply(Status::Msg(Code::kInvalidArgument, "spec.wrong_type",
                                    {{"field", f}, {"type", "string"}}));
    }
  }
  const std::string role_name = body->value("role", "view");
  auto role = daemon::ParseRole(role_name);
  if (!role) return call.Reply(daemon::BadRole("role", role_name));
  auto grantee = GranteeOf(body->value("user", ""), body->value("group", ""));
  if (!grantee.ok()) return call.Reply(grantee.status());
  auto o = ShareTarget(call.caller, body->value("target", ""));
  if (!o.ok()) return call.Reply(o.status());
  auto v = daemon_.sharing().Share(call.caller, *o, grantee->first, grantee->second, *role);
  if (!v.ok()) return call.Reply(v.status());
  if (o->kind == "run") RecheckRunTunnels();  // a role lowered to view
  if (o->kind == "deployment") (void)deployments_.SyncFront(5000);
  Json j = ShareToJson(*v);
  j["owner"] = o->owner_user;
  if (o->notebook) j["notebook"] = true;
  call.Reply(j, 201);
}

void ApiServer::DeleteShare(ApiCall& call) {
  auto grantee = GranteeOf(call.req.QueryParam("user").value_or(""),
                           call.req.QueryParam("group").value_or(""));
  if (!grantee.ok()) return call.Reply(grantee.status());
  auto o = ShareTarget(call.caller, call.req.QueryParam("target").value_or(""));
  if (!o.ok()) return call.Reply(o.status());
  Status s = daemon_.sharing().Unshare(call.caller, *o, grantee->first, grantee->second);
  if (!s.ok()) return call.Reply(s);
  if (o->kind == "run") RecheckRunTunnels();
  // A shared user's deployment keys stop opening it before this answers.
  if (o->kind == "deployment") {
    if (Status synced = deployments_.SyncFront(5000); !synced.ok()) {
      spdlog::warn("deployment {}: unshared, reaches the front late: {}", o->object,
                   synced.ToString());
    }
  }
  Json j = {{"kind", o->kind}, {"object", o->object}, {grantee->first, grantee->second}};
  if (o->notebook) j["notebook"] = true;
  j["removed"] = true;
  call.Reply(j);
}

// A project as every answer about it shows it: its members, what it used
// and its limits (docs/api.md, "Sharing and projects").
namespace {
Json ProjectWithUsage(daemon::Daemon& d, const state::ProjectRecord& p) {
  Json j = ProjectToJson(p);
  j["usage"] = d.ProjectUsage(p.name);
  j["limits"] = d.ProjectLimits(p.name);
  return j;
}
}  // namespace

void ApiServer::PostProject(ApiCall& call) {
  auto body = ParseJson(call.req.body.empty() ? "{}" : call.req.body);
  if (!body.ok()) return call.Reply(body.status());
  if (Status s = CheckFields(*body, {"name", "members"}, "project.unknown_field"); !s.ok()) {
    return call.Reply(s);
  }
  auto name = GetString(*body, "name");
  if (!name.ok()) return call.Reply(name.status());
  auto members = Members(*body, "members");
  if (!members.ok()) return call.Reply(members.status());
  auto p = daemon_.sharing().CreateProject(call.caller, *name, *members);
  if (!p.ok()) return call.Reply(p.status());
  call.Reply(ProjectWithUsage(daemon_, *p), 201);
}

void ApiServer::ListProjects(ApiCall& call) {
  auto list = daemon_.sharing().Projects(call.caller);
  if (!list.ok()) return call.Reply(list.status());
  Json arr = Json::array();
  for (const auto& p : *list) arr.push_back(ProjectWithUsage(daemon_, p));
  call.Reply(Json{{"projects", arr}});
}

void ApiServer::GetProject(ApiCall& call) {
  auto p = daemon_.sharing().Project(call.caller, call.Param("name"));
  if (!p.ok()) return call.Reply(p.status());
  call.Reply(ProjectWithUsage(daemon_, *p));
}

void ApiServer::PatchProject(ApiCall& call) {
  auto body = ParseJson(call.req.body.empty() ? "{}" : call.req.body);
  if (!body.ok()) return call.Reply(body.status());
  if (Status s = CheckFields(*body, {"add", "remove"}, "project.unknown_field"); !s.ok()) {
    return call.Reply(s);
  }
  auto add = Members(*body, "add");
  if (!add.ok()) return call.Reply(add.status());
  auto remove = Strings(*body, "remove");
  if (!remove.ok()) return call.Reply(remove.status());
  auto p = daemon_.sharing().ChangeMembers(call.caller, call.Param("name"), *add, *remove);
  if (!p.ok()) return call.Reply(p.status());
  // A member removed (or lowered): their keys of the project's deployments
  // stop working, their websockets to its runs end.
  (void)deployments_.SyncFront(5000);
  RecheckRunTunnels();
  call.Reply(ProjectWithUsage(daemon_, *p));
}

void ApiServer::DeleteProject(ApiCall& call) {
  const std::string name = call.Param("name");
  Status s = daemon_.sharing().DeleteProject(call.caller, name);
  if (!s.ok()) return call.Reply(s);
  (void)deployments_.SyncFront(5000);
  RecheckRunTunnels();
  call.Reply(Json{{"name", name}, {"removed", true}});
}

}  // namespace lathe::api

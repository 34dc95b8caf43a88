#include "lathe/daemon/sharing.h"

#include <algorithm>

#include "lathe/common/i18n.h"
#include "lathe/common/ids.h"
#include "lathe/os/users.h"
#include "lathe/run/spec.h"

namespace lathe::daemon {
namespace {

std::string Key(const std::string& kind, const std::string& object) { return kind + "/" + object; }

Status ProjectNotFound(const std::string& name) {
  return Status::Msg(Code::kNotFound, "project.not_found", {{"project", name}});
}

Status UnknownUser(const std::string& name) {
  return Status::Msg(Code::kInvalidArgument, "share.unknown_user", {{"user", name}});
}

// What an object's owner (or an admin) may do and nobody else.
Status CheckOwner(const Caller& caller, const SharedObject& o) {
  if (caller.admin || caller.uid == o.owner) return Status::OK();
  return Status::Msg(Code::kPermissionDenied, "share.not_owner", ObjectArgs(o));
}

Role RoleOfMember(const std::string& name) { return ParseRole(name).value_or(Role::kNone); }

}  // namespace

std::string_view RoleName(Role r) {
  switch (r) {
    case Role::kNone:
      return "none";
    case Role::kView:
      return "view";
    case Role::kUse:
      return "use";
    case Role::kManage:
      return "manage";
    case Role::kOwner:
      return "owner";
  }
  return "none";
}

std::optional<Role> ParseRole(std::string_view name) {
  if (name == "view") return Role::kView;
  if (name == "use") return Role::kUse;
  if (name == "manage") return Role::kManage;
  return std::nullopt;
}

Status BadRole(const std::string& field, const std::string& value) {
  return Status::Msg(Code::kInvalidArgument, "share.bad_role",
                     {{"field", field}, {"value", value}, {"allowed", "view, use, manage"}});
}

SharedObject RunObjectOf(const state::RunRecord& r) {
  return {"run", r.id, r.uid, r.user, r.spec.project, run::IsNotebookSpec(r.spec)};
}

std::string KindName(const SharedObject& o) { return o.notebook ? "notebook" : o.kind; }

MsgArgs ObjectArgs(const SharedObject& o) {
  const std::string kind = KindName(o);
  return {{"kind", kind},
          {"kind_zh", Tr("share.kind." + kind, Lang::kZh)},
          {"object", o.object},
          {"owner", o.owner_user}};
}

void HideEnvValues(Json& j) {
  if (!j.is_object() || !j.contains("spec") || !j["spec"].is_object()) return;
  Json& spec = j["spec"];
  if (spec.contains("env") && spec["env"].is_object()) {
    for (auto& [k, v] : spec["env"].items()) v = "(hidden)";
  }
}

Role RoleNeeded(AccessAction action) {
  switch (action) {
    case AccessAction::kRead:
      return Role::kView;
    case AccessAction::kOpen:
      return Role::kUse;
    case AccessAction::kStop:
      return Role::kManage;
    case AccessAction::kDelete:
    case AccessAction::kResumeFrom:
      return Role::kOwner;
  }
  return Role::kOwner;
}

Result<MemberRequest> ParseMember(const std::string& field, const std::string& text) {
  MemberRequest m;
  const auto colon = text.find(':');
  m.user = text.substr(0, colon);
  if (m.user.empty()) {
    return Status::Msg(Code::kInvalidArgument, "project.bad_member",
                       {{"field", field}, {"value", text}});
  }
  if (colon != std::string::npos) {
    auto role = ParseRole(text.substr(colon + 1));
    if (!role) return BadRole(field, text.substr(colon + 1));
    m.role = *role;
  }
  return m;
}

Role Reach::RoleOf(const SharedObject& o) const {
  if (admin_ || o.owner == uid_) return Role::kOwner;
  Role best = Role::kNone;
  if (auto g = grants_.find(Key(o.kind, o.object)); g != grants_.end()) best = g->second.first;
  if (!o.project.empty()) {
    if (auto p = projects_.find(o.project); p != projects_.end()) best = std::max(best, p->second);
  }
  return best;
}

std::string Reach::How(const SharedObject& o) const {
  const Role role = RoleOf(o);
  if (role == Role::kOwner || role == Role::kNone) return "";
  if (auto g = grants_.find(Key(o.kind, o.object)); g != grants_.end() && g->second.first == role) {
    return g->second.second;
  }
  return "project " + o.project;
}

Result<state::ShareStore*> Sharing::Store() {
  if (!store_) {
    ASSIGN_OR_RETURN(store_, state::ShareStore::Open(db_path_));
  }
  return store_.get();
}

ShareView Sharing::ViewOf(state::ShareRecord r) const {
  ShareView v{std::move(r), ""};
  if (v.record.grantee_kind == "user") {
    auto u = os::LookupUser(static_cast<uid_t>(std::stoul(v.record.grantee)));
    v.grantee_name = u.ok() ? u->name : v.record.grantee;
  } else {
    v.grantee_name = v.record.grantee;
  }
  return v;
}

Result<Reach> Sharing::ReachOf(const Caller& caller) {
  Reach reach;
  reach.uid_ = caller.uid;
  reach.admin_ = caller.admin;
  if (caller.admin) return reach;
  std::vector<std::string> groups;
  if (auto u = os::LookupUser(caller.uid); u.ok()) groups = os::GroupNamesOf(*u);
  MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(state::ShareStore * store, Store());
  ASSIGN_OR_RETURN(auto shares, store->To(caller.uid, groups));
  for (const auto& s : shares) {
    const Role role = RoleOfMember(s.role);
    auto& slot = reach.grants_[Key(s.kind, s.object)];
    if (role > slot.first) slot = {role, s.granted_by};
  }
  ASSIGN_OR_RETURN(auto memberships, store->MembershipsOf(caller.uid));
  for (const auto& [project, role] : memberships) {
    reach.projects_[project] = std::max(reach.projects_[project], RoleOfMember(role));
  }
  return reach;
}

Result<ShareView> Sharing::Share(const Caller& caller, const SharedObject& o,
                                 const std::string& grantee_kind, const std::string& grantee,
                                 Role role) {
  RETURN_IF_ERROR(CheckOwner(caller, o));
  state::ShareRecord r{o.kind,  o.object,    grantee_kind,  grantee, std::string(RoleName(role)),
                       o.owner, caller.user, clock_.NowMs()};
  if (grantee_kind == "user") {
    auto u = os::LookupUserByName(grantee);
    if (!u.ok()) return UnknownUser(grantee);
    if (u->uid == o.owner) {
      return Status::Msg(Code::kInvalidArgument, "share.self", {{"user", grantee}});
    }
    r.grantee = std::to_string(u->uid);
  } else if (grantee_kind == "group") {
    if (!os::GroupExists(grantee)) {
      return Status::Msg(Code::kInvalidArgument, "share.unknown_group", {{"group", grantee}});
    }
  } else {
    return Status::Msg(Code::kInvalidArgument, "share.no_grantee");
  }
  MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(state::ShareStore * store, Store());
  ASSIGN_OR_RETURN(bool created, store->Put(r));
  (void)created;
  ++generation_;
  return ViewOf(std::move(r));
}

Status Sharing::Unshare(const Caller& caller, const SharedObject& o,
                        const std::string& grantee_kind, const std::string& grantee) {
  RETURN_IF_ERROR(CheckOwner(caller, o));
  std::string key = grantee;
  if (grantee_kind == "user") {
    auto u = os::LookupUserByName(grantee);
    if (!u.ok()) return UnknownUser(grantee);
    key = std::to_string(u->uid);
  }
  MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(state::ShareStore * store, Store());
  ASSIGN_OR_RETURN(bool gone, store->Remove(o.kind, o.object, grantee_kind, key));
  ++generation_;
  if (!gone) {
    MsgArgs args = ObjectArgs(o);
    args.push_back({"grantee", grantee});
    return Status::Msg(Code::kNotFound,
                       grantee_kind == "group" ? "share.not_shared_group" : "share.not_shared",
                       std::move(args));
  }
  return Status::OK();
}

Result<std::vector<ShareView>> Sharing::SharesOf(const Caller& caller, const SharedObject& o) {
  ASSIGN_OR_RETURN(Reach reach, ReachOf(caller));
  if (reach.RoleOf(o) < Role::kManage) RETURN_IF_ERROR(CheckOwner(caller, o));
  MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(state::ShareStore * store, Store());
  ASSIGN_OR_RETURN(auto shares, store->Of(o.kind, o.object));
  std::vector<ShareView> out;
  for (auto& s : shares) out.push_back(ViewOf(std::move(s)));
  return out;
}

Result<std::vector<ShareView>> Sharing::SharedWith(const Caller& caller) {
  std::vector<std::string> groups;
  if (auto u = os::LookupUser(caller.uid); u.ok()) groups = os::GroupNamesOf(*u);
  MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(state::ShareStore * store, Store());
  ASSIGN_OR_RETURN(auto shares, store->To(caller.uid, groups));
  std::vector<ShareView> out;
  for (auto& s : shares) out.push_back(ViewOf(std::move(s)));
  return out;
}

Result<std::vector<ShareView>> Sharing::SharedBy(const Caller& caller) {
  MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(state::ShareStore * store, Store());
  ASSIGN_OR_RETURN(auto shares, store->By(caller.uid));
  std::vector<ShareView> out;
  for (auto& s : shares) out.push_back(ViewOf(std::move(s)));
  return out;
}

void Sharing::Forget(const std::string& kind, const std::string& object) {
  MutexLock lock(&mu_);
  auto store = Store();
  if (store.ok()) (void)(*store)->Forget(kind, object);
}

Result<state::ProjectMember> Sharing::MemberOf(const MemberRequest& m) {
  auto u = os::LookupUserByName(m.user);
  if (!u.ok()) return UnknownUser(m.user);
  return state::ProjectMember{u->uid, u->name, std::string(RoleName(m.role)), clock_.NowMs()};
}

Result<state::ProjectRecord> Sharing::CreateProject(const Caller& caller, const std::string& name,
                                                    const std::vector<MemberRequest>& members) {
  if (!IsValidName(name)) {
    return Status::Msg(Code::kInvalidArgument, "project.bad_name", {{"project", name}});
  }
  MutexLock lock(&mu_);
  state::ProjectRecord p{name, caller.uid, caller.user, clock_.NowMs(), {}};
  for (const auto& m : members) {
    ASSIGN_OR_RETURN(state::ProjectMember pm, MemberOf(m));
    if (pm.uid != caller.uid) p.members.push_back(std::move(pm));
  }
  ASSIGN_OR_RETURN(state::ShareStore * store, Store());
  RETURN_IF_ERROR(store->CreateProject(p));
  return ProjectFor(caller, name);
}

Result<state::ProjectRecord> Sharing::ProjectFor(const Caller& caller, const std::string& name) {
  ASSIGN_OR_RETURN(state::ShareStore * store, Store());
  ASSIGN_OR_RETURN(auto p, store->GetProject(name));
  if (!p) return ProjectNotFound(name);
  const bool member =
      std::any_of(p->members.begin(), p->members.end(),
                  [&](const state::ProjectMember& m) { return m.uid == caller.uid; });
  if (!caller.admin && p->uid != caller.uid && !member) return ProjectNotFound(name);
  return *p;
}

Result<std::vector<state::ProjectRecord>> Sharing::Projects(const Caller& caller) {
  MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(state::ShareStore * store, Store());
  ASSIGN_OR_RETURN(auto all, store->ListProjects());
  std::vector<state::ProjectRecord> out;
  for (auto& p : all) {
    const bool member = std::any_of(p.members.begin(), p.members.end(),
                                    [&](const auto& m) { return m.uid == caller.uid; });
    if (caller.admin || p.uid == caller.uid || member) out.push_back(std::move(p));
  }
  return out;
}

Result<state::ProjectRecord> Sharing::Project(const Caller& caller, const std::string& name) {
  MutexLock lock(&mu_);
  return ProjectFor(caller, name);
}

Result<state::ProjectRecord> Sharing::ChangeMembers(const Caller& caller, const std::string& name,
                                                    const std::vector<MemberRequest>& add,
                                                    const std::vector<std::string>& remove) {
  MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(state::ProjectRecord p, ProjectFor(caller, name));
  const bool manager = std::any_of(p.members.begin(), p.members.end(), [&](const auto& m) {
    return m.uid == caller.uid && m.role == "manage";
  });
  if (!caller.admin && p.uid != caller.uid && !manager) {
    return Status::Msg(Code::kPermissionDenied, "project.forbidden",
                       {{"project", name}, {"owner", p.user}});
  }
  ASSIGN_OR_RETURN(state::ShareStore * store, Store());
  ++generation_;
  for (const auto& m : add) {
    ASSIGN_OR_RETURN(state::ProjectMember pm, MemberOf(m));
    if (pm.uid != p.uid) RETURN_IF_ERROR(store->PutMember(name, pm));
  }
  for (const auto& user : remove) {
    auto u = os::LookupUserByName(user);
    if (!u.ok()) return UnknownUser(user);
    ASSIGN_OR_RETURN(bool gone, store->RemoveMember(name, u->uid));
    if (!gone) {
      return Status::Msg(Code::kNotFound, "project.not_a_member",
                         {{"project", name}, {"user", user}});
    }
  }
  return ProjectFor(caller, name);
}

Status Sharing::DeleteProject(const Caller& caller, const std::string& name) {
  MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(state::ProjectRecord p, ProjectFor(caller, name));
  if (!caller.admin && p.uid != caller.uid) {  // a manager changes members, never this
    return Status::Msg(Code::kPermissionDenied, "project.owner_only",
                       {{"project", name}, {"owner", p.user}});
  }
  ASSIGN_OR_RETURN(state::ShareStore * store, Store());
  ++generation_;
  return store->DeleteProject(name).status();
}

Status Sharing::CheckPutInto(const Caller& caller, const std::string& project) {
  MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(state::ProjectRecord p, ProjectFor(caller, project));
  if (caller.admin || p.uid == caller.uid) return Status::OK();
  for (const auto& m : p.members) {
    if (m.uid == caller.uid && RoleOfMember(m.role) >= Role::kUse) return Status::OK();
  }
  return Status::Msg(Code::kPermissionDenied, "project.not_member",
                     {{"project", project}, {"user", caller.user}});
}

}  // namespace lathe::daemon

// Sharing and projects (docs/sharing.md): who besides its owner may reach a
// run (a notebook is a run), a deployment or a model, and how far.
//
// A role is granted on one object to a user or a group (`lathe share`), or to
// every member of a project on every object that names the project (`lathe
// project`). Roles are ordered; each allows what the one before does:
//   view   — see the spec (environment values hidden), logs, metrics, events;
//   use    — also open its ports or notebook through the proxy; call a
//            deployment with a key of one's own; deploy a model;
//   manage — also stop and restart a run; scale, roll out and roll back a
//            deployment; move a model's aliases.
// Only the owner (and root or the daemon's user) removes an object, resumes
// from a run's checkpoints, shares or unshares it, and sees its secrets and
// environment values.
//
// Every request computes its caller's Reach anew, so an unshare or a member
// removed takes effect at the next request; streams re-check (api/).
//
// Thread-safe: one mutex around the store (its own database connection).
// Nothing here calls into the daemon.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "lathe/common/json.h"
#include "lathe/common/mutex.h"
#include "lathe/common/status.h"
#include "lathe/common/thread_annotations.h"
#include "lathe/daemon/runs.h"
#include "lathe/os/clock.h"
#include "lathe/state/share_store.h"

namespace lathe::daemon {

enum class Role { kNone = 0, kView, kUse, kManage, kOwner };
// "none", "view", "use", "manage", "owner".
std::string_view RoleName(Role r);
// "view", "use" or "manage"; nullopt for anything else.
std::optional<Role> ParseRole(std::string_view name);
// InvalidArgument share.bad_role naming what is allowed, for a bad `field`.
Status BadRole(const std::string& field, const std::string& value);

// One object as sharing sees it.
struct SharedObject {
  std::string kind;    // "run", "deployment", "model"
  std::string object;  // the run's id; the deployment's or model's name
  uid_t owner = 0;
  std::string owner_user;
  std::string project;    // "" when it names none
  bool notebook = false;  // a run of type notebook: a person calls it a notebook
};

// What a person calls `o`'s kind: "notebook" for a notebook's run, else
// `o.kind`.
std::string KindName(const SharedObject& o);
// The arguments a message about `o` takes: {kind} and {kind_zh} (its kind in
// each language: share.kind.*), {object}, {owner}.
MsgArgs ObjectArgs(const SharedObject& o);

// A run (a notebook too) as sharing sees it.
SharedObject RunObjectOf(const state::RunRecord& r);

// Hides what only an object's owner sees in its JSON: the values of
// `spec.env` (also under "spec" of a lineage) become "(hidden)".
void HideEnvValues(Json& j);

// What one caller reaches beyond their own objects, read once per request.
class Reach {
 public:
  Reach() = default;
  // Their role on `o`: kOwner for their own (and for an admin, on
  // everything), else the best of the shares to them or their groups and of
  // their role in `o`'s project; kNone when none.
  Role RoleOf(const SharedObject& o) const;
  // How a role below kOwner came: "alice" (shared by), "project ml"; "" for
  // kOwner and kNone.
  std::string How(const SharedObject& o) const;
  bool admin() const { return admin_; }
  uid_t uid() const { return uid_; }

 private:
  friend class Sharing;
  uid_t uid_ = 0;
  bool admin_ = false;
  std::map<std::string, std::pair<Role, std::string>> grants_;  // "kind/object" -> role, by
  std::map<std::string, Role> projects_;                        // project -> role
};

// One share as the API shows it.
struct ShareView {
  state::ShareRecord record;
  std::string grantee_name;  // the user's name (a group's is record.grantee)
};

// A project member named by the API: "alice" or "alice:manage" (default
// role: use).
struct MemberRequest {
  std::string user;
  Role role = Role::kUse;
};
// Parses "USER[:ROLE]"; InvalidArgument naming `field` otherwise.
Result<MemberRequest> ParseMember(const std::string& field, const std::string& text);

class Sharing {
 public:
  Sharing(std::string db_path, os::Clock& clock) : db_path_(std::move(db_path)), clock_(clock) {}

  Result<Reach> ReachOf(const Caller& caller) EXCLUDES(mu_);

  // Shares `o` (the caller must own it, or be an admin: share.not_owner) with
  // user or group `grantee_kind` `grantee` (share.unknown_user,
  // share.unknown_group; share.self for the owner). Replaces an earlier
  // role.
  Result<ShareView> Share(const Caller& caller, const SharedObject& o,
                          const std::string& grantee_kind, const std::string& grantee, Role role)
      EXCLUDES(mu_);
  // NotFound share.not_shared when there was no such share.
  Status Unshare(const Caller& caller, const SharedObject& o, const std::string& grantee_kind,
                 const std::string& grantee) EXCLUDES(mu_);
  // Who `o` is shared with (its owner, an admin or a manager asks).
  Result<std::vector<ShareView>> SharesOf(const Caller& caller, const SharedObject& o)
      EXCLUDES(mu_);
  // Every share to the caller (directly or through a group), and every
  // share the caller made.
  Result<std::vector<ShareView>> SharedWith(const Caller& caller) EXCLUDES(mu_);
  Result<std::vector<ShareView>> SharedBy(const Caller& caller) EXCLUDES(mu_);
  // An object that is gone takes its shares with it.
  void Forget(const std::string& kind, const std::string& object) EXCLUDES(mu_);

  // Changes with every share, unshare and project change: a cache of
  // admissions (api/run_origin_cache.h) made before it is stale.
  uint64_t generation() const { return generation_.load(); }

  // --- projects ---
  // project.bad_name, project.exists, share.unknown_user.
  Result<state::ProjectRecord> CreateProject(const Caller& caller, const std::string& name,
                                             const std::vector<MemberRequest>& members)
      EXCLUDES(mu_);
  // The projects the caller owns or is a member of (an admin: all).
  Result<std::vector<state::ProjectRecord>> Projects(const Caller& caller) EXCLUDES(mu_);
  // project.not_found for one the caller is not in (as for an unknown name).
  Result<state::ProjectRecord> Project(const Caller& caller, const std::string& name) EXCLUDES(mu_);
  // Adds or changes members, removes others: the project's owner, a member
  // with role manage, or an admin (project.forbidden).
  Result<state::ProjectRecord> ChangeMembers(const Caller& caller, const std::string& name,
                                             const std::vector<MemberRequest>& add,
                                             const std::vector<std::string>& remove) EXCLUDES(mu_);
  // The owner or an admin.
  Status DeleteProject(const Caller& caller, const std::string& name) EXCLUDES(mu_);
  // Whether the caller may put a new object into `project`: its owner or a
  // member with role use or manage (project.not_member, project.not_found).
  Status CheckPutInto(const Caller& caller, const std::string& project) EXCLUDES(mu_);

 private:
  Result<state::ShareStore*> Store() REQUIRES(mu_);
  Result<state::ProjectRecord> ProjectFor(const Caller& caller, const std::string& name)
      REQUIRES(mu_);
  Result<state::ProjectMember> MemberOf(const MemberRequest& m) REQUIRES(mu_);
  ShareView ViewOf(state::ShareRecord r) const;

  const std::string db_path_;
  os::Clock& clock_;
  Mutex mu_;
  std::unique_ptr<state::ShareStore> store_ GUARDED_BY(mu_);
  std::atomic<uint64_t> generation_{0};
};

// Whether `role` reaches what a run's `action` needs: read view, open use,
// stop manage, delete and resume-from owner.
Role RoleNeeded(AccessAction action);

}  // namespace lathe::daemon

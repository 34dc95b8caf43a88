// What is shared with whom (docs/sharing.md), in the daemon's SQLite
// database (tables shares, projects and project_members, schema v15 of
// state/schema.h).
//
// A share grants one object — a run (notebooks are runs), a deployment or a
// model — to a user or a group with a role. A project is a name with members,
// each with a role on every object that names the project.
//
// Roles are stored as their names ("view", "use", "manage"); what each allows
// is daemon/sharing.h's. Not thread-safe: daemon::Sharing serialises calls.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "lathe/common/status.h"
#include "lathe/state/db.h"

namespace lathe::state {

struct ShareRecord {
  std::string kind;          // "run", "deployment", "model"
  std::string object;        // the run's id, the deployment's or model's name
  std::string grantee_kind;  // "user" or "group"
  std::string grantee;       // the user's uid (decimal) or the group's name
  std::string role;          // "view", "use", "manage"
  uid_t owner_uid = 0;       // the object's owner when it was shared
  std::string granted_by;    // the user who shared it
  int64_t created_at_ms = 0;
};

struct ProjectMember {
  uid_t uid = 0;
  std::string user;
  std::string role;
  int64_t added_at_ms = 0;
};

struct ProjectRecord {
  std::string name;
  uid_t uid = 0;  // who created it: its owner
  std::string user;
  int64_t created_at_ms = 0;
  std::vector<ProjectMember> members;  // by user name
};

class ShareStore {
 public:
  static Result<std::unique_ptr<ShareStore>> Open(const std::string& db_path);

  // Adds the share or changes its role (created_at and granted_by become the
  // new ones'). True when it is new.
  Result<bool> Put(const ShareRecord& s);
  // False when there was none.
  Result<bool> Remove(const std::string& kind, const std::string& object,
                      const std::string& grantee_kind, const std::string& grantee);
  // Every share of one object, oldest first.
  Result<std::vector<ShareRecord>> Of(const std::string& kind, const std::string& object);
  // Every share to user `uid` or to one of `groups`.
  Result<std::vector<ShareRecord>> To(uid_t uid, const std::vector<std::string>& groups);
  // Every share made by owner `uid` (what they shared).
  Result<std::vector<ShareRecord>> By(uid_t uid);
  // Forgets every share of an object that is gone (a removed run, model or
  // deployment).
  Status Forget(const std::string& kind, const std::string& object);

  // Projects.
  // AlreadyExists (project.exists) when the name is taken.
  Status CreateProject(const ProjectRecord& p);
  Result<std::optional<ProjectRecord>> GetProject(const std::string& name);
  Result<std::vector<ProjectRecord>> ListProjects();  // by name
  // Adds a member or changes their role.
  Status PutMember(const std::string& project, const ProjectMember& m);
  Result<bool> RemoveMember(const std::string& project, uid_t uid);
  Result<bool> DeleteProject(const std::string& name);
  // The projects `uid` is a member of, with their role there.
  Result<std::vector<std::pair<std::string, std::string>>> MembershipsOf(uid_t uid);

 private:
  explicit ShareStore(std::unique_ptr<Db> db) : db_(std::move(db)) {}
  Result<std::vector<ProjectMember>> Members(const std::string& project);

  std::unique_ptr<Db> db_;
};

}  // namespace lathe::state

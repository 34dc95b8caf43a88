#include "lathe/state/share_store.h"

#include "lathe/common/json.h"
#include "lathe/state/schema.h"

namespace lathe::state {
namespace {

constexpr const char* kShareCols =
    "SELECT kind, object, grantee_kind, grantee, role, owner_uid, granted_by, created_at "
    "FROM shares ";

ShareRecord ShareRow(Stmt& s) {
  return {s.Text(0), s.Text(1), s.Text(2), s.Text(3), s.Text(4), static_cast<uid_t>(s.Int(5)),
          s.Text(6), s.Int(7)};
}

}  // namespace

Result<std::unique_ptr<ShareStore>> ShareStore::Open(const std::string& db_path) {
  ASSIGN_OR_RETURN(std::unique_ptr<Db> db, OpenLatheDb(db_path));
  return std::unique_ptr<ShareStore>(new ShareStore(std::move(db)));
}

Result<bool> ShareStore::Put(const ShareRecord& r) {
  bool created = false;
  RETURN_IF_ERROR(db_->Transaction([&]() -> Status {
    ASSIGN_OR_RETURN(Stmt q, db_->Prepare("SELECT 1 FROM shares WHERE kind=? AND object=? AND "
                                          "grantee_kind=? AND grantee=?"));
    q.Bind(1, r.kind).Bind(2, r.object).Bind(3, r.grantee_kind).Bind(4, r.grantee);
    ASSIGN_OR_RETURN(bool exists, q.Step());
    created = !exists;
    ASSIGN_OR_RETURN(Stmt s,
                     db_->Prepare("INSERT INTO shares (kind, object, grantee_kind, grantee, role, "
                                  "owner_uid, granted_by, created_at) VALUES (?,?,?,?,?,?,?,?) "
                                  "ON CONFLICT (kind, object, grantee_kind, grantee) DO UPDATE SET "
                                  "role=excluded.role, granted_by=excluded.granted_by, "
                                  "created_at=excluded.created_at"));
    s.Bind(1, r.kind).Bind(2, r.object).Bind(3, r.grantee_kind).Bind(4, r.grantee);
    s.Bind(5, r.role).Bind(6, int64_t{r.owner_uid}).Bind(7, r.granted_by).Bind(8, r.created_at_ms);
    return s.Run();
  }));
  return created;
}

Result<bool> ShareStore::Remove(const std::string& kind, const std::string& object,
                                const std::string& grantee_kind, const std::string& grantee) {
  ASSIGN_OR_RETURN(Stmt s, db_->Prepare("DELETE FROM shares WHERE kind=? AND object=? AND "
                                        "grantee_kind=? AND grantee=?"));
  s.Bind(1, kind).Bind(2, object).Bind(3, grantee_kind).Bind(4, grantee);
  RETURN_IF_ERROR(s.Run());
  return db_->Changes() > 0;
}

Result<std::vector<ShareRecord>> ShareStore::Of(const std::string& kind,
                                                const std::string& object) {
  ASSIGN_OR_RETURN(Stmt s, db_->Prepare(std::string(kShareCols) +
                                        "WHERE kind=? AND object=? ORDER BY created_at"));
  s.Bind(1, kind).Bind(2, object);
  return CollectRows<ShareRecord>(s, ShareRow);
}

Result<std::vector<ShareRecord>> ShareStore::To(uid_t uid, const std::vector<std::string>& groups) {
  std::string sql = std::string(kShareCols) +
                    "WHERE (grantee_kind='user' AND grantee=?) OR (grantee_kind='group' AND "
                    "grantee IN (SELECT value FROM json_each(?))) ORDER BY created_at";
  ASSIGN_OR_RETURN(Stmt s, db_->Prepare(sql));
  std::string list = "[";
  for (const auto& g : groups) {
    list += (list.size() > 1 ? "," : "") + Json(g).dump();
  }
  list += "]";
  s.Bind(1, std::to_string(uid)).Bind(2, list);
  return CollectRows<ShareRecord>(s, ShareRow);
}

Result<std::vector<ShareRecord>> ShareStore::By(uid_t uid) {
  ASSIGN_OR_RETURN(Stmt s,
                   db_->Prepare(std::string(kShareCols) + "WHERE owner_uid=? ORDER BY created_at"));
  s.Bind(1, int64_t{uid});
  return CollectRows<ShareRecord>(s, ShareRow);
}

Status ShareStore::Forget(const std::string& kind, const std::string& object) {
  ASSIGN_OR_RETURN(Stmt s, db_->Prepare("DELETE FROM shares WHERE kind=? AND object=?"));
  s.Bind(1, kind).Bind(2, object);
  return s.Run();
}

Status ShareStore::CreateProject(const ProjectRecord& p) {
  return db_->Transaction([&]() -> Status {
    ASSIGN_OR_RETURN(Stmt q, db_->Prepare("SELECT 1 FROM projects WHERE name=?"));
    q.Bind(1, p.name);
    ASSIGN_OR_RETURN(bool exists, q.Step());
    if (exists) return Status::Msg(Code::kAlreadyExists, "project.exists", {{"project", p.name}});
    ASSIGN_OR_RETURN(Stmt s, db_->Prepare("INSERT INTO projects (name, uid, user, created_at) "
                                          "VALUES (?,?,?,?)"));
    s.Bind(1, p.name).Bind(2, int64_t{p.uid}).Bind(3, p.user).Bind(4, p.created_at_ms);
    RETURN_IF_ERROR(s.Run());
    for (const auto& m : p.members) RETURN_IF_ERROR(PutMember(p.name, m));
    return Status::OK();
  });
}

Result<std::vector<ProjectMember>> ShareStore::Members(const std::string& project) {
  ASSIGN_OR_RETURN(Stmt s, db_->Prepare("SELECT uid, user, role, added_at FROM project_members "
                                        "WHERE project=? ORDER BY user"));
  s.Bind(1, project);
  return CollectRows<ProjectMember>(s, [](Stmt& r) {
    return ProjectMember{static_cast<uid_t>(r.Int(0)), r.Text(1), r.Text(2), r.Int(3)};
  });
}

Result<std::optional<ProjectRecord>> ShareStore::GetProject(const std::string& name) {
  ASSIGN_OR_RETURN(Stmt s,
                   db_->Prepare("SELECT name, uid, user, created_at FROM projects WHERE name=?"));
  s.Bind(1, name);
  ASSIGN_OR_RETURN(bool row, s.Step());
  if (!row) return std::optional<ProjectRecord>();
  ProjectRecord p{s.Text(0), static_cast<uid_t>(s.Int(1)), s.Text(2), s.Int(3), {}};
  ASSIGN_OR_RETURN(p.members, Members(p.name));
  return std::optional<ProjectRecord>(std::move(p));
}

Result<std::vector<ProjectRecord>> ShareStore::ListProjects() {
  ASSIGN_OR_RETURN(Stmt s,
                   db_->Prepare("SELECT name, uid, user, created_at FROM projects ORDER BY name"));
  ASSIGN_OR_RETURN(
      auto out, CollectRows<ProjectRecord>(s, [](Stmt& r) {
        return ProjectRecord{r.Text(0), static_cast<uid_t>(r.Int(1)), r.Text(2), r.Int(3), {}};
      }));
  for (auto& p : out) {
    ASSIGN_OR_RETURN(p.members, Members(p.name));
  }
  return out;
}

Status ShareStore::PutMember(const std::string& project, const ProjectMember& m) {
  ASSIGN_OR_RETURN(Stmt s,
                   db_->Prepare("INSERT INTO project_members (project, uid, user, role, added_at) "
                                "VALUES (?,?,?,?,?) ON CONFLICT (project, uid) DO UPDATE SET "
                                "role=excluded.role, user=excluded.user"));
  s.Bind(1, project).Bind(2, int64_t{m.uid}).Bind(3, m.user).Bind(4, m.role).Bind(5, m.added_at_ms);
  return s.Run();
}

Result<bool> ShareStore::RemoveMember(const std::string& project, uid_t uid) {
  ASSIGN_OR_RETURN(Stmt s, db_->Prepare("DELETE FROM project_members WHERE project=? AND uid=?"));
  s.Bind(1, project).Bind(2, int64_t{uid});
  RETURN_IF_ERROR(s.Run());
  return db_->Changes() > 0;
}

Result<bool> ShareStore::DeleteProject(const std::string& name) {
  bool gone = false;
  RETURN_IF_ERROR(db_->Transaction([&]() -> Status {
    ASSIGN_OR_RETURN(Stmt m, db_->Prepare("DELETE FROM project_members WHERE project=?"));
    m.Bind(1, name);
    RETURN_IF_ERROR(m.Run());
    ASSIGN_OR_RETURN(Stmt s, db_->Prepare("DELETE FROM projects WHERE name=?"));
    s.Bind(1, name);
    RETURN_IF_ERROR(s.Run());
    gone = db_->Changes() > 0;
    return Status::OK();
  }));
  return gone;
}

Result<std::vector<std::pair<std::string, std::string>>> ShareStore::MembershipsOf(uid_t uid) {
  ASSIGN_OR_RETURN(Stmt s, db_->Prepare("SELECT project, role FROM project_members WHERE uid=? "
                                        "UNION SELECT name, 'manage' FROM projects WHERE uid=?"));
  s.Bind(1, int64_t{uid}).Bind(2, int64_t{uid});
  return CollectRows<std::pair<std::string, std::string>>(
      s, [](Stmt& r) { return std::make_pair(r.Text(0), r.Text(1)); });
}

}  // namespace lathe::state

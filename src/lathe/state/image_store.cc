#include "lathe/state/image_store.h"

#include "lathe/state/schema.h"

namespace lathe::state {

Result<std::unique_ptr<ImageStore>> ImageStore::Open(const std::string& db_path) {
  ASSIGN_OR_RETURN(std::unique_ptr<Db> db, OpenLatheDb(db_path));
  return std::unique_ptr<ImageStore>(new ImageStore(std::move(db)));
}

Result<std::optional<std::string>> ImageStore::Put(const ImageName& n, int64_t now_ms) {
  std::optional<std::string> before;
  RETURN_IF_ERROR(db_->Transaction([&]() -> Status {
    ASSIGN_OR_RETURN(Stmt q, db_->Prepare("SELECT id FROM images WHERE uid=? AND name=?"));
    q.Bind(1, int64_t{n.uid}).Bind(2, n.name);
    ASSIGN_OR_RETURN(bool row, q.Step());
    if (row) before = q.Text(0);
    ASSIGN_OR_RETURN(Stmt s, db_->Prepare("INSERT INTO images (uid, name, id, source, created_at) "
                                          "VALUES (?,?,?,?,?) ON CONFLICT (uid, name) DO UPDATE "
                                          "SET id=excluded.id, source=excluded.source, "
                                          "created_at=excluded.created_at"));
    s.Bind(1, int64_t{n.uid}).Bind(2, n.name).Bind(3, n.id).Bind(4, n.source).Bind(5, now_ms);
    RETURN_IF_ERROR(s.Run());
    ASSIGN_OR_RETURN(Stmt g, db_->Prepare("INSERT INTO image_grants (uid, id, granted_at) "
                                          "VALUES (?,?,?) ON CONFLICT (uid, id) DO NOTHING"));
    g.Bind(1, int64_t{n.uid}).Bind(2, n.id).Bind(3, now_ms);
    return g.Run();
  }));
  return before;
}

namespace {
ImageName NameRow(const Stmt& s) {
  return ImageName{static_cast<uid_t>(s.Int(0)), s.Text(1), s.Text(2), s.Text(3), s.Int(4)};
}
constexpr char kNameCols[] = "SELECT uid, name, id, source, created_at FROM images ";

// Every row of a query of kNameCols.
Result<std::vector<ImageName>> NameRows(Stmt& s) {
  std::vector<ImageName> out;
  while (true) {
    ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) break;
    out.push_back(NameRow(s));
  }
  return out;
}
}  // namespace

Result<std::optional<ImageName>> ImageStore::Find(uid_t uid, const std::string& name) {
  ASSIGN_OR_RETURN(Stmt s, db_->Prepare(std::string(kNameCols) + "WHERE uid=? AND name=?"));
  s.Bind(1, int64_t{uid}).Bind(2, name);
  ASSIGN_OR_RETURN(bool row, s.Step());
  if (!row) return std::optional<ImageName>();
  return std::optional<ImageName>(NameRow(s));
}

Result<std::vector<ImageName>> ImageStore::List(uid_t uid) {
  ASSIGN_OR_RETURN(Stmt s, db_->Prepare(std::string(kNameCols) + "WHERE uid=? ORDER BY name"));
  s.Bind(1, int64_t{uid});
  return NameRows(s);
}

Result<std::vector<ImageName>> ImageStore::ListAll() {
  ASSIGN_OR_RETURN(Stmt s, db_->Prepare(std::string(kNameCols) + "ORDER BY uid, name"));
  return NameRows(s);
}

Result<std::vector<std::string>> ImageStore::NamesOf(uid_t uid, const std::string& id) {
  ASSIGN_OR_RETURN(Stmt s,
                   db_->Prepare("SELECT name FROM images WHERE uid=? AND id=? ORDER BY name"));
  s.Bind(1, int64_t{uid}).Bind(2, id);
  std::vector<std::string> out;
  while (true) {
    ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) break;
    out.push_back(s.Text(0));
  }
  return out;
}

Result<bool> ImageStore::RemoveName(uid_t uid, const std::string& name) {
  ASSIGN_OR_RETURN(std::optional<ImageName> found, Find(uid, name));
  if (!found) return false;
  ASSIGN_OR_RETURN(Stmt s, db_->Prepare("DELETE FROM images WHERE uid=? AND name=?"));
  s.Bind(1, int64_t{uid}).Bind(2, name);
  RETURN_IF_ERROR(s.Run());
  return true;
}

Result<bool> ImageStore::HasGrant(uid_t uid, const std::string& id) {
  ASSIGN_OR_RETURN(Stmt s, db_->Prepare("SELECT 1 FROM image_grants WHERE uid=? AND id=?"));
  s.Bind(1, int64_t{uid}).Bind(2, id);
  return s.Step();
}

Result<std::vector<ImageGrant>> ImageStore::Grants(uid_t uid) {
  ASSIGN_OR_RETURN(Stmt s, db_->Prepare("SELECT uid, id, granted_at, last_used_at FROM "
                                        "image_grants WHERE uid=? ORDER BY granted_at"));
  s.Bind(1, int64_t{uid});
  std::vector<ImageGrant> out;
  while (true) {
    ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) break;
    out.push_back({static_cast<uid_t>(s.Int(0)), s.Text(1), s.Int(2), s.Int(3)});
  }
  return out;
}

Status ImageStore::RevokeGrant(uid_t uid, const std::string& id) {
  ASSIGN_OR_RETURN(Stmt s, db_->Prepare("DELETE FROM image_grants WHERE uid=? AND id=?"));
  s.Bind(1, int64_t{uid}).Bind(2, id);
  return s.Run();
}

Status ImageStore::TouchGrant(uid_t uid, const std::string& id, int64_t now_ms) {
  ASSIGN_OR_RETURN(Stmt s,
                   db_->Prepare("UPDATE image_grants SET last_used_at=? WHERE uid=? AND id=?"));
  s.Bind(1, now_ms).Bind(2, int64_t{uid}).Bind(3, id);
  return s.Run();
}

Result<std::vector<ImageGrant>> ImageStore::AllIds() {
  ASSIGN_OR_RETURN(Stmt s, db_->Prepare("SELECT id, MIN(granted_at), MAX(last_used_at) FROM "
                                        "image_grants GROUP BY id ORDER BY id"));
  std::vector<ImageGrant> out;
  while (true) {
    ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) break;
    out.push_back({0, s.Text(0), s.Int(1), s.Int(2)});
  }
  return out;
}

Status ImageStore::Forget(const std::string& id) {
  return db_->Transaction([&]() -> Status {
    for (const char* sql :
         {"DELETE FROM images WHERE id=?", "DELETE FROM image_grants WHERE id=?"}) {
      ASSIGN_OR_RETURN(Stmt s, db_->Prepare(sql));
      s.Bind(1, id);
      RETURN_IF_ERROR(s.Run());
    }
    return Status::OK();
  });
}

}  // namespace lathe::state

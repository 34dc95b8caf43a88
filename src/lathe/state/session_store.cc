#include "lathe/state/session_store.h"

#include "lathe/state/run_store.h"
#include "lathe/state/schema.h"

namespace lathe::state {
namespace {

constexpr const char* kSessionColumns =
    "id, uid, user, scope, secret_hash, created_at, expires_at, last_used_at, created_by";

SessionRow RowToSession(const Stmt& s) {
  SessionRow r;
  r.id = s.Text(0);
  r.uid = static_cast<uid_t>(s.Int(1));
  r.user = s.Text(2);
  r.scope = s.Text(3);
  r.secret_hash = s.Text(4);
  r.created_at_ms = s.Int(5);
  r.expires_at_ms = s.Int(6);
  r.last_used_at_ms = s.Int(7);
  r.created_by = s.Text(8);
  return r;
}

}  // namespace

Result<std::unique_ptr<SessionStore>> SessionStore::Open(const std::string& db_path) {
  ASSIGN_OR_RETURN(std::unique_ptr<Db> db, OpenLatheDb(db_path));
  return std::unique_ptr<SessionStore>(new SessionStore(std::move(db)));
}

Status SessionStore::Insert(const SessionRow& r) {
  ASSIGN_OR_RETURN(Stmt s, db_->Prepare(std::string("INSERT INTO browser_sessions (") +
                                        kSessionColumns + ") VALUES (?,?,?,?,?,?,?,?,?)"));
  s.Bind(1, r.id).Bind(2, int64_t{r.uid}).Bind(3, r.user).Bind(4, r.scope).Bind(5, r.secret_hash);
  s.Bind(6, r.created_at_ms).Bind(7, r.expires_at_ms).Bind(8, r.last_used_at_ms);
  s.Bind(9, r.created_by);
  return s.Run();
}

Result<std::vector<SessionRow>> SessionStore::Query(const std::string& where_sql,
                                                    const std::optional<std::string>& arg) {
  ASSIGN_OR_RETURN(Stmt s, db_->Prepare(std::string("SELECT ") + kSessionColumns +
                                        " FROM browser_sessions " + where_sql));
  if (arg) s.Bind(1, *arg);
  return CollectRows<SessionRow>(s, RowToSession);
}

Result<std::optional<SessionRow>> SessionStore::Get(const std::string& id) {
  ASSIGN_OR_RETURN(auto rows, Query("WHERE id=?", id));
  if (rows.empty()) return std::optional<SessionRow>();
  return std::optional<SessionRow>(std::move(rows[0]));
}

Result<std::vector<SessionRow>> SessionStore::List(std::optional<uid_t> uid) {
  if (uid) return Query("WHERE uid=? ORDER BY created_at DESC, id", std::to_string(*uid));
  return Query("ORDER BY created_at DESC, id", std::nullopt);
}

Result<int64_t> SessionStore::Changes() {
  ASSIGN_OR_RETURN(Stmt c, db_->Prepare("SELECT changes()"));
  ASSIGN_OR_RETURN(bool row, c.Step());
  return row ? c.Int(0) : 0;
}

Result<bool> SessionStore::Delete(const std::string& id) {
  ASSIGN_OR_RETURN(Stmt s, db_->Prepare("DELETE FROM browser_sessions WHERE id=?"));
  s.Bind(1, id);
  RETURN_IF_ERROR(s.Run());
  ASSIGN_OR_RETURN(int64_t n, Changes());
  return n > 0;
}

Status SessionStore::Touch(const std::string& id, int64_t now_ms) {
  ASSIGN_OR_RETURN(Stmt s, db_->Prepare("UPDATE browser_sessions SET last_used_at=? WHERE id=?"));
  s.Bind(1, now_ms).Bind(2, id);
  return s.Run();
}

Result<int64_t> SessionStore::DeleteExpired(int64_t now_ms, int64_t idle_ms) {
  ASSIGN_OR_RETURN(Stmt s, db_->Prepare("DELETE FROM browser_sessions WHERE expires_at<=? OR "
                                        "last_used_at<=?"));
  s.Bind(1, now_ms).Bind(2, now_ms - idle_ms);
  RETURN_IF_ERROR(s.Run());
  return Changes();
}

Result<std::string> SessionStore::KeyOrInsert(const std::string& name, const std::string& fresh) {
  ASSIGN_OR_RETURN(Stmt ins,
                   db_->Prepare("INSERT OR IGNORE INTO session_keys (name, key) VALUES (?,?)"));
  ins.Bind(1, name).Bind(2, fresh);
  RETURN_IF_ERROR(ins.Run());
  ASSIGN_OR_RETURN(Stmt s, db_->Prepare("SELECT key FROM session_keys WHERE name=?"));
  s.Bind(1, name);
  ASSIGN_OR_RETURN(bool row, s.Step());
  if (!row) return Status::Internal("session_keys: the key '" + name + "' vanished");
  return s.Text(0);
}

}  // namespace lathe::state

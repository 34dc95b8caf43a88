#include "lathe/state/deploy_key_store.h"

#include "lathe/state/run_store.h"
#include "lathe/state/schema.h"

namespace lathe::state {
namespace {

constexpr const char* kKeyColumns =
    "id, deployment, uid, user, name, secret_hash, created_at, expires_at, last_used_at, "
    "created_by";

DeployKeyRecord RowToKey(const Stmt& s) {
  DeployKeyRecord r;
  r.id = s.Text(0);
  r.deployment = s.Text(1);
  r.uid = static_cast<uid_t>(s.Int(2));
  r.user = s.Text(3);
  r.name = s.Text(4);
  r.secret_hash = s.Text(5);
  r.created_at_ms = s.Int(6);
  r.expires_at_ms = s.Int(7);
  r.last_used_at_ms = s.Int(8);
  r.created_by = s.Text(9);
  return r;
}

std::string Select(const char* where_sql) {
  return std::string("SELECT ") + kKeyColumns + " FROM deploy_keys " + where_sql;
}

}  // namespace

Result<std::unique_ptr<DeployKeyStore>> DeployKeyStore::Open(const std::string& db_path) {
  ASSIGN_OR_RETURN(std::unique_ptr<Db> db, OpenLatheDb(db_path));
  return std::unique_ptr<DeployKeyStore>(new DeployKeyStore(std::move(db)));
}

Status DeployKeyStore::Insert(const DeployKeyRecord& r) {
  ASSIGN_OR_RETURN(Stmt s, db_->Prepare(std::string("INSERT INTO deploy_keys (") + kKeyColumns +
                                        ") VALUES (?,?,?,?,?,?,?,?,?,?)"));
  s.Bind(1, r.id).Bind(2, r.deployment).Bind(3, int64_t{r.uid}).Bind(4, r.user).Bind(5, r.name);
  s.Bind(6, r.secret_hash).Bind(7, r.created_at_ms).Bind(8, r.expires_at_ms);
  s.Bind(9, r.last_used_at_ms).Bind(10, r.created_by);
  return s.Run();
}

Result<std::optional<DeployKeyRecord>> DeployKeyStore::Get(const std::string& id) {
  ASSIGN_OR_RETURN(Stmt s, db_->Prepare(Select("WHERE id=?")));
  s.Bind(1, id);
  ASSIGN_OR_RETURN(auto rows, CollectRows<DeployKeyRecord>(s, RowToKey));
  if (rows.empty()) return std::optional<DeployKeyRecord>();
  return std::optional<DeployKeyRecord>(std::move(rows[0]));
}

Result<std::vector<DeployKeyRecord>> DeployKeyStore::List(const std::string& deployment,
                                                          std::optional<uid_t> uid) {
  ASSIGN_OR_RETURN(Stmt s, db_->Prepare(Select(uid ? "WHERE deployment=? AND uid=? "
                                                     "ORDER BY created_at DESC, id"
                                                   : "WHERE deployment=? "
                                                     "ORDER BY created_at DESC, id")));
  s.Bind(1, deployment);
  if (uid) s.Bind(2, int64_t{*uid});
  return CollectRows<DeployKeyRecord>(s, RowToKey);
}

Result<int64_t> DeployKeyStore::CountLive(const std::string& deployment, int64_t now_ms) {
  ASSIGN_OR_RETURN(Stmt s, db_->Prepare("SELECT COUNT(*) FROM deploy_keys WHERE deployment=? "
                                        "AND (expires_at=0 OR expires_at>?)"));
  s.Bind(1, deployment).Bind(2, now_ms);
  ASSIGN_OR_RETURN(bool row, s.Step());
  return row ? s.Int(0) : 0;
}

Result<int64_t> DeployKeyStore::Changes() {
  ASSIGN_OR_RETURN(Stmt c, db_->Prepare("SELECT changes()"));
  ASSIGN_OR_RETURN(bool row, c.Step());
  return row ? c.Int(0) : 0;
}

Result<bool> DeployKeyStore::Delete(const std::string& id) {
  ASSIGN_OR_RETURN(Stmt s, db_->Prepare("DELETE FROM deploy_keys WHERE id=?"));
  s.Bind(1, id);
  RETURN_IF_ERROR(s.Run());
  ASSIGN_OR_RETURN(int64_t n, Changes());
  return n > 0;
}

Result<int64_t> DeployKeyStore::DeleteAll(const std::string& deployment) {
  ASSIGN_OR_RETURN(Stmt s, db_->Prepare("DELETE FROM deploy_keys WHERE deployment=?"));
  s.Bind(1, deployment);
  RETURN_IF_ERROR(s.Run());
  return Changes();
}

Status DeployKeyStore::Touch(const std::string& id, int64_t now_ms) {
  ASSIGN_OR_RETURN(Stmt s, db_->Prepare("UPDATE deploy_keys SET last_used_at=? WHERE id=?"));
  s.Bind(1, now_ms).Bind(2, id);
  return s.Run();
}

}  // namespace lathe::state

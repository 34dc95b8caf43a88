#include "lathe/state/token_store.h"

#include "lathe/state/run_store.h"
#include "lathe/state/schema.h"

namespace lathe::state {
namespace {

constexpr const char* kTokenColumns =
    "id, uid, user, name, secret_hash, created_at, expires_at, last_used_at, created_by";

TokenRecord RowToToken(const Stmt& s) {
  TokenRecord r;
  r.id = s.Text(0);
  r.uid = static_cast<uid_t>(s.Int(1));
  r.user = s.Text(2);
  r.name = s.Text(3);
  r.secret_hash = s.Text(4);
  r.created_at_ms = s.Int(5);
  r.expires_at_ms = s.Int(6);
  r.last_used_at_ms = s.Int(7);
  r.created_by = s.Text(8);
  return r;
}

}  // namespace

Result<std::unique_ptr<TokenStore>> TokenStore::Open(const std::string& db_path) {
  ASSIGN_OR_RETURN(std::unique_ptr<Db> db, OpenLatheDb(db_path));
  return std::unique_ptr<TokenStore>(new TokenStore(std::move(db)));
}

Status TokenStore::Insert(const TokenRecord& r) {
  ASSIGN_OR_RETURN(Stmt s, db_->Prepare(std::string("INSERT INTO api_tokens (") + kTokenColumns +
                                        ") VALUES (?,?,?,?,?,?,?,?,?)"));
  s.Bind(1, r.id).Bind(2, int64_t{r.uid}).Bind(3, r.user).Bind(4, r.name).Bind(5, r.secret_hash);
  s.Bind(6, r.created_at_ms).Bind(7, r.expires_at_ms).Bind(8, r.last_used_at_ms);
  s.Bind(9, r.created_by);
  return s.Run();
}

Result<std::vector<TokenRecord>> TokenStore::Query(const std::string& where_sql,
                                                   const std::optional<std::string>& arg) {
  ASSIGN_OR_RETURN(Stmt s, db_->Prepare(std::string("SELECT ") + kTokenColumns +
                                        " FROM api_tokens " + where_sql));
  if (arg) s.Bind(1, *arg);
  return CollectRows<TokenRecord>(s, RowToToken);
}

Result<std::optional<TokenRecord>> TokenStore::Get(const std::string& id) {
  ASSIGN_OR_RETURN(auto rows, Query("WHERE id=?", id));
  if (rows.empty()) return std::optional<TokenRecord>();
  return std::optional<TokenRecord>(std::move(rows[0]));
}

Result<std::vector<TokenRecord>> TokenStore::List(std::optional<uid_t> uid) {
  if (uid) return Query("WHERE uid=? ORDER BY created_at DESC, id", std::to_string(*uid));
  return Query("ORDER BY created_at DESC, id", std::nullopt);
}

Result<int64_t> TokenStore::CountFor(uid_t uid) {
  ASSIGN_OR_RETURN(Stmt s, db_->Prepare("SELECT COUNT(*) FROM api_tokens WHERE uid=?"));
  s.Bind(1, int64_t{uid});
  ASSIGN_OR_RETURN(bool row, s.Step());
  return row ? s.Int(0) : 0;
}

Result<int64_t> TokenStore::Changes() {
  ASSIGN_OR_RETURN(Stmt c, db_->Prepare("SELECT changes()"));
  ASSIGN_OR_RETURN(bool row, c.Step());
  return row ? c.Int(0) : 0;
}

Result<bool> TokenStore::Delete(const std::string& id) {
  ASSIGN_OR_RETURN(Stmt s, db_->Prepare("DELETE FROM api_tokens WHERE id=?"));
  s.Bind(1, id);
  RETURN_IF_ERROR(s.Run());
  ASSIGN_OR_RETURN(int64_t n, Changes());
  return n > 0;
}

Status TokenStore::Touch(const std::string& id, int64_t now_ms) {
  ASSIGN_OR_RETURN(Stmt s, db_->Prepare("UPDATE api_tokens SET last_used_at=? WHERE id=?"));
  s.Bind(1, now_ms).Bind(2, id);
  return s.Run();
}

}  // namespace lathe::state

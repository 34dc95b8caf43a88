#include "lathe/state/credential_store.h"

#include "lathe/common/credential_format.h"
#include "lathe/state/schema.h"

namespace lathe::state {
namespace {

constexpr const char* kColumns =
    "id, kind, uid, user, name, scope, secret_hash, created_at, expires_at, last_used_at, "
    "created_by";

CredentialKind KindOf(std::string_view name) {
  if (name == "session") return CredentialKind::kSession;
  if (name == "deploy_key") return CredentialKind::kDeployKey;
  return CredentialKind::kToken;
}

CredentialRecord RowToCredential(const Stmt& s) {
  CredentialRecord r;
  r.id = s.Text(0);
  r.kind = KindOf(s.Text(1));
  r.uid = static_cast<uid_t>(s.Int(2));
  r.user = s.Text(3);
  r.name = s.Text(4);
  r.scope = s.Text(5);
  r.secret_hash = s.Text(6);
  r.created_at_ms = s.Int(7);
  r.expires_at_ms = s.Int(8);
  r.last_used_at_ms = s.Int(9);
  r.created_by = s.Text(10);
  return r;
}

// The WHERE clause of `f`; BindWhere binds its values from 1 on.
std::string WhereOf(const CredentialFilter& f) {
  std::string sql = "WHERE kind=?";
  if (f.uid) sql += " AND uid=?";
  if (f.scope) sql += " AND scope=?";
  if (f.live_at_ms != 0) sql += " AND (expires_at=0 OR expires_at>?)";
  return sql;
}

void BindWhere(Stmt& s, const CredentialFilter& f) {
  int i = 1;
  s.Bind(i++, CredentialKindName(f.kind));
  if (f.uid) s.Bind(i++, int64_t{*f.uid});
  if (f.scope) s.Bind(i++, *f.scope);
  if (f.live_at_ms != 0) s.Bind(i++, f.live_at_ms);
}

}  // namespace

std::string_view CredentialKindName(CredentialKind kind) {
  switch (kind) {
    case CredentialKind::kToken:
      return "token";
    case CredentialKind::kSession:
      return "session";
    case CredentialKind::kDeployKey:
      return "deploy_key";
  }
  return "token";
}

Result<std::unique_ptr<CredentialStore>> CredentialStore::Open(const std::string& db_path) {
  ASSIGN_OR_RETURN(std::unique_ptr<Db> db, OpenLatheDb(db_path));
  return std::unique_ptr<CredentialStore>(new CredentialStore(std::move(db)));
}

Status CredentialStore::Insert(const CredentialRecord& r) {
  ASSIGN_OR_RETURN(Stmt s, db_->Prepare(std::string("INSERT INTO credentials (") + kColumns +
                                        ") VALUES (?,?,?,?,?,?,?,?,?,?,?)"));
  s.Bind(1, r.id).Bind(2, CredentialKindName(r.kind)).Bind(3, int64_t{r.uid}).Bind(4, r.user);
  s.Bind(5, r.name).Bind(6, r.scope).Bind(7, r.secret_hash).Bind(8, r.created_at_ms);
  s.Bind(9, r.expires_at_ms).Bind(10, r.last_used_at_ms).Bind(11, r.created_by);
  return s.Run();
}

Result<std::optional<CredentialRecord>> CredentialStore::Get(CredentialKind kind,
                                                             const std::string& id) {
  ASSIGN_OR_RETURN(Stmt s, db_->Prepare(std::string("SELECT ") + kColumns +
                                        " FROM credentials WHERE id=? AND kind=?"));
  s.Bind(1, id).Bind(2, CredentialKindName(kind));
  ASSIGN_OR_RETURN(auto rows, CollectRows<CredentialRecord>(s, RowToCredential));
  if (rows.empty()) return std::optional<CredentialRecord>();
  return std::optional<CredentialRecord>(std::move(rows[0]));
}

Result<std::vector<CredentialRecord>> CredentialStore::List(const CredentialFilter& f) {
  ASSIGN_OR_RETURN(Stmt s, db_->Prepare(std::string("SELECT ") + kColumns + " FROM credentials " +
                                        WhereOf(f) + " ORDER BY created_at DESC, id"));
  BindWhere(s, f);
  return CollectRows<CredentialRecord>(s, RowToCredential);
}

Result<int64_t> CredentialStore::Count(const CredentialFilter& f) {
  ASSIGN_OR_RETURN(Stmt s, db_->Prepare("SELECT COUNT(*) FROM credentials " + WhereOf(f)));
  BindWhere(s, f);
  ASSIGN_OR_RETURN(bool row, s.Step());
  return row ? s.Int(0) : 0;
}

Result<Verified> CredentialStore::Verify(CredentialKind kind, const std::string& id,
                                         std::string_view secret, const VerifyRules& rules,
                                         int64_t now_ms) {
  using Verdict = Verified::Verdict;
  ASSIGN_OR_RETURN(std::optional<CredentialRecord> r, Get(kind, id));
  // One answer for an unknown id, a wrong secret and another scope: an id
  // alone (listings show it) says nothing about whether a guess came close,
  // nor what exists elsewhere.
  if (!r || !CredentialSecretMatches(secret, r->secret_hash) || r->scope != rules.scope) {
    return Verified{Verdict::kInvalid, {}};
  }
  if (!r->LiveAt(now_ms, rules.idle_ms)) return Verified{Verdict::kExpired, std::move(*r)};
  if (rules.also_live && !rules.also_live(*r)) return Verified{Verdict::kInvalid, {}};
  if (now_ms - r->last_used_at_ms >= rules.touch_every_ms) {
    // Best effort: a busy database must not refuse a valid credential.
    if (Touch(kind, r->id, now_ms).ok()) r->last_used_at_ms = now_ms;
  }
  return Verified{Verdict::kOk, std::move(*r)};
}

Status CredentialStore::Touch(CredentialKind kind, const std::string& id, int64_t now_ms) {
  ASSIGN_OR_RETURN(Stmt s,
                   db_->Prepare("UPDATE credentials SET last_used_at=? WHERE id=? AND kind=?"));
  s.Bind(1, now_ms).Bind(2, id).Bind(3, CredentialKindName(kind));
  return s.Run();
}

Result<int64_t> CredentialStore::Changes() {
  ASSIGN_OR_RETURN(Stmt c, db_->Prepare("SELECT changes()"));
  ASSIGN_OR_RETURN(bool row, c.Step());
  return row ? c.Int(0) : 0;
}

Result<bool> CredentialStore::Delete(CredentialKind kind, const std::string& id) {
  ASSIGN_OR_RETURN(Stmt s, db_->Prepare("DELETE FROM credentials WHERE id=? AND kind=?"));
  s.Bind(1, id).Bind(2, CredentialKindName(kind));
  RETURN_IF_ERROR(s.Run());
  ASSIGN_OR_RETURN(int64_t n, Changes());
  return n > 0;
}

Result<std::optional<CredentialRecord>> CredentialStore::Revoke(CredentialKind kind,
                                                                const std::string& id,
                                                                std::optional<uid_t> owner) {
  ASSIGN_OR_RETURN(std::optional<CredentialRecord> r, Get(kind, id));
  if (!r || (owner && r->uid != *owner)) return std::optional<CredentialRecord>();
  ASSIGN_OR_RETURN(bool deleted, Delete(kind, id));
  if (!deleted) return std::optional<CredentialRecord>();
  return r;
}

Result<int64_t> CredentialStore::DeleteScope(CredentialKind kind, const std::string& scope) {
  ASSIGN_OR_RETURN(Stmt s, db_->Prepare("DELETE FROM credentials WHERE kind=? AND scope=?"));
  s.Bind(1, CredentialKindName(kind)).Bind(2, scope);
  RETURN_IF_ERROR(s.Run());
  return Changes();
}

Result<int64_t> CredentialStore::DeleteExpired(CredentialKind kind, int64_t now_ms,
                                               int64_t idle_ms) {
  ASSIGN_OR_RETURN(Stmt s, db_->Prepare("DELETE FROM credentials WHERE kind=? AND "
                                        "((expires_at!=0 AND expires_at<=?) OR "
                                        "(?>0 AND last_used_at<=?))"));
  s.Bind(1, CredentialKindName(kind)).Bind(2, now_ms).Bind(3, idle_ms).Bind(4, now_ms - idle_ms);
  RETURN_IF_ERROR(s.Run());
  return Changes();
}

Result<std::string> CredentialStore::KeyOrInsert(const std::string& name,
                                                 const std::string& fresh) {
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

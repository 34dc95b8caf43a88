#include "lathe/state/secret_store.h"

#include "lathe/state/run_store.h"
#include "lathe/state/schema.h"

namespace lathe::state {
namespace {

// What a sealed value is bound to: its owner and its name.
std::string Aad(uid_t uid, const std::string& name) {
  return "lathe-secret/" + std::to_string(uid) + "/" + name;
}

std::string Hex(std::string_view bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char b : bytes) {
    out += kHex[b >> 4];
    out += kHex[b & 15];
  }
  return out;
}

std::optional<std::string> Unhex(std::string_view hex) {
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  if (hex.size() % 2 != 0) return std::nullopt;
  std::string out;
  for (size_t i = 0; i < hex.size(); i += 2) {
    int hi = nibble(hex[i]), lo = nibble(hex[i + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    out += static_cast<char>(hi << 4 | lo);
  }
  return out;
}

}  // namespace

Result<std::unique_ptr<SecretStore>> SecretStore::Open(const std::string& db_path, SecretBox box) {
  ASSIGN_OR_RETURN(std::unique_ptr<Db> db, OpenLatheDb(db_path));
  return std::unique_ptr<SecretStore>(new SecretStore(std::move(db), std::move(box)));
}

Result<bool> SecretStore::Put(uid_t uid, const std::string& name, std::string_view value,
                              int64_t now_ms) {
  ASSIGN_OR_RETURN(std::string sealed, box_.Seal(value, Aad(uid, name)));
  bool created = false;
  RETURN_IF_ERROR(db_->Transaction([&]() -> Status {
    ASSIGN_OR_RETURN(Stmt q, db_->Prepare("SELECT 1 FROM secrets WHERE uid=? AND name=?"));
    q.Bind(1, int64_t{uid}).Bind(2, name);
    ASSIGN_OR_RETURN(bool exists, q.Step());
    created = !exists;
    ASSIGN_OR_RETURN(Stmt s,
                     db_->Prepare("INSERT INTO secrets (uid, name, sealed, created_at, updated_at) "
                                  "VALUES (?,?,?,?,?) ON CONFLICT (uid, name) DO UPDATE SET "
                                  "sealed=excluded.sealed, updated_at=excluded.updated_at"));
    s.Bind(1, int64_t{uid}).Bind(2, name).Bind(3, Hex(sealed)).Bind(4, now_ms).Bind(5, now_ms);
    return s.Run();
  }));
  return created;
}

Result<std::optional<std::string>> SecretStore::Value(uid_t uid, const std::string& name) {
  ASSIGN_OR_RETURN(Stmt s, db_->Prepare("SELECT sealed FROM secrets WHERE uid=? AND name=?"));
  s.Bind(1, int64_t{uid}).Bind(2, name);
  ASSIGN_OR_RETURN(bool row, s.Step());
  if (!row) return std::optional<std::string>();
  std::optional<std::string> sealed = Unhex(s.Text(0));
  if (!sealed) return Status::Internal("secret " + name + ": the stored value is not hex");
  ASSIGN_OR_RETURN(std::string value, box_.Open(*sealed, Aad(uid, name)));
  return std::optional<std::string>(std::move(value));
}

Result<std::vector<SecretRecord>> SecretStore::List(uid_t uid) {
  ASSIGN_OR_RETURN(Stmt s, db_->Prepare("SELECT name, created_at, updated_at FROM secrets "
                                        "WHERE uid=? ORDER BY name"));
  s.Bind(1, int64_t{uid});
  return CollectRows<SecretRecord>(s, [uid](Stmt& r) {
    return SecretRecord{uid, r.Text(0), r.Int(1), r.Int(2)};
  });
}

Result<int64_t> SecretStore::CountFor(uid_t uid) {
  ASSIGN_OR_RETURN(Stmt s, db_->Prepare("SELECT COUNT(*) FROM secrets WHERE uid=?"));
  s.Bind(1, int64_t{uid});
  ASSIGN_OR_RETURN(bool row, s.Step());
  return row ? s.Int(0) : 0;
}

Result<bool> SecretStore::Delete(uid_t uid, const std::string& name) {
  ASSIGN_OR_RETURN(Stmt s, db_->Prepare("DELETE FROM secrets WHERE uid=? AND name=?"));
  s.Bind(1, int64_t{uid}).Bind(2, name);
  RETURN_IF_ERROR(s.Run());
  ASSIGN_OR_RETURN(Stmt c, db_->Prepare("SELECT changes()"));
  ASSIGN_OR_RETURN(bool row, c.Step());
  return row && c.Int(0) > 0;
}

}  // namespace lathe::state

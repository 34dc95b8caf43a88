#include "lathe/state/db.h"

#include <sys/vfs.h>

#include <filesystem>

namespace lathe::state {
namespace {
Status SqliteError(sqlite3* db, std::string_view what) {
  std::string msg = std::string(what) + ": " + (db ? sqlite3_errmsg(db) : "sqlite error");
  int code = db ? sqlite3_errcode(db) & 0xff : SQLITE_ERROR;
  if (code == SQLITE_CORRUPT || code == SQLITE_NOTADB) {
    return Status::Msg(Code::kIoError, "state.db_damaged", {{"detail", msg}});
  }
  if (code == SQLITE_FULL) {
    return Status::Msg(Code::kResourceExhausted, "state.disk_full", {{"detail", msg}});
  }
  if (code == SQLITE_BUSY || code == SQLITE_LOCKED) return Status::Unavailable(msg);
  if (code == SQLITE_CONSTRAINT) return Status::AlreadyExists(msg);
  return Status::IoError(msg);
}
}  // namespace

std::string NetworkFsName(int64_t f_type) {
  constexpr int64_t kNfs = 0x6969, kCifs = 0xFF534D42, kSmb2 = 0xFE534D42, kSmb = 0x517B;
  switch (f_type) {
    case kNfs:
      return "nfs";
    case kCifs:
      return "cifs";
    case kSmb2:
      return "smb2";
    case kSmb:
      return "smb";
    default:
      return "";
  }
}

bool IsNetworkFilesystem(const std::string& dir, std::string* fs_name) {
  struct statfs s;
  if (::statfs(dir.c_str(), &s) != 0) return false;
  *fs_name = NetworkFsName(static_cast<int64_t>(s.f_type));
  return !fs_name->empty();
}

Stmt::~Stmt() {
  if (s_ != nullptr) sqlite3_finalize(s_);
}
Stmt& Stmt::Bind(int i, int64_t v) {
  sqlite3_bind_int64(s_, i, v);
  return *this;
}
Stmt& Stmt::Bind(int i, std::string_view v) {
  sqlite3_bind_text(s_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
  return *this;
}
Stmt& Stmt::BindNull(int i) {
  sqlite3_bind_null(s_, i);
  return *this;
}
Result<bool> Stmt::Step() {
  int rc = sqlite3_step(s_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  return SqliteError(db_, "step");
}
Status Stmt::Run() {
  while (true) {
    ASSIGN_OR_RETURN(bool row, Step());
    if (!row) return Status::OK();
  }
}
void Stmt::Reset() {
  sqlite3_reset(s_);
  sqlite3_clear_bindings(s_);
}
int64_t Stmt::Int(int col) const { return sqlite3_column_int64(s_, col); }
std::optional<int64_t> Stmt::OptInt(int col) const {
  if (sqlite3_column_type(s_, col) == SQLITE_NULL) return std::nullopt;
  return sqlite3_column_int64(s_, col);
}
std::string Stmt::Text(int col) const {
  const unsigned char* t = sqlite3_column_text(s_, col);
  return t ? std::string(reinterpret_cast<const char*>(t), sqlite3_column_bytes(s_, col)) : "";
}

Db::~Db() {
  if (db_ != nullptr) sqlite3_close(db_);
}

Result<std::unique_ptr<Db>> Db::Open(const std::string& path,
                                     const std::vector<std::string>& migrations,
                                     std::optional<int64_t> fs_type) {
  std::unique_ptr<Db> db(new Db());
  if (sqlite3_open_v2(path.c_str(), &db->db_,
                      SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
                      nullptr) != SQLITE_OK) {
    return SqliteError(db->db_, "open " + path);
  }
  RETURN_IF_ERROR(db->Configure(path, fs_type));
  RETURN_IF_ERROR(db->Migrate(migrations));
  return db;
}

Status Db::Configure(const std::string& path, std::optional<int64_t> fs_type) {
  sqlite3_busy_timeout(db_, 5000);
  std::string fs;
  std::string dir = std::filesystem::path(path).parent_path().string();
  bool network = fs_type ? !(fs = NetworkFsName(*fs_type)).empty()
                         : IsNetworkFilesystem(dir.empty() ? "." : dir, &fs);
  if (network) {
    RETURN_IF_ERROR(Exec("PRAGMA journal_mode=DELETE"));
    journal_note_ = "state is on " + fs + ": using the rollback journal, WAL is unsafe there";
  } else {
    RETURN_IF_ERROR(Exec("PRAGMA journal_mode=WAL"));
    wal_ = true;
  }
  // FULL: a committed transition survives power loss, not just a crash.
  RETURN_IF_ERROR(Exec("PRAGMA synchronous=FULL"));
  return Exec("PRAGMA foreign_keys=ON");
}

Status Db::Migrate(const std::vector<std::string>& migrations) {
  ASSIGN_OR_RETURN(Stmt s, Prepare("PRAGMA user_version"));
  ASSIGN_OR_RETURN(bool row, s.Step());
  schema_version_ = row ? static_cast<int>(s.Int(0)) : 0;
  s.Reset();  // no statement may be running while a migration drops a table
  if (schema_version_ > static_cast<int>(migrations.size())) {
    return Status::FailedPrecondition("the state database has schema version " +
                                      std::to_string(schema_version_) +
                                      ", newer than this lathe understands (" +
                                      std::to_string(migrations.size()) + "); upgrade lathe");
  }
  for (size_t v = schema_version_; v < migrations.size(); ++v) {
    RETURN_IF_ERROR(Transaction([&]() -> Status {
      RETURN_IF_ERROR(Exec(migrations[v]));
      return Exec("PRAGMA user_version=" + std::to_string(v + 1));
    }));
    schema_version_ = static_cast<int>(v + 1);
  }
  return Status::OK();
}

int64_t Db::Changes() const { return sqlite3_changes64(db_); }

Status Db::Exec(std::string_view sql) {
  char* err = nullptr;
  std::string q(sql);
  if (sqlite3_exec(db_, q.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
    std::string msg = err ? err : "exec failed";
    sqlite3_free(err);
    Status s = SqliteError(db_, "exec");
    if (s.code() == Code::kResourceExhausted) return s;
    if (IsCorruption(s)) return Status::Msg(Code::kIoError, "state.db_damaged", {{"detail", msg}});
    return Status(s.code(), msg);
  }
  return Status::OK();
}

Status Db::QuickCheck() {
  ASSIGN_OR_RETURN(Stmt s, Prepare("PRAGMA quick_check"));
  std::string found;
  while (true) {
    ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) break;
    std::string line = s.Text(0);
    if (line != "ok") found += (found.empty() ? "" : "; ") + line;
  }
  if (found.empty()) return Status::OK();
  return Status::Msg(Code::kIoError, "state.db_damaged",
                     {{"detail", "quick_check: " + found.substr(0, 500)}});
}

void Db::SkipCheckpointOnClose() {
  sqlite3_db_config(db_, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, nullptr);
}

Result<Stmt> Db::Prepare(std::string_view sql) {
  sqlite3_stmt* s = nullptr;
  if (sqlite3_prepare_v2(db_, sql.data(), static_cast<int>(sql.size()), &s, nullptr) != SQLITE_OK) {
    return SqliteError(db_, "prepare");
  }
  return Stmt(db_, s);
}

Status Db::Transaction(const std::function<Status()>& body) {
  RETURN_IF_ERROR(Exec("BEGIN IMMEDIATE"));
  Status st = body();
  if (!st.ok()) {
    // Best effort: the transaction failed already; its error is what the caller gets.
    (void)Exec("ROLLBACK");
    return st;
  }
  st = Exec("COMMIT");
  // Best effort: the transaction failed already; its error is what the caller gets.
  if (!st.ok()) (void)Exec("ROLLBACK");
  return st;
}

bool IsCorruption(const Status& s) { return s.msg_id() == "state.db_damaged"; }

}  // namespace lathe::state

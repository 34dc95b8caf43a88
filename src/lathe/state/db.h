// A small wrapper over SQLite: one connection, prepared statements, a
// transaction helper, and schema migrations.
//
// Journal: WAL where it is safe; on network filesystems (NFS, CIFS/SMB —
// detected with statfs) WAL's shared memory does not work across hosts, so
// the rollback journal is used instead and journal_note() says so.
// Not thread-safe: callers serialise access (the daemon holds one mutex).
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "lathe/common/json.h"
#include "lathe/common/status.h"

namespace lathe::state {

class Db;

// A prepared statement. Bind parameters are 1-based as in SQLite.
class Stmt {
 public:
  ~Stmt();
  Stmt(Stmt&& o) noexcept : db_(o.db_), s_(o.s_) { o.s_ = nullptr; }
  Stmt& operator=(Stmt&&) = delete;

  Stmt& Bind(int i, int64_t v);
  Stmt& Bind(int i, std::string_view v);
  Stmt& BindNull(int i);
  Stmt& Bind(int i, std::optional<int64_t> v) { return v ? Bind(i, *v) : BindNull(i); }

  // Steps once: true when a row is available, false when done.
  Result<bool> Step();
  // Steps to completion, for statements without results.
  Status Run();
  // Ends the current execution (releasing its read snapshot) and clears the
  // bindings, so a kept statement can be bound and stepped again.
  void Reset();

  int64_t Int(int col) const;
  std::optional<int64_t> OptInt(int col) const;
  std::string Text(int col) const;

 private:
  friend class Db;
  Stmt(sqlite3* db, sqlite3_stmt* s) : db_(db), s_(s) {}
  sqlite3* db_;
  sqlite3_stmt* s_;
};

class Db {
 public:
  // Opens (creating) the database at `path` and applies `migrations` in
  // order: migrations[i] takes the schema from version i to i+1.
  // `fs_type` overrides the statfs(2) f_type of the database's directory
  // (tests: a machine without NFS can still check the rollback-journal path).
  static Result<std::unique_ptr<Db>> Open(const std::string& path,
                                          const std::vector<std::string>& migrations,
                                          std::optional<int64_t> fs_type = std::nullopt);
  ~Db();

  Status Exec(std::string_view sql);
  Result<Stmt> Prepare(std::string_view sql);
  // Runs `body` in BEGIN IMMEDIATE ... COMMIT; rolls back when it fails.
  Status Transaction(const std::function<Status()>& body);

  // PRAGMA quick_check: OK, or a status for which IsCorruption holds, naming
  // what it found. Reads every page: seconds on a large file.
  Status QuickCheck();
  // Leaves the WAL file in place when the connection closes. Closing the last
  // connection otherwise checkpoints and then deletes "<path>-wal" by name,
  // which would delete the WAL of a new file put at the same path meanwhile.
  void SkipCheckpointOnClose();

  // Rows the connection's last INSERT, UPDATE or DELETE changed.
  int64_t Changes() const;

  int schema_version() const { return schema_version_; }
  bool wal() const { return wal_; }
  // Empty, or why WAL is not used.
  const std::string& journal_note() const { return journal_note_; }

 private:
  Db() = default;
  Status Configure(const std::string& path, std::optional<int64_t> fs_type);
  Status Migrate(const std::vector<std::string>& migrations);

  sqlite3* db_ = nullptr;
  int schema_version_ = 0;
  bool wal_ = false;
  std::string journal_note_;
};

// Steps `s` to its end and turns each row into a T with `row(s)`.
template <typename T, typename RowFn>
Result<std::vector<T>> CollectRows(Stmt& s, RowFn row) {
  std::vector<T> out;
  while (true) {
    ASSIGN_OR_RETURN(bool more, s.Step());
    if (!more) return out;
    out.push_back(row(s));
  }
}

// True when `s` says a database file is damaged or is not a database
// (SQLITE_CORRUPT, SQLITE_NOTADB, or a failed QuickCheck): catalog id
// state.db_damaged.
bool IsCorruption(const Status& s);

// True when `dir` is on a filesystem where SQLite's WAL is unsafe.
bool IsNetworkFilesystem(const std::string& dir, std::string* fs_name);
// The name of a network file system by its statfs f_type ("nfs", "cifs",
// "smb2", "smb"), or "" for any other.
std::string NetworkFsName(int64_t f_type);

// A JSON column's value, or `fallback` when it does not parse.
inline Json JsonOr(const std::string& text, Json fallback) {
  auto j = ParseJson(text);
  return j.ok() ? *j : fallback;
}

}  // namespace lathe::state

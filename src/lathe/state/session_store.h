// Durable records of browser sessions, in the daemon's SQLite database
// (tables browser_sessions and session_keys, schema v6 of state/schema.h).
//
// As with API tokens (token_store.h), only the SHA-256 of a session's secret
// is stored, never the cookie value: whoever reads the database cannot sign
// in with what they read. A revoked session's row is deleted; expired rows
// are deleted by DeleteExpired (the service calls it when it makes a session).
//
// session_keys holds named random keys of the daemon (the CSRF key,
// api/sessions.h), made once and kept across restarts.
//
// Not thread-safe: the API serialises calls under its own mutex. It holds its
// own connection to the database the daemon's RunStore uses.
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

struct SessionRow {
  std::string id;           // the session's public part ("s" + 10 base32 characters)
  uid_t uid = 0;            // whom it acts as
  std::string user;         // that user's name when it was made
  std::string scope;        // "ui", or "run:<run id>" (api/sessions.h)
  std::string secret_hash;  // SHA-256 of the secret part, 64 hex characters
  int64_t created_at_ms = 0;
  int64_t expires_at_ms = 0;    // the absolute end of the session (epoch ms)
  int64_t last_used_at_ms = 0;  // the last use written (at most every minute or so)
  std::string created_by;       // how its login code was issued
};

class SessionStore {
 public:
  // Opens the database (applying missing migrations, as RunStore does).
  static Result<std::unique_ptr<SessionStore>> Open(const std::string& db_path);

  // AlreadyExists when a session with r.id exists.
  Status Insert(const SessionRow& r);
  // nullopt when no session has this id.
  Result<std::optional<SessionRow>> Get(const std::string& id);
  // Newest first: the sessions of `uid`, or every user's when nullopt.
  Result<std::vector<SessionRow>> List(std::optional<uid_t> uid);
  // Deletes the session; false when there was none with this id.
  Result<bool> Delete(const std::string& id);
  // Records a use at `now_ms`.
  Status Touch(const std::string& id, int64_t now_ms);
  // Deletes every session past its absolute expiry at `now_ms` or unused
  // since `now_ms - idle_ms`; how many.
  Result<int64_t> DeleteExpired(int64_t now_ms, int64_t idle_ms);
  // The key called `name`; when there is none yet, stores `fresh` under that
  // name and returns it (the first of two racing connections wins).
  Result<std::string> KeyOrInsert(const std::string& name, const std::string& fresh);

 private:
  explicit SessionStore(std::unique_ptr<Db> db) : db_(std::move(db)) {}
  Result<std::vector<SessionRow>> Query(const std::string& where_sql,
                                        const std::optional<std::string>& arg);
  Result<int64_t> Changes();

  std::unique_ptr<Db> db_;
};

}  // namespace lathe::state

// Durable records of per-user API tokens, in the daemon's SQLite database
// (table api_tokens, schema v4 of state/schema.h).
//
// Only a token's SHA-256 is stored, never the token itself: the database
// cannot give a token back, and whoever reads it cannot use what they read.
// A revoked token's row is deleted; an expired one stays until it is removed,
// so that its owner sees it listed as expired.
//
// Not thread-safe: the API serialises calls under its own mutex. It holds its
// own connection to the database the daemon's RunStore uses (SQLite's
// busy timeout orders their writes).
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

struct TokenRecord {
  std::string id;           // the token's public part ("t" + 10 base32 characters)
  uid_t uid = 0;            // whom it acts as
  std::string user;         // that user's name when it was issued
  std::string name;         // what its owner called it ("" when unnamed)
  std::string secret_hash;  // SHA-256 of the secret part, 64 hex characters
  int64_t created_at_ms = 0;
  int64_t expires_at_ms = 0;    // 0: never
  int64_t last_used_at_ms = 0;  // 0: never used
  std::string created_by;       // how it was issued: "socket" or "token <id>"

  // Live at `now_ms`: not past its expiry.
  bool LiveAt(int64_t now_ms) const { return expires_at_ms == 0 || now_ms < expires_at_ms; }
};

class TokenStore {
 public:
  // Opens the database (applying missing migrations, as RunStore does).
  static Result<std::unique_ptr<TokenStore>> Open(const std::string& db_path);

  // AlreadyExists when a token with r.id exists.
  Status Insert(const TokenRecord& r);
  // nullopt when no token has this id.
  Result<std::optional<TokenRecord>> Get(const std::string& id);
  // Newest first: the tokens of `uid`, or every user's when nullopt.
  Result<std::vector<TokenRecord>> List(std::optional<uid_t> uid);
  // How many tokens `uid` holds, expired ones included.
  Result<int64_t> CountFor(uid_t uid);
  // Deletes the token; false when there was none with this id.
  Result<bool> Delete(const std::string& id);
  // Records a use at `now_ms`.
  Status Touch(const std::string& id, int64_t now_ms);

 private:
  explicit TokenStore(std::unique_ptr<Db> db) : db_(std::move(db)) {}
  Result<std::vector<TokenRecord>> Query(const std::string& where_sql,
                                         const std::optional<std::string>& arg);
  Result<int64_t> Changes();

  std::unique_ptr<Db> db_;
};

}  // namespace lathe::state

// Durable per-user secrets, in the daemon's SQLite database (table secrets,
// schema v5 of state/schema.h).
//
// A value is stored only sealed (common/secret_box.h: AES-256-GCM, bound to
// its owner's uid and its name), hex-encoded; the database never holds the
// plaintext, and a sealed value copied to another user's row does not open.
// The key is the caller's (daemon/secrets.h keeps it in a file of its own).
//
// Not thread-safe: daemon::Secrets serialises calls under its own mutex. It
// holds its own connection to the database the daemon's RunStore uses.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "lathe/common/secret_box.h"
#include "lathe/common/status.h"
#include "lathe/state/db.h"

namespace lathe::state {

// What anyone may learn of a secret: never its value.
struct SecretRecord {
  uid_t uid = 0;
  std::string name;
  int64_t created_at_ms = 0;
  int64_t updated_at_ms = 0;  // the last `set`
};

class SecretStore {
 public:
  // Opens the database (applying missing migrations, as RunStore does).
  static Result<std::unique_ptr<SecretStore>> Open(const std::string& db_path, SecretBox box);

  // Sets `uid`'s secret `name` to `value`; true when it is new, false when
  // it replaced a value (its created_at stays).
  Result<bool> Put(uid_t uid, const std::string& name, std::string_view value, int64_t now_ms);
  // The plaintext; nullopt when `uid` has no secret `name`. Internal when the
  // stored value does not open (the key was changed).
  Result<std::optional<std::string>> Value(uid_t uid, const std::string& name);
  // By name.
  Result<std::vector<SecretRecord>> List(uid_t uid);
  Result<int64_t> CountFor(uid_t uid);
  // False when there was none.
  Result<bool> Delete(uid_t uid, const std::string& name);

 private:
  SecretStore(std::unique_ptr<Db> db, SecretBox box) : db_(std::move(db)), box_(std::move(box)) {}

  std::unique_ptr<Db> db_;
  SecretBox box_;
};

}  // namespace lathe::state

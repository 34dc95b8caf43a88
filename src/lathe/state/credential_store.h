// Durable records of every hashed credential the daemon issues, in one table
// of its SQLite database (credentials, schema v12 of state/schema.h): per-user
// API tokens (api/tokens.h), browser sessions (api/sessions.h) and deployment
// keys (api/deploy_keys.h), told apart by their kind.
//
// A credential is "<id>_<secret>" in its kind's form
// (common/credential_format.h). Its row is named by the public <id> and holds
// only the SHA-256 of <secret>, never the credential: the database cannot
// give one back, and whoever reads it cannot use what they read.
//
// Verify is the one check of a presented credential, for every kind: one
// primary-key read, the hash compared in constant time, the scope, the
// expiry (and a session's idle time), whatever else the kind asks, then the
// use recorded. The kinds' own rules (how many, for how long, who may
// revoke) are the services' in api/.
//
// A revoked credential's row is deleted. An expired token or key stays until
// it is removed, so that its owner sees it listed as expired; expired
// sessions are deleted by DeleteExpired (the session service calls it when it
// makes one).
//
// The table session_keys (schema v6) holds named random keys of the daemon
// (the CSRF key, api/sessions.h), made once and kept across restarts.
//
// Not thread-safe: each service serialises its calls under its own mutex. It
// holds its own connection to the database the daemon's RunStore uses
// (SQLite's busy timeout orders their writes).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "lathe/common/status.h"
#include "lathe/state/db.h"

namespace lathe::state {

enum class CredentialKind {
  kToken,      // "token": an API token, "lathe_t…_<secret>"
  kSession,    // "session": a browser session's cookie, "s…_<secret>"
  kDeployKey,  // "deploy_key": a deployment key, "lathe_dk_k…_<secret>"
};
// The kind as the table's kind column holds it.
std::string_view CredentialKindName(CredentialKind kind);

struct CredentialRecord {
  std::string id;  // the public part: the kind's letter + 10 base32 characters
  CredentialKind kind = CredentialKind::kToken;
  uid_t uid = 0;     // whom it acts as (a key: its deployment's owner, who issued it)
  std::string user;  // that user's name when it was issued
  std::string name;  // what its owner called it ("" when unnamed; sessions have none)
  // What it opens beyond its kind: a session's origin ("ui", "run:<run id>"),
  // a key's deployment (names are unique across users); "" for a token.
  std::string scope;
  std::string secret_hash;  // SHA-256 of the secret part, 64 hex characters
  int64_t created_at_ms = 0;
  int64_t expires_at_ms = 0;    // 0: never (a session's is its absolute end)
  int64_t last_used_at_ms = 0;  // 0: never used; written at most every touch_every_ms
  // How it was issued: "socket", "daemon token", "token <id>", "session <id>".
  std::string created_by;

  // Live at `now_ms`: not past its expiry and, when `idle_ms` > 0, used less
  // than `idle_ms` before.
  bool LiveAt(int64_t now_ms, int64_t idle_ms = 0) const {
    return (expires_at_ms == 0 || now_ms < expires_at_ms) &&
           (idle_ms <= 0 || now_ms < last_used_at_ms + idle_ms);
  }
};

// Which credentials of one kind List and Count look at: only `uid`'s and
// `scope`'s unless nullopt, only those not expired at `live_at_ms` unless 0.
struct CredentialFilter {
  CredentialKind kind = CredentialKind::kToken;
  std::optional<uid_t> uid = std::nullopt;
  std::optional<std::string> scope = std::nullopt;
  int64_t live_at_ms = 0;
};

// How Verify judges a credential of its kind.
struct VerifyRules {
  std::string scope = "";           // the row's scope must be this ("" for a token)
  int64_t idle_ms = 0;              // > 0: it has ended once unused for this long
  int64_t touch_every_ms = 60'000;  // a use is written at most this often
  // Anything else that must hold (a session: the credential that made it is
  // live), asked after the secret, the scope and the expiry passed and before
  // the use is written; it may call the store. Empty: nothing else.
  std::function<bool(const CredentialRecord&)> also_live = nullptr;
};

struct Verified {
  enum class Verdict {
    kOk,       // live: `record` is its row, with this use recorded
    kInvalid,  // no such credential of the kind, another secret, another
               // scope, or `also_live` said no: one answer for all
    kExpired,  // the right secret, past its expiry or idle time: `record` says when
  };
  Verdict verdict = Verdict::kInvalid;
  CredentialRecord record;
};

class CredentialStore {
 public:
  // Opens the database (applying missing migrations, as RunStore does).
  static Result<std::unique_ptr<CredentialStore>> Open(const std::string& db_path);

  // AlreadyExists when a credential with r.id exists.
  Status Insert(const CredentialRecord& r);
  // nullopt when no credential of `kind` has this id.
  Result<std::optional<CredentialRecord>> Get(CredentialKind kind, const std::string& id);
  // Newest first.
  Result<std::vector<CredentialRecord>> List(const CredentialFilter& f);
  Result<int64_t> Count(const CredentialFilter& f);
  // The credential `id` of `kind` (`secret` its presented secret part) at
  // `now_ms`, by `rules`. The use is written best effort: a busy database
  // does not refuse a valid credential.
  Result<Verified> Verify(CredentialKind kind, const std::string& id, std::string_view secret,
                          const VerifyRules& rules, int64_t now_ms);
  // Records a use at `now_ms`.
  Status Touch(CredentialKind kind, const std::string& id, int64_t now_ms);
  // Deletes the credential; false when none of `kind` has this id.
  Result<bool> Delete(CredentialKind kind, const std::string& id);
  // Deletes credential `id` of `kind` when `owner` is nullopt or holds it and
  // gives back its row; nullopt (nothing deleted) otherwise.
  Result<std::optional<CredentialRecord>> Revoke(CredentialKind kind, const std::string& id,
                                                 std::optional<uid_t> owner);
  // Deletes every credential of `kind` whose scope is `scope`; how many.
  Result<int64_t> DeleteScope(CredentialKind kind, const std::string& scope);
  // Deletes every credential of `kind` past its expiry at `now_ms` or, when
  // `idle_ms` > 0, unused since `now_ms - idle_ms`; how many.
  Result<int64_t> DeleteExpired(CredentialKind kind, int64_t now_ms, int64_t idle_ms);
  // The key called `name` (session_keys); when there is none yet, stores
  // `fresh` under that name and returns it (the first of two racing
  // connections wins).
  Result<std::string> KeyOrInsert(const std::string& name, const std::string& fresh);

 private:
  explicit CredentialStore(std::unique_ptr<Db> db) : db_(std::move(db)) {}
  Result<int64_t> Changes();

  std::unique_ptr<Db> db_;
};

}  // namespace lathe::state

// Per-user API tokens: their form, and issuing, checking, listing and
// revoking them (docs/security.md, "Credentials").
//
// A token is "lathe_<id>_<secret>" (common/credential_format.h). <id> ("t"
// and 10 base32 characters) is its public name, shown by `lathe token ls` and
// the key of its row in the credential store (state/credential_store.h), so
// that checking a token is one primary-key read, never a scan; <secret> is 64
// hex characters (256 random bits). Only the secret's SHA-256 is stored: a
// 256-bit random secret needs no salt or slow hash, since nobody can guess
// one to match a stolen hash. The whole token is shown once, when issued.
//
// Expiry and revocation take effect at the next request: every check reads
// the row and the clock.
//
// This header also holds what every kind of credential shares at the API:
// the checks of a name and an expiry, and how a message quotes a value.
//
// Thread-safe: calls are serialised on one mutex (one SQLite connection).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "lathe/common/credential_format.h"
#include "lathe/common/json.h"
#include "lathe/common/status.h"
#include "lathe/common/units.h"
#include "lathe/os/clock.h"
#include "lathe/state/credential_store.h"

namespace lathe::api {

inline constexpr std::string_view kTokenPrefix = "lathe_";

using TokenParts = CredentialParts;  // id: "t" + 10 base32 characters

// The parts of a token of the form above; nullopt for anything else.
std::optional<TokenParts> ParseToken(std::string_view token);
std::string FormatToken(const TokenParts& parts);
// SHA-256 of the secret, 64 lower-case hex characters.
inline std::string HashSecret(std::string_view secret) { return HashCredentialSecret(secret); }
// What a message quotes of a value a caller sent: its first 64 characters,
// each unprintable one as '?', and "..." when there was more.
std::string Shown(std::string_view value);

// Bounds of what a token request may ask for.
inline constexpr size_t kMaxTokenNameBytes = 64;
inline constexpr int64_t kMinTokenTtlMs = 1000;                       // 1s
inline constexpr int64_t kMaxTokenTtlMs = 3650LL * 24 * 3600 * 1000;  // 3650d
inline constexpr int64_t kMaxTokensPerUser = 100;

// The checks of a credential's name and expiry (tokens, deployment keys):
// InvalidArgument token.bad_name / token.bad_expires naming the field.
// CredentialTtlMs gives 0 for "never", and for "" where a caller stands for a
// field left out with "".
Status CheckCredentialName(std::string_view name);
Result<int64_t> CredentialTtlMs(const std::string& expires);
// The expiry a token request asked for, in ms: 0 (never) when it left the
// field out (nullopt) or said "never"; a value given as "" is refused like
// every other bad one (token.bad_expires): it is no way to say "never".
Result<int64_t> RequestedTtlMs(const std::optional<std::string>& expires);

struct TokenRequest {
  uid_t uid = 0;     // whom the token acts as
  std::string user;  // that user's name
  std::string name;  // at most kMaxTokenNameBytes printable characters; "" allowed
  // nullopt (left out: never expires), "never", or a duration ("30d",
  // "12h") from 1s to 3650d; "" is refused (RequestedTtlMs).
  std::optional<std::string> expires;
  // 0, or the latest expiry the token may have (epoch ms): a token issued to
  // the holder of another token expires no later than that one.
  int64_t not_after_ms = 0;
  std::string created_by;  // "socket", "daemon token", "token <id>"
};

struct IssuedToken {
  state::CredentialRecord record;
  std::string token;  // the whole token; shown once
};

// What the API shows of a token: never its secret or its hash.
Json TokenToJson(const state::CredentialRecord& r, int64_t now_ms);

class TokenService {
 public:
  struct Options {
    int64_t max_tokens_per_user = kMaxTokensPerUser;
    // A use is written to the database at most this often per token, so
    // that a busy client does not write on every request.
    int64_t touch_every_ms = 60'000;
  };

  // Opens the daemon's database at `db_path`. `clock` (wall time, for
  // expiry) is not owned and must outlive the service.
  static Result<std::unique_ptr<TokenService>> Open(const std::string& db_path, os::Clock& clock,
                                                    Options options);
  static Result<std::unique_ptr<TokenService>> Open(const std::string& db_path, os::Clock& clock) {
    return Open(db_path, clock, Options());
  }

  // InvalidArgument (token.bad_name, token.bad_expires) naming the field;
  // ResourceExhausted (token.too_many) when the user holds the most tokens.
  Result<IssuedToken> Issue(const TokenRequest& req);
  // The record of a live token. PermissionDenied (401): api.unauthenticated
  // when `token` is not of the form "lathe_<id>_<secret>", token.invalid when
  // no token has that id or its secret differs (revoked, mistyped, another
  // daemon's), token.expired when it is past its expiry.
  Result<state::CredentialRecord> Verify(std::string_view token);
  // True while token `id` exists and has not expired (a stream checks that
  // the credential it was opened with still holds). False on a store error.
  bool IsLive(const std::string& id);
  // Newest first: `uid`'s tokens, or everyone's when nullopt.
  Result<std::vector<state::CredentialRecord>> List(std::optional<uid_t> uid);
  // Deletes token `id` when `owner` is nullopt (an admin) or holds it; the
  // deleted record. NotFound (token.not_found) otherwise: another user's
  // token is "not found" to a user, as if it did not exist.
  Result<state::CredentialRecord> Revoke(const std::string& id, std::optional<uid_t> owner);

 private:
  TokenService(std::unique_ptr<state::CredentialStore> store, os::Clock& clock, Options o)
      : store_(std::move(store)), clock_(clock), opts_(o) {}

  std::mutex mu_;
  std::unique_ptr<state::CredentialStore> store_;  // guarded by mu_
  os::Clock& clock_;
  const Options opts_;
};

using lathe::FormatUtc;  // common/units.h

}  // namespace lathe::api

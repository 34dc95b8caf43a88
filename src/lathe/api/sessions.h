// Browser sessions: one-time login codes, session cookies and their CSRF
// tokens (docs/security.md, "Browser sessions").
//
// A person asks for a code (`lathe ui`, POST /api/v1/sessions/code) and opens
// the URL that carries it; the daemon redeems the code for a session and sets
// the session's cookie. The cookie value is "<id>_<secret>"
// (common/credential_format.h): <id> ("s" and 10 base32 characters) is its
// public name (listings show it; the key of its row in the credential store,
// state/credential_store.h), <secret> 64 hex characters (256 random bits) of
// which only the SHA-256 is stored, as for API tokens (tokens.h).
//
// Scopes: a session belongs to one origin. kUiScope is the daemon's own (the
// API and the web UI under /ui/); a run's origin (the proxy) uses
// "run:<run id>". A code or a cookie of one scope is never accepted for
// another, so a run's page, which can read its own origin's cookie, holds
// nothing the API takes.
//
// Codes are single use, short-lived and kept in memory only: a restart of the
// daemon voids every code (never a session). Sessions end when unused for
// Options::idle_ttl_ms or at Options::absolute_ttl_ms after they were made,
// whichever comes first, or when revoked; each check reads the row and the
// clock, so that takes effect at the next request.
//
// Thread-safe: calls are serialised on one mutex (one SQLite connection).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "lathe/common/json.h"
#include "lathe/common/status.h"
#include "lathe/os/clock.h"
#include "lathe/state/credential_store.h"

namespace lathe::api {

// The daemon's own origin: the API and the web UI.
inline constexpr std::string_view kUiScope = "ui";
// The name of the daemon origin's session cookie.
inline constexpr std::string_view kSessionCookie = "lathe_session";
// The header in which the web UI sends a session's CSRF token back.
inline constexpr std::string_view kCsrfHeader = "X-Lathe-CSRF";

struct SessionRecord {
  std::string id;  // "s" + 10 base32 characters; public
  uid_t uid = 0;   // whom the session acts as
  std::string user;
  std::string scope;  // kUiScope or "run:<run id>"
  int64_t created_ms = 0;
  // When it ends unless used before (epoch ms): the earlier of its absolute
  // end and its last recorded use plus the idle time.
  int64_t expires_ms = 0;
  int64_t last_used_ms = 0;  // the last use recorded (at most touch_every_ms stale)
  int64_t ends_ms = 0;       // its absolute end (epoch ms), used or not
  std::string created_by;    // how its code was issued: "socket", "token <id>", "session <id>"
};

struct IssuedSession {
  SessionRecord record;
  std::string cookie_value;  // "<id>_<secret>"; shown once, in Set-Cookie
};

// What the API shows of a session: never its secret, its hash or its CSRF token.
Json SessionToJson(const SessionRecord& r);

class SessionService {
 public:
  struct Options {
    int64_t code_ttl_ms = 60'000;                      // a code is good for 60 s
    size_t max_codes = 1024;                           // outstanding, all users together
    size_t max_codes_per_user = 16;                    // outstanding, per uid
    int64_t idle_ttl_ms = 12LL * 3600 * 1000;          // 12 h without a request ends it
    int64_t absolute_ttl_ms = 7LL * 24 * 3600 * 1000;  // 7 d after it was made, in any case
    int64_t max_sessions_per_user = 50;                // per uid; the least recently used gives way
    int64_t touch_every_ms = 60'000;                   // a use is written at most this often
  };

  // Opens the daemon's database at `db_path` (and its CSRF key, made on the
  // first open). `clock` is not owned and must outlive the service: wall
  // time for sessions, monotonic time for codes.
  static Result<std::unique_ptr<SessionService>> Open(const std::string& db_path, os::Clock& clock,
                                                      Options o);
  static Result<std::unique_ptr<SessionService>> Open(const std::string& db_path,
                                                      os::Clock& clock) {
    return Open(db_path, clock, Options());
  }

  // A one-time login code for `uid`/`user` and `scope` (64 hex characters):
  // single use, good for Options::code_ttl_ms, kept in memory only.
  // `created_by` names the credential that asked for it ("socket", "token
  // <id>", "session <id>"); the session it makes ends no later than
  // `not_after_ms` (epoch ms; 0: no bound but its own), the end of that
  // credential, and ends as soon as that credential is revoked or ends (see
  // Verify): a short-lived credential cannot make itself a lasting one.
  // ResourceExhausted (session.too_many_codes) when the user, or everyone,
  // holds the most codes that may be outstanding.
  Result<std::string> IssueCode(uid_t uid, const std::string& user, const std::string& scope,
                                const std::string& created_by, int64_t not_after_ms = 0);
  // Exchanges a code for a new session of the same scope; the code is gone
  // after this call whatever its outcome. PermissionDenied
  // (session.code_invalid, 401) when the code is unknown, used, expired, or
  // of another scope. A user at max_sessions_per_user loses their least
  // recently used session of that scope.
  Result<IssuedSession> Redeem(std::string_view code, std::string_view scope);
  // The live session a cookie value names, only when its scope is `scope`.
  // PermissionDenied (session.invalid, 401) otherwise: unknown, revoked,
  // mistyped, expired, of another scope, or made by a credential that is
  // no longer live (a token revoked or expired — TokenCheck —, a session
  // ended, up the chain that made it).
  Result<SessionRecord> Verify(std::string_view cookie_value, std::string_view scope);
  // True while session `id` exists, has not expired and the credential that
  // made it is live; false on a store error.
  bool IsLive(const std::string& id);
  // Whether API token `id` is live (api/tokens.h TokenService::IsLive). Set
  // once, before the service is used by more than one thread; without it a
  // session made with a token is bounded by the token's expiry alone.
  using TokenCheck = std::function<bool(const std::string& token_id)>;
  void SetTokenCheck(TokenCheck check) { token_live_ = std::move(check); }
  // The session's CSRF token: HMAC-SHA256 of its id under the daemon's key,
  // 64 hex characters. Stable across restarts; not a secret from the page
  // that holds the session (the web UI reads it from GET /api/v1/session).
  std::string CsrfToken(const SessionRecord& s) const;
  // True when `header_value` is CsrfToken(s); compared in constant time.
  bool CheckCsrf(const SessionRecord& s, std::string_view header_value) const;
  // Newest first, live ones only: `uid`'s sessions, or everyone's when nullopt.
  Result<std::vector<SessionRecord>> List(std::optional<uid_t> uid);
  // Ends session `id` when `owner` is nullopt (an admin) or holds it; the
  // ended record. NotFound (session.not_found) otherwise: another user's
  // session is "not found" to a user.
  Result<SessionRecord> Revoke(const std::string& id, std::optional<uid_t> owner);

  // Outstanding codes (expired ones not yet dropped included), for tests.
  size_t codes_outstanding();

 private:
  struct PendingCode {
    uid_t uid = 0;
    std::string user, scope, created_by;
    int64_t expires_mono_ms = 0;
    int64_t not_after_ms = 0;  // the session's end at the latest (0: its own)
  };
  SessionService(std::unique_ptr<state::CredentialStore> store, os::Clock& clock, Options o,
                 std::string key)
      : store_(std::move(store)), clock_(clock), opts_(o), csrf_key_(std::move(key)) {}
  SessionRecord ToRecord(const state::CredentialRecord& r) const;
  // Whether the credential `created_by` names is live at `now_ms`; `depth`
  // counts sessions made by sessions, of which a chain may hold kMaxChain.
  bool CreatorLive(const std::string& created_by, int64_t now_ms, int depth);  // mu_ held
  void DropExpiredCodes(int64_t now_mono_ms);                                  // mu_ held
  Status MakeRoom(uid_t uid, const std::string& scope, int64_t now_ms);        // mu_ held

  std::mutex mu_;
  std::unique_ptr<state::CredentialStore> store_;  // guarded by mu_
  // Outstanding codes by the SHA-256 of the code.
  std::map<std::string, PendingCode> codes_;  // guarded by mu_
  os::Clock& clock_;
  const Options opts_;
  const std::string csrf_key_;  // 32 random bytes as hex
  TokenCheck token_live_;       // set before use (SetTokenCheck)
};

}  // namespace lathe::api

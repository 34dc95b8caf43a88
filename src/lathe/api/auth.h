// Who is calling the daemon's API (docs/security.md, "Credentials").
//
// Unix socket: the kernel's peer credentials (SO_PEERCRED) name the user.
// TCP: `Authorization: Bearer <token>`, one of
//   - a per-user token ("lathe_<id>_<secret>", tokens.h), which acts as the
//     user it was issued to — root only when it is root's;
//   - the daemon's own token (<home>/token, 0600), which acts as the
//     daemon's user;
// or, without an Authorization header, the browser session cookie
// (`lathe_session`, sessions.h) of scope "ui" — the daemon's own origin only;
// a state-changing request made with it must pass CheckSessionRequest.
// Failed TCP authentication is limited per client address, per user on
// loopback (auth_limiter.h).
// No token, whole or in part beyond a per-user token's public id, is ever
// logged or put in an answer.
#pragma once

#include <memory>
#include <string>

#include <optional>
#include <string_view>

#include "lathe/api/auth_limiter.h"
#include "lathe/api/sessions.h"
#include "lathe/api/tokens.h"
#include "lathe/common/status.h"
#include "lathe/daemon/daemon.h"
#include "lathe/net/http.h"
#include "lathe/os/clock.h"

namespace lathe::api {

// How a caller proved who they are.
enum class Via {
  kSocket,       // SO_PEERCRED on the unix socket
  kDaemonToken,  // the daemon's own token over TCP
  kUserToken,    // a per-user token over TCP
  kSession,      // a browser session's cookie (scope "ui") over TCP
};

struct Authenticated {
  daemon::Caller caller;
  Via via = Via::kSocket;
  std::string token_id;                  // kUserToken: the token's id
  int64_t token_expires_at_ms = 0;       // kUserToken: its expiry (0: never)
  std::optional<SessionRecord> session;  // kSession: the session
};

class Authenticator {
 public:
  // `tokens`, `sessions` and `clock` are not owned and must outlive the
  // authenticator. Without `sessions` no cookie is accepted.
  Authenticator(std::string daemon_token, uid_t daemon_uid, TokenService& tokens, os::Clock& clock,
                AuthLimiter::Options limits = {}, SessionService* sessions = nullptr)
      : daemon_token_(std::move(daemon_token)),
        daemon_uid_(daemon_uid),
        tokens_(tokens),
        sessions_(sessions),
        clock_(clock),
        limiter_(limits) {}

  // The caller, or: PermissionDenied (401: api.unauthenticated without a
  // bearer token or with one that is neither kind, token.invalid,
  // token.expired); ResourceExhausted (429, api.auth_rate_limited) while the
  // client's address is over the limit, with `*retry_after_s` set.
  // A session cookie that is no good answers session.invalid (401).
  // Only a refused credential counts against the limit: a request that
  // brings none (no Authorization header, no cookie of that name) does not.
  Result<Authenticated> Authenticate(const net::HttpRequest& req, int64_t* retry_after_s);

  // A request to a run's origin (run_origin.h): a bearer token as above, or
  // that origin's own cookie (kRunCookie) of session scope `scope`
  // ("run:<id>"). The daemon origin's cookie is never accepted there, nor a
  // run cookie of another run. Same errors and limit as Authenticate.
  Result<Authenticated> AuthenticateRunOrigin(const net::HttpRequest& req, std::string_view scope,
                                              int64_t* retry_after_s);

  // For a request authenticated by a session cookie (kSession) whose method
  // changes state (anything but GET, HEAD, OPTIONS): PermissionDenied (403)
  // session.csrf_missing / session.csrf_invalid unless the X-Lathe-CSRF
  // header holds the session's CSRF token, session.bad_origin when an Origin
  // header is present and is not the daemon's own origin ("http(s)://" + the
  // request's Host; `tls` picks the scheme). OK for every other request.
  Status CheckSessionRequest(const net::HttpRequest& req, const Authenticated& a, bool tls) const;

  // True while the credential `a` was established with still holds: a
  // per-user token or a session not revoked and not expired (the socket and
  // the daemon's token always hold). Long streams call it now and then, so
  // that revoking a token ends what it opened.
  bool StillValid(const Authenticated& a);

  // Redeems a login code (SessionService::Redeem) for a request from a
  // browser: a failure counts against the failed-authentication limit of the
  // request's address, like a bad token, and while the address is over the
  // limit nothing is redeemed (ResourceExhausted, `*retry_after_s` set).
  Result<IssuedSession> RedeemCode(const net::HttpRequest& req, std::string_view code,
                                   std::string_view scope, int64_t* retry_after_s);

 private:
  Result<Authenticated> CheckBearer(const net::HttpRequest& req);
  Result<Authenticated> CheckCookie(const net::HttpRequest& req, std::string_view name,
                                    std::string_view scope);
  // Bearer when an Authorization header is there, else the cookie; a
  // refusal counts against the limit.
  Result<Authenticated> CheckTcp(const net::HttpRequest& req, std::string_view cookie,
                                 std::string_view scope, int64_t* retry_after_s);
  // The limiter's answer for the request's address; OK when it may try.
  Status CheckLimit(const std::string& address, int64_t* retry_after_s);
  void RecordFailure(const std::string& address, const Status& why);
  // What failures of `req` count against: its address, or for any loopback
  // address the connecting user (HttpRequest::loopback_uid: the uid owning
  // the client's socket, an ssh tunnel's sshd) as "loopback (uid N)" —
  // "loopback" when the server could not tell.
  std::string LimitKey(const net::HttpRequest& req) const;

  const std::string daemon_token_;
  const uid_t daemon_uid_;
  TokenService& tokens_;
  SessionService* const sessions_;  // may be null
  os::Clock& clock_;
  AuthLimiter limiter_;
};

// Compares in time independent of where the strings differ.
bool ConstantTimeEquals(const std::string& a, const std::string& b);

// The value of the cookie `name` in a Cookie header ("a=1; lathe_session=v");
// nullopt when it is not there. The first one wins when it appears twice.
std::optional<std::string> CookieValue(std::string_view cookie_header, std::string_view name);

}  // namespace lathe::api

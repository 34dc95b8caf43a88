// Who is calling the daemon's API (docs/security.md, "Credentials").
//
// Unix socket: the kernel's peer credentials (SO_PEERCRED) name the user.
// TCP: `Authorization: Bearer <token>`, one of
//   - a per-user token ("lathe_<id>_<secret>", tokens.h), which acts as the
//     user it was issued to — root only when it is root's;
//   - the daemon's own token (<home>/token, 0600), which acts as the
//     daemon's user.
// Failed TCP authentication is limited per client address (auth_limiter.h).
// No token, whole or in part beyond a per-user token's public id, is ever
// logged or put in an answer.
#pragma once

#include <memory>
#include <string>

#include "lathe/api/auth_limiter.h"
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
};

struct Authenticated {
  daemon::Caller caller;
  Via via = Via::kSocket;
  std::string token_id;             // kUserToken: the token's id
  int64_t token_expires_at_ms = 0;  // kUserToken: its expiry (0: never)
};

class Authenticator {
 public:
  // `tokens` and `clock` are not owned and must outlive the authenticator.
  Authenticator(std::string daemon_token, uid_t daemon_uid, TokenService& tokens, os::Clock& clock,
                AuthLimiter::Options limits = {})
      : daemon_token_(std::move(daemon_token)),
        daemon_uid_(daemon_uid),
        tokens_(tokens),
        clock_(clock),
        limiter_(limits) {}

  // The caller, or: PermissionDenied (401: api.unauthenticated without a
  // bearer token or with one that is neither kind, token.invalid,
  // token.expired); ResourceExhausted (429, api.auth_rate_limited) while the
  // client's address is over the limit, with `*retry_after_s` set.
  Result<Authenticated> Authenticate(const net::HttpRequest& req, int64_t* retry_after_s);

 private:
  Result<Authenticated> CheckBearer(const net::HttpRequest& req);

  const std::string daemon_token_;
  const uid_t daemon_uid_;
  TokenService& tokens_;
  os::Clock& clock_;
  AuthLimiter limiter_;
};

// Compares in time independent of where the strings differ.
bool ConstantTimeEquals(const std::string& a, const std::string& b);

}  // namespace lathe::api

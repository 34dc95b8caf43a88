#include "lathe/api/auth.h"

#include <fmt/format.h>

#include "lathe/common/log.h"
#include "lathe/os/users.h"

namespace lathe::api {
namespace {

daemon::Caller CallerFor(uid_t uid, uid_t daemon_uid) {
  daemon::Caller c;
  c.uid = uid;
  auto u = os::LookupUser(uid);
  c.user = u.ok() ? u->name : std::to_string(uid);
  c.admin = uid == 0 || uid == daemon_uid;
  return c;
}

}  // namespace

bool ConstantTimeEquals(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

Result<Authenticated> Authenticator::CheckBearer(const net::HttpRequest& req) {
  std::string_view auth = req.Header("Authorization");
  constexpr std::string_view kBearer = "Bearer ";
  if (auth.substr(0, kBearer.size()) != kBearer) {
    return Status::Msg(Code::kPermissionDenied, "api.unauthenticated");
  }
  std::string token(auth.substr(kBearer.size()));
  Authenticated a;
  if (token.substr(0, kTokenPrefix.size()) == kTokenPrefix) {
    ASSIGN_OR_RETURN(state::TokenRecord r, tokens_.Verify(token));
    a.caller = CallerFor(r.uid, daemon_uid_);
    a.via = Via::kUserToken;
    a.token_id = r.id;
    a.token_expires_at_ms = r.expires_at_ms;
    return a;
  }
  if (daemon_token_.empty() || !ConstantTimeEquals(token, daemon_token_)) {
    return Status::Msg(Code::kPermissionDenied, "api.unauthenticated");
  }
  a.caller = CallerFor(daemon_uid_, daemon_uid_);
  a.via = Via::kDaemonToken;
  return a;
}

Result<Authenticated> Authenticator::Authenticate(const net::HttpRequest& req,
                                                  int64_t* retry_after_s) {
  if (req.peer) {
    Authenticated a;
    a.caller = CallerFor(req.peer->uid, daemon_uid_);
    return a;
  }
  const std::string address = AddressOf(req.remote);
  const int64_t now = clock_.MonotonicMs();
  if (int64_t wait_ms = limiter_.RetryAfterMs(address, now); wait_ms > 0) {
    *retry_after_s = (wait_ms + 999) / 1000;
    return Status::Msg(Code::kResourceExhausted, "api.auth_rate_limited",
                       {{"address", address}, {"seconds", std::to_string(*retry_after_s)}});
  }
  auto a = CheckBearer(req);
  if (a.ok() || a.status().code() != Code::kPermissionDenied) return a;  // a store error: 500
  // The message id and, for a per-user token, its public id: never the token.
  std::string id;
  for (const auto& arg : a.status().args())
    if (arg.key == "id") id = " (token " + arg.value + ")";
  spdlog::warn("api: refused a TCP request from {}: {}{}", address, a.status().msg_id(), id);
  if (limiter_.RecordFailure(address, now)) {
    spdlog::warn("api: too many failed authentications from {}; refusing it for a while", address);
  }
  return a.status();
}

}  // namespace lathe::api

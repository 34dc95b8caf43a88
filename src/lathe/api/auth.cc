#include "lathe/api/auth.h"

#include "lathe/api/run_origin.h"

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
    ASSIGN_OR_RETURN(state::CredentialRecord r, tokens_.Verify(token));
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

Result<Authenticated> Authenticator::CheckCookie(const net::HttpRequest& req, std::string_view name,
                                                 std::string_view scope) {
  std::optional<std::string> value;
  if (sessions_ != nullptr) value = CookieValue(req.Header("Cookie"), name);
  if (!value) return Status::Msg(Code::kPermissionDenied, "api.unauthenticated");
  ASSIGN_OR_RETURN(SessionRecord s, sessions_->Verify(*value, scope));
  Authenticated a;
  a.caller = CallerFor(s.uid, daemon_uid_);
  a.via = Via::kSession;
  a.session = std::move(s);
  return a;
}

Status Authenticator::CheckLimit(const std::string& address, int64_t* retry_after_s) {
  const int64_t now = clock_.MonotonicMs();
  if (int64_t wait_ms = limiter_.RetryAfterMs(address, now); wait_ms > 0) {
    *retry_after_s = (wait_ms + 999) / 1000;
    return Status::Msg(Code::kResourceExhausted, "api.auth_rate_limited",
                       {{"address", address}, {"seconds", std::to_string(*retry_after_s)}});
  }
  return Status::OK();
}

void Authenticator::RecordFailure(const std::string& address, const Status& why) {
  // The message id and a credential's public id: never the token, cookie or code.
  std::string id;
  for (const auto& arg : why.args()) {
    if (arg.key != "id") continue;
    const bool session = why.msg_id().rfind("session.", 0) == 0;
    id = fmt::format(" ({} {})", session ? "session" : "token", arg.value);
  }
  spdlog::warn("api: refused a TCP request from {}: {}{}", address, why.msg_id(), id);
  if (limiter_.RecordFailure(address, clock_.MonotonicMs())) {
    spdlog::warn("api: too many failed authentications from {}; refusing it for a while", address);
  }
}

Result<Authenticated> Authenticator::Authenticate(const net::HttpRequest& req,
                                                  int64_t* retry_after_s) {
  if (req.peer) {
    Authenticated a;
    a.caller = CallerFor(req.peer->uid, daemon_uid_);
    return a;
  }
  return CheckTcp(req, kSessionCookie, kUiScope, retry_after_s);
}

Result<Authenticated> Authenticator::AuthenticateRunOrigin(const net::HttpRequest& req,
                                                           std::string_view scope,
                                                           int64_t* retry_after_s) {
  if (req.peer) return Status::Msg(Code::kPermissionDenied, "api.unauthenticated");
  return CheckTcp(req, kRunCookie, scope, retry_after_s);
}

Result<Authenticated> Authenticator::CheckTcp(const net::HttpRequest& req, std::string_view cookie,
                                              std::string_view scope, int64_t* retry_after_s) {
  const std::string address = LimitKey(req);
  RETURN_IF_ERROR(CheckLimit(address, retry_after_s));
  // A bearer token wins over a cookie: it cannot be sent by another site.
  const bool bearer = !req.Header("Authorization").empty();
  auto a = bearer ? CheckBearer(req) : CheckCookie(req, cookie, scope);
  if (a.ok() || a.status().code() != Code::kPermissionDenied) return a;  // a store error: 500
  // Only a credential presented and refused is a failed login: any web page
  // can make the browser send requests that carry none.
  const bool presented =
      bearer || (sessions_ != nullptr && CookieValue(req.Header("Cookie"), cookie).has_value());
  if (presented) RecordFailure(address, a.status());
  return a.status();
}

// Every loopback address is one client (any local user may bind any
// 127.x.y.z), told apart by the user owning the client's socket.
std::string Authenticator::LimitKey(const net::HttpRequest& req) const {
  if (req.loopback_uid) return fmt::format("loopback (uid {})", *req.loopback_uid);
  if (req.loopback) return "loopback";
  return AddressOf(req.remote);
}

bool Authenticator::StillValid(const Authenticated& a) {
  switch (a.via) {
    case Via::kUserToken:
      return tokens_.IsLive(a.token_id);
    case Via::kSession:
      return sessions_ != nullptr && a.session && sessions_->IsLive(a.session->id);
    case Via::kSocket:
    case Via::kDaemonToken:
      return true;
  }
  return false;
}

Status Authenticator::CheckSessionRequest(const net::HttpRequest& req, const Authenticated& a,
                                          bool tls) const {
  if (a.via != Via::kSession || !a.session || sessions_ == nullptr) return Status::OK();
  if (req.method == "GET" || req.method == "HEAD" || req.method == "OPTIONS") return Status::OK();
  std::string_view csrf = req.Header(kCsrfHeader);
  if (csrf.empty()) {
    return Status::Msg(Code::kPermissionDenied, "session.csrf_missing",
                       {{"header", std::string(kCsrfHeader)}});
  }
  if (!sessions_->CheckCsrf(*a.session, csrf)) {
    return Status::Msg(Code::kPermissionDenied, "session.csrf_invalid",
                       {{"header", std::string(kCsrfHeader)}});
  }
  std::string_view origin = req.Header("Origin");
  if (!origin.empty()) {
    const std::string own =
        std::string(tls ? "https://" : "http://") + std::string(req.Header("Host"));
    if (!net::EqualsIgnoreCase(origin, own)) {
      std::string shown(origin.substr(0, 100));
      for (char& ch : shown)
        if (ch < 0x20 || ch >= 0x7f) ch = '?';
      return Status::Msg(Code::kPermissionDenied, "session.bad_origin",
                         {{"origin", shown}, {"expected", own}});
    }
  }
  return Status::OK();
}

Result<IssuedSession> Authenticator::RedeemCode(const net::HttpRequest& req, std::string_view code,
                                                std::string_view scope, int64_t* retry_after_s) {
  if (sessions_ == nullptr) return Status::Msg(Code::kPermissionDenied, "session.code_invalid");
  const std::string address = req.peer ? std::string() : LimitKey(req);
  if (!req.peer) RETURN_IF_ERROR(CheckLimit(address, retry_after_s));
  auto s = sessions_->Redeem(code, scope);
  if (!s.ok() && s.status().IsPermissionDenied() && !req.peer) RecordFailure(address, s.status());
  return s;
}

std::optional<std::string> CookieValue(std::string_view header, std::string_view name) {
  while (!header.empty()) {
    size_t semi = header.find(';');
    std::string_view pair = header.substr(0, semi);
    header = semi == std::string_view::npos ? std::string_view() : header.substr(semi + 1);
    while (!pair.empty() && (pair.front() == ' ' || pair.front() == '\t')) pair.remove_prefix(1);
    size_t eq = pair.find('=');
    if (eq == std::string_view::npos || pair.substr(0, eq) != name) continue;
    std::string_view value = pair.substr(eq + 1);
    while (!value.empty() && (value.back() == ' ' || value.back() == '\t')) value.remove_suffix(1);
    if (value.size() >= 2 && value.front() == '"' && value.back() == '"') {
      value = value.substr(1, value.size() - 2);
    }
    return std::string(value);
  }
  return std::nullopt;
}

}  // namespace lathe::api

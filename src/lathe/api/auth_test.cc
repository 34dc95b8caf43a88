#include "lathe/api/auth.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>

#include "lathe/os/test_util/fake_clock.h"

namespace lathe::api {
namespace {

constexpr uid_t kDaemonUid = 0;
const std::string kDaemonToken(64, 'd');

class AuthTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/lathe-auth-XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    auto s = TokenService::Open(dir_ + "/lathe.db", clock_);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    tokens_ = std::move(s).value();
    auto ss = SessionService::Open(dir_ + "/lathe.db", clock_);
    ASSERT_TRUE(ss.ok()) << ss.status().ToString();
    sessions_ = std::move(ss).value();
    auth_ = std::make_unique<Authenticator>(kDaemonToken, kDaemonUid, *tokens_, clock_,
                                            AuthLimiter::Options(), sessions_.get());
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  static net::HttpRequest Tcp(const std::string& token,
                              const std::string& remote = "10.0.0.7:4000") {
    net::HttpRequest r;
    r.remote = remote;
    if (!token.empty()) r.headers.emplace_back("Authorization", "Bearer " + token);
    return r;
  }
  std::string Issue(uid_t uid, const std::string& expires = "") {
    TokenRequest r;
    r.uid = uid;
    r.user = "u" + std::to_string(uid);
    if (!expires.empty()) r.expires = expires;
    auto t = tokens_->Issue(r);
    EXPECT_TRUE(t.ok()) << t.status().ToString();
    return t.ok() ? t->token : "";
  }

  std::string dir_;
  os::FakeClock clock_;
  // A TCP request with the session cookie `value` (and Host: localhost:8421).
  static net::HttpRequest WithCookie(const std::string& value, const std::string& method = "GET",
                                     const std::string& remote = "127.0.0.1:4000") {
    net::HttpRequest r;
    r.method = method;
    r.remote = remote;
    r.headers.emplace_back("Host", "localhost:8421");
    r.headers.emplace_back("Cookie", "theme=dark; lathe_session=" + value + "; x=1");
    return r;
  }
  IssuedSession Login(uid_t uid, const std::string& scope = "ui") {
    auto code = sessions_->IssueCode(uid, "u" + std::to_string(uid), scope, "socket");
    EXPECT_TRUE(code.ok());
    auto s = sessions_->Redeem(*code, scope);
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return s.ok() ? *s : IssuedSession{};
  }

  std::unique_ptr<TokenService> tokens_;
  std::unique_ptr<SessionService> sessions_;
  std::unique_ptr<Authenticator> auth_;
  int64_t retry_after_s_ = 0;
};

TEST_F(AuthTest, EachCredentialActsAsItsOwnUser) {
  net::HttpRequest sock;
  sock.peer = net::PeerCred{1, 1234, 1234};
  auto a = auth_->Authenticate(sock, &retry_after_s_);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->caller.uid, 1234u);
  EXPECT_FALSE(a->caller.admin);
  EXPECT_EQ(a->via, Via::kSocket);

  auto u = auth_->Authenticate(Tcp(Issue(1234, "1h")), &retry_after_s_);
  ASSERT_TRUE(u.ok()) << u.status().ToString();
  EXPECT_EQ(u->caller.uid, 1234u);  // the token's user, not the daemon's (root)
  EXPECT_FALSE(u->caller.admin);
  EXPECT_EQ(u->via, Via::kUserToken);
  EXPECT_EQ(u->token_expires_at_ms, clock_.NowMs() + 3600'000);

  auto r = auth_->Authenticate(Tcp(Issue(0)), &retry_after_s_);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->caller.admin);  // root's own token

  auto d = auth_->Authenticate(Tcp(kDaemonToken), &retry_after_s_);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->caller.uid, kDaemonUid);
  EXPECT_EQ(d->via, Via::kDaemonToken);

  EXPECT_EQ(auth_->Authenticate(Tcp(""), &retry_after_s_).status().msg_id(), "api.unauthenticated");
  EXPECT_EQ(auth_->Authenticate(Tcp(std::string(64, 'e')), &retry_after_s_).status().msg_id(),
            "api.unauthenticated");
}

TEST_F(AuthTest, FailuresAreLimitedPerAddress) {
  const std::string good = Issue(1234);
  const std::string bad = "lathe_t0000000000_" + std::string(64, '0');
  for (int i = 0; i < 10; ++i) {
    auto a = auth_->Authenticate(Tcp(bad), &retry_after_s_);
    EXPECT_EQ(a.status().msg_id(), "token.invalid") << i;
    clock_.Advance(1000);
  }
  // Over the limit: refused before the token is looked at, a good one too.
  auto limited = auth_->Authenticate(Tcp(good), &retry_after_s_);
  EXPECT_EQ(limited.status().code(), Code::kResourceExhausted);
  EXPECT_EQ(limited.status().msg_id(), "api.auth_rate_limited");
  EXPECT_EQ(retry_after_s_, 50);  // the first failure leaves the minute 50 s from now
  // Another address is not affected, nor is the unix socket.
  EXPECT_TRUE(auth_->Authenticate(Tcp(good, "10.0.0.8:4000"), &retry_after_s_).ok());
  net::HttpRequest sock;
  sock.peer = net::PeerCred{1, 1234, 1234};
  EXPECT_TRUE(auth_->Authenticate(sock, &retry_after_s_).ok());
  // Once the oldest failure is a minute old, one more try is allowed.
  clock_.Advance(50'000);
  EXPECT_TRUE(auth_->Authenticate(Tcp(good), &retry_after_s_).ok());
}

// Any web page can make a browser send requests without a credential:
// those are no failed logins, or a page could lock its visitor out.
TEST_F(AuthTest, RequestsWithoutACredentialDoNotCountAsFailures) {
  const std::string good = Issue(1234);
  net::HttpRequest other_cookie = Tcp("");
  other_cookie.headers.emplace_back("Cookie", "theme=dark");
  for (int i = 0; i < 30; ++i) {
    EXPECT_EQ(auth_->Authenticate(Tcp(""), &retry_after_s_).status().msg_id(),
              "api.unauthenticated");
    EXPECT_EQ(auth_->Authenticate(other_cookie, &retry_after_s_).status().msg_id(),
              "api.unauthenticated");
    EXPECT_EQ(auth_->AuthenticateRunOrigin(Tcp(""), "run:r1", &retry_after_s_).status().msg_id(),
              "api.unauthenticated");
  }
  EXPECT_TRUE(auth_->Authenticate(Tcp(good), &retry_after_s_).ok());
  // A credential that is there and refused counts, whatever its kind.
  net::HttpRequest basic = Tcp("");
  basic.headers.emplace_back("Authorization", "Basic dTpw");
  for (int i = 0; i < 10; ++i) (void)auth_->Authenticate(basic, &retry_after_s_);
  EXPECT_EQ(auth_->Authenticate(Tcp(good), &retry_after_s_).status().msg_id(),
            "api.auth_rate_limited");
}

// Any local user may bind any 127.x.y.z: on loopback the limit is the
// connecting user's (the uid the server read for the connection), whichever
// address they come from.
TEST_F(AuthTest, LoopbackFailuresAreLimitedPerUserWhicheverAddress) {
  const std::string good = Issue(1234);
  const std::string bad = "lathe_t0000000000_" + std::string(64, '0');
  auto from = [](const std::string& token, const std::string& remote, std::optional<unsigned> uid) {
    net::HttpRequest r = Tcp(token, remote);
    r.loopback = true;
    r.loopback_uid = uid;
    return r;
  };
  for (int i = 0; i < 10; ++i) {
    const std::string remote = "127.0.0." + std::to_string(2 + i) + ":4000";
    EXPECT_EQ(auth_->Authenticate(from(bad, remote, 1001), &retry_after_s_).status().msg_id(),
              "token.invalid");
  }
  EXPECT_EQ(
      auth_->Authenticate(from(good, "127.9.9.9:4000", 1001), &retry_after_s_).status().msg_id(),
      "api.auth_rate_limited");
  EXPECT_TRUE(auth_->Authenticate(from(good, "127.0.0.2:4000", 1002), &retry_after_s_).ok());
  // Loopback clients whose user is not known are one client, apart from the users.
  for (int i = 0; i < 10; ++i) {
    (void)auth_->Authenticate(from(bad, "127.0.0." + std::to_string(2 + i) + ":1", std::nullopt),
                              &retry_after_s_);
  }
  EXPECT_EQ(
      auth_->Authenticate(from(good, "[::1]:1", std::nullopt), &retry_after_s_).status().msg_id(),
      "api.auth_rate_limited");
  EXPECT_TRUE(auth_->Authenticate(from(good, "127.0.0.2:4000", 1002), &retry_after_s_).ok());
}

TEST_F(AuthTest, ACredentialStillHoldsUntilRevokedOrExpired) {
  const std::string token = Issue(1234, "1h");
  auto t = auth_->Authenticate(Tcp(token), &retry_after_s_);
  ASSERT_TRUE(t.ok());
  EXPECT_TRUE(auth_->StillValid(*t));
  clock_.Advance(3600 * 1000);
  EXPECT_FALSE(auth_->StillValid(*t));  // expired meanwhile
  auto other = auth_->Authenticate(Tcp(Issue(1234)), &retry_after_s_);
  ASSERT_TRUE(other.ok());
  ASSERT_TRUE(tokens_->Revoke(other->token_id, std::nullopt).ok());
  EXPECT_FALSE(auth_->StillValid(*other));
  IssuedSession ui = Login(1234);
  auto s = auth_->Authenticate(WithCookie(ui.cookie_value), &retry_after_s_);
  ASSERT_TRUE(s.ok());
  EXPECT_TRUE(auth_->StillValid(*s));
  ASSERT_TRUE(sessions_->Revoke(ui.record.id, std::nullopt).ok());
  EXPECT_FALSE(auth_->StillValid(*s));
  auto daemon = auth_->Authenticate(Tcp(kDaemonToken), &retry_after_s_);
  ASSERT_TRUE(daemon.ok());
  EXPECT_TRUE(auth_->StillValid(*daemon));
}

TEST_F(AuthTest, ASessionCookieActsAsItsUserOnlyWithScopeUi) {
  IssuedSession ui = Login(1234);
  auto a = auth_->Authenticate(WithCookie(ui.cookie_value), &retry_after_s_);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->via, Via::kSession);
  EXPECT_EQ(a->caller.uid, 1234u);
  EXPECT_FALSE(a->caller.admin);
  ASSERT_TRUE(a->session);
  EXPECT_EQ(a->session->id, ui.record.id);
  // A run's origin's cookie is never the API's.
  IssuedSession run = Login(1234, "run:r1");
  auto r = auth_->Authenticate(WithCookie(run.cookie_value), &retry_after_s_);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().msg_id(), "session.invalid");
  // A bearer token wins over a cookie.
  net::HttpRequest both = WithCookie(ui.cookie_value);
  both.headers.emplace_back("Authorization", "Bearer " + kDaemonToken);
  EXPECT_EQ(auth_->Authenticate(both, &retry_after_s_)->via, Via::kDaemonToken);
  // The unix socket is its peer's, whatever cookie it carries.
  net::HttpRequest sock = WithCookie(ui.cookie_value);
  sock.peer = net::PeerCred{1, 77, 77};
  EXPECT_EQ(auth_->Authenticate(sock, &retry_after_s_)->caller.uid, 77u);
  // Revoked: refused at the next request.
  ASSERT_TRUE(sessions_->Revoke(ui.record.id, std::nullopt).ok());
  EXPECT_EQ(auth_->Authenticate(WithCookie(ui.cookie_value), &retry_after_s_).status().msg_id(),
            "session.invalid");
}

TEST_F(AuthTest, ACookieRequestThatChangesStateNeedsTheCsrfTokenAndTheOwnOrigin) {
  IssuedSession s = Login(1234);
  auto check = [&](net::HttpRequest req, bool tls = false) {
    auto a = auth_->Authenticate(req, &retry_after_s_);
    EXPECT_TRUE(a.ok()) << a.status().ToString();
    return auth_->CheckSessionRequest(req, *a, tls);
  };
  EXPECT_TRUE(check(WithCookie(s.cookie_value, "GET")).ok());
  EXPECT_TRUE(check(WithCookie(s.cookie_value, "HEAD")).ok());
  net::HttpRequest post = WithCookie(s.cookie_value, "POST");
  Status no_token = check(post);
  EXPECT_EQ(no_token.msg_id(), "session.csrf_missing");
  EXPECT_TRUE(no_token.IsPermissionDenied());
  post.headers.emplace_back("X-Lathe-CSRF", std::string(64, 'a'));
  EXPECT_EQ(check(post).msg_id(), "session.csrf_invalid");
  const std::string csrf = sessions_->CsrfToken(s.record);
  for (const char* method : {"POST", "DELETE", "PUT", "PATCH"}) {
    net::HttpRequest ok = WithCookie(s.cookie_value, method);
    ok.headers.emplace_back("x-lathe-csrf", csrf);
    EXPECT_TRUE(check(ok).ok()) << method;
    ok.headers.emplace_back("Origin", "http://evil.example");
    EXPECT_EQ(check(ok).msg_id(), "session.bad_origin") << method;
  }
  net::HttpRequest same = WithCookie(s.cookie_value, "POST");
  same.headers.emplace_back("X-Lathe-CSRF", csrf);
  same.headers.emplace_back("Origin", "http://localhost:8421");
  EXPECT_TRUE(check(same).ok());
  EXPECT_EQ(check(same, /*tls=*/true).msg_id(), "session.bad_origin");  // https expected
  net::HttpRequest null_origin = WithCookie(s.cookie_value, "POST");
  null_origin.headers.emplace_back("X-Lathe-CSRF", csrf);
  null_origin.headers.emplace_back("Origin", "null");
  EXPECT_EQ(check(null_origin).msg_id(), "session.bad_origin");
  // Another session's CSRF token is no good for this one.
  IssuedSession other = Login(1234);
  net::HttpRequest crossed = WithCookie(s.cookie_value, "POST");
  crossed.headers.emplace_back("X-Lathe-CSRF", sessions_->CsrfToken(other.record));
  EXPECT_EQ(check(crossed).msg_id(), "session.csrf_invalid");
  // A bearer token needs none.
  net::HttpRequest bearer = Tcp(Issue(1234));
  bearer.method = "POST";
  auto b = auth_->Authenticate(bearer, &retry_after_s_);
  ASSERT_TRUE(b.ok());
  EXPECT_TRUE(auth_->CheckSessionRequest(bearer, *b, false).ok());
}

TEST_F(AuthTest, FailedCodeRedemptionsCountAgainstTheLimit) {
  net::HttpRequest req = WithCookie("");
  for (int i = 0; i < 10; ++i) {
    auto r = auth_->RedeemCode(req, std::string(64, '0'), kUiScope, &retry_after_s_);
    EXPECT_EQ(r.status().msg_id(), "session.code_invalid") << i;
  }
  auto code = sessions_->IssueCode(1234, "u", "ui", "socket");
  ASSERT_TRUE(code.ok());
  // Over the limit: a good code is not redeemed (nor spent).
  auto limited = auth_->RedeemCode(req, *code, kUiScope, &retry_after_s_);
  EXPECT_EQ(limited.status().msg_id(), "api.auth_rate_limited");
  EXPECT_GT(retry_after_s_, 0);
  EXPECT_EQ(auth_->Authenticate(Tcp(Issue(1234), req.remote), &retry_after_s_).status().msg_id(),
            "api.auth_rate_limited");  // the same address's bearer tokens too
  clock_.Advance(60'000);              // the failures have left the window
  retry_after_s_ = 0;
  auto code2 = sessions_->IssueCode(1234, "u", "ui", "socket");
  ASSERT_TRUE(code2.ok());
  auto ok = auth_->RedeemCode(req, *code2, kUiScope, &retry_after_s_);
  EXPECT_TRUE(ok.ok()) << ok.status().ToString();
}

TEST(Cookies, FindsTheNamedCookie) {
  EXPECT_EQ(CookieValue("lathe_session=abc", "lathe_session"), "abc");
  EXPECT_EQ(CookieValue("a=1; lathe_session=abc; b=2", "lathe_session"), "abc");
  EXPECT_EQ(CookieValue("a=1;lathe_session=\"abc\"", "lathe_session"), "abc");
  EXPECT_EQ(CookieValue("xlathe_session=abc", "lathe_session"), std::nullopt);
  EXPECT_EQ(CookieValue("lathe_session_x=abc", "lathe_session"), std::nullopt);
  EXPECT_EQ(CookieValue("lathe_session=one; lathe_session=two", "lathe_session"), "one");
  EXPECT_EQ(CookieValue("", "lathe_session"), std::nullopt);
  EXPECT_EQ(CookieValue("lathe_session", "lathe_session"), std::nullopt);
}

TEST(AuthLimiter, BoundsTheAddressesItHolds) {
  AuthLimiter::Options o;
  o.max_failures = 2;
  o.window_ms = 1000;
  o.max_addresses = 3;
  AuthLimiter l(o);
  EXPECT_FALSE(l.RecordFailure("a", 0));
  EXPECT_TRUE(l.RecordFailure("a", 1));  // reaches the limit
  EXPECT_EQ(l.RetryAfterMs("a", 1), 999);
  l.RecordFailure("b", 2);
  l.RecordFailure("c", 3);
  l.RecordFailure("d", 4);  // full: the address that failed least recently goes
  EXPECT_EQ(l.tracked(), 3u);
  EXPECT_EQ(l.RetryAfterMs("a", 5), 0);
  l.RecordFailure("e", 5000);  // everyone else's failures have left the window
  EXPECT_EQ(l.tracked(), 1u);
  EXPECT_EQ(AddressOf("127.0.0.1:53412"), "127.0.0.1");
  EXPECT_EQ(AddressOf("::1:53412"), "::1");
}

}  // namespace
}  // namespace lathe::api

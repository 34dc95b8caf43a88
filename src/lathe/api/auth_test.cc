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
    auth_ = std::make_unique<Authenticator>(kDaemonToken, kDaemonUid, *tokens_, clock_);
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
    r.expires = expires;
    auto t = tokens_->Issue(r);
    EXPECT_TRUE(t.ok()) << t.status().ToString();
    return t.ok() ? t->token : "";
  }

  std::string dir_;
  os::FakeClock clock_;
  std::unique_ptr<TokenService> tokens_;
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

#include "lathe/api/sessions.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "lathe/api/tokens.h"
#include "lathe/os/test_util/fake_clock.h"

namespace lathe::api {
namespace {

constexpr uid_t kAlice = 1001, kBob = 1002;

class SessionsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/lathe-sess-XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    Open(SessionService::Options());
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  void Open(SessionService::Options o) {
    svc_.reset();
    auto s = SessionService::Open(dir_ + "/lathe.db", clock_, o);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    svc_ = std::move(s).value();
  }
  std::string Code(uid_t uid = kAlice, const std::string& scope = std::string(kUiScope)) {
    auto c = svc_->IssueCode(uid, "u" + std::to_string(uid), scope, "socket");
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    return c.ok() ? *c : "";
  }
  IssuedSession Login(uid_t uid = kAlice, const std::string& scope = std::string(kUiScope)) {
    auto s = svc_->Redeem(Code(uid, scope), scope);
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return s.ok() ? *s : IssuedSession{};
  }
  std::string DbBytes() {
    std::string all;
    for (const auto& e : std::filesystem::directory_iterator(dir_)) {
      std::ifstream f(e.path(), std::ios::binary);
      std::stringstream ss;
      ss << f.rdbuf();
      all += ss.str();
    }
    return all;
  }

  std::string dir_;
  os::FakeClock clock_;
  std::unique_ptr<SessionService> svc_;
};

TEST_F(SessionsTest, ACodeIsGoodOnceForItsUserAndScope) {
  std::string code = Code();
  EXPECT_EQ(code.size(), 64u);
  auto s = svc_->Redeem(code, kUiScope);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->record.uid, kAlice);
  EXPECT_EQ(s->record.user, "u1001");
  EXPECT_EQ(s->record.scope, "ui");
  EXPECT_EQ(s->record.created_by, "socket");
  EXPECT_EQ(s->record.id.size(), 11u);
  EXPECT_EQ(s->record.id[0], 's');
  EXPECT_EQ(s->cookie_value.substr(0, 12), s->record.id + "_");
  // Used: the same code again is refused.
  auto again = svc_->Redeem(code, kUiScope);
  ASSERT_FALSE(again.ok());
  EXPECT_TRUE(again.status().IsPermissionDenied());
  EXPECT_EQ(again.status().msg_id(), "session.code_invalid");
  EXPECT_EQ(svc_->Redeem("not-a-code", kUiScope).status().msg_id(), "session.code_invalid");
  EXPECT_EQ(svc_->Redeem("", kUiScope).status().msg_id(), "session.code_invalid");
}

TEST_F(SessionsTest, ACodeExpiresAfterItsTtl) {
  std::string late = Code(), in_time = Code();
  clock_.Advance(59'999);
  EXPECT_TRUE(svc_->Redeem(in_time, kUiScope).ok());
  clock_.Advance(1);
  auto r = svc_->Redeem(late, kUiScope);
  EXPECT_EQ(r.status().msg_id(), "session.code_invalid");
  EXPECT_EQ(svc_->codes_outstanding(), 0u);
}

TEST_F(SessionsTest, ACodeOfAnotherScopeIsRefusedAndSpent) {
  std::string code = Code(kAlice, "run:r1");
  EXPECT_EQ(svc_->Redeem(code, kUiScope).status().msg_id(), "session.code_invalid");
  // Shown on the wrong origin, it is spent: not good on its own one either.
  EXPECT_EQ(svc_->Redeem(code, "run:r1").status().msg_id(), "session.code_invalid");
  IssuedSession run = Login(kAlice, "run:r1");
  EXPECT_EQ(run.record.scope, "run:r1");
  EXPECT_TRUE(svc_->Verify(run.cookie_value, "run:r1").ok());
  EXPECT_EQ(svc_->Verify(run.cookie_value, kUiScope).status().msg_id(), "session.invalid");
  EXPECT_FALSE(svc_->Verify(run.cookie_value, "run:r2").ok());
  IssuedSession ui = Login();
  EXPECT_FALSE(svc_->Verify(ui.cookie_value, "run:r1").ok());
}

TEST_F(SessionsTest, OutstandingCodesAreBounded) {
  SessionService::Options o;
  o.max_codes_per_user = 2;
  o.max_codes = 3;
  Open(o);
  Code(kAlice);
  Code(kAlice);
  auto third = svc_->IssueCode(kAlice, "a", "ui", "socket");
  ASSERT_FALSE(third.ok());
  EXPECT_EQ(third.status().msg_id(), "session.too_many_codes");
  Code(kBob);  // another user is not locked out by Alice
  EXPECT_EQ(svc_->IssueCode(kBob + 1, "c", "ui", "socket").status().msg_id(),
            "session.too_many_codes");  // everyone together
  clock_.Advance(o.code_ttl_ms);
  EXPECT_TRUE(svc_->IssueCode(kAlice, "a", "ui", "socket").ok());  // expired ones gave way
}

TEST_F(SessionsTest, VerifyChecksTheSecretAndTheForm) {
  IssuedSession s = Login();
  auto v = svc_->Verify(s.cookie_value, kUiScope);
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ(v->id, s.record.id);
  EXPECT_EQ(v->uid, kAlice);
  std::string wrong = s.cookie_value;
  wrong.back() = wrong.back() == '0' ? '1' : '0';
  EXPECT_EQ(svc_->Verify(wrong, kUiScope).status().msg_id(), "session.invalid");
  EXPECT_EQ(svc_->Verify("garbage", kUiScope).status().msg_id(), "session.invalid");
  EXPECT_EQ(svc_->Verify("", kUiScope).status().msg_id(), "session.invalid");
}

TEST_F(SessionsTest, ASessionEndsWhenIdleAndAtItsAbsoluteEnd) {
  SessionService::Options o;
  o.idle_ttl_ms = 1000;
  o.absolute_ttl_ms = 5000;
  o.touch_every_ms = 100;
  Open(o);
  IssuedSession idle = Login();
  EXPECT_EQ(idle.record.expires_ms, clock_.NowMs() + 1000);
  clock_.Advance(999);
  EXPECT_TRUE(svc_->Verify(idle.cookie_value, kUiScope).ok());  // used: idle time restarts
  clock_.Advance(999);
  auto v = svc_->Verify(idle.cookie_value, kUiScope);
  ASSERT_TRUE(v.ok());
  clock_.Advance(1000);
  EXPECT_EQ(svc_->Verify(idle.cookie_value, kUiScope).status().msg_id(), "session.invalid");

  IssuedSession busy = Login();
  for (int i = 0; i < 4; ++i) {
    clock_.Advance(900);
    EXPECT_TRUE(svc_->Verify(busy.cookie_value, kUiScope).ok()) << i;
  }
  clock_.Advance(900);  // 4.5 s: still within 5 s
  auto last = svc_->Verify(busy.cookie_value, kUiScope);
  ASSERT_TRUE(last.ok());
  EXPECT_EQ(last->expires_ms, busy.record.created_ms + 5000);  // the absolute end comes first
  clock_.Advance(500);
  EXPECT_FALSE(svc_->Verify(busy.cookie_value, kUiScope).ok());
  // Ended sessions are not listed.
  EXPECT_TRUE(svc_->List(kAlice)->empty());
}

TEST_F(SessionsTest, RevokeEndsASessionForItsOwnerOrAnAdminOnly) {
  IssuedSession a = Login(kAlice), b = Login(kBob);
  auto not_mine = svc_->Revoke(a.record.id, kBob);
  ASSERT_FALSE(not_mine.ok());
  EXPECT_EQ(not_mine.status().msg_id(), "session.not_found");
  EXPECT_TRUE(svc_->Verify(a.cookie_value, kUiScope).ok());
  auto mine = svc_->Revoke(a.record.id, kAlice);
  ASSERT_TRUE(mine.ok()) << mine.status().ToString();
  EXPECT_EQ(mine->id, a.record.id);
  EXPECT_EQ(svc_->Verify(a.cookie_value, kUiScope).status().msg_id(), "session.invalid");
  EXPECT_EQ(svc_->Revoke(a.record.id, kAlice).status().msg_id(), "session.not_found");
  EXPECT_TRUE(svc_->Revoke(b.record.id, std::nullopt).ok());  // an admin
  EXPECT_FALSE(svc_->Verify(b.cookie_value, kUiScope).ok());
}

TEST_F(SessionsTest, ListShowsOnesOwnOrEveryones) {
  IssuedSession a1 = Login(kAlice);
  clock_.Advance(1);
  IssuedSession a2 = Login(kAlice);
  Login(kBob);
  auto mine = svc_->List(kAlice);
  ASSERT_TRUE(mine.ok());
  ASSERT_EQ(mine->size(), 2u);
  EXPECT_EQ((*mine)[0].id, a2.record.id);  // newest first
  EXPECT_EQ((*mine)[1].id, a1.record.id);
  EXPECT_EQ(svc_->List(std::nullopt)->size(), 3u);
  Json j = SessionToJson((*mine)[0]);
  EXPECT_FALSE(j.contains("secret_hash"));
  EXPECT_FALSE(j.contains("csrf"));
}

TEST_F(SessionsTest, AUserAtTheMostSessionsLosesTheLeastRecentlyUsed) {
  SessionService::Options o;
  o.max_sessions_per_user = 2;
  o.touch_every_ms = 0;
  Open(o);
  IssuedSession first = Login();
  clock_.Advance(10);
  IssuedSession second = Login();
  clock_.Advance(10);
  ASSERT_TRUE(svc_->Verify(first.cookie_value, kUiScope).ok());  // first is now the more recent
  clock_.Advance(10);
  IssuedSession third = Login();
  EXPECT_TRUE(svc_->Verify(first.cookie_value, kUiScope).ok());
  EXPECT_FALSE(svc_->Verify(second.cookie_value, kUiScope).ok());
  EXPECT_TRUE(svc_->Verify(third.cookie_value, kUiScope).ok());
  Login(kBob);  // another user's count is their own
  EXPECT_TRUE(svc_->Verify(first.cookie_value, kUiScope).ok());
}

TEST_F(SessionsTest, CsrfTokensAreBoundToTheSessionAndSurviveARestart) {
  IssuedSession a = Login(), b = Login();
  std::string ta = svc_->CsrfToken(a.record), tb = svc_->CsrfToken(b.record);
  EXPECT_EQ(ta.size(), 64u);
  EXPECT_NE(ta, tb);
  EXPECT_TRUE(svc_->CheckCsrf(a.record, ta));
  EXPECT_FALSE(svc_->CheckCsrf(a.record, tb));
  EXPECT_FALSE(svc_->CheckCsrf(a.record, ""));
  EXPECT_FALSE(svc_->CheckCsrf(a.record, ta.substr(0, 63)));
  EXPECT_EQ(a.cookie_value.find(ta), std::string::npos);
  Open(SessionService::Options());  // the daemon restarts: sessions and their tokens stay
  auto v = svc_->Verify(a.cookie_value, kUiScope);
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ(svc_->CsrfToken(*v), ta);
}

TEST_F(SessionsTest, ARestartVoidsCodesButNotSessions) {
  std::string code = Code();
  IssuedSession s = Login();
  Open(SessionService::Options());
  EXPECT_EQ(svc_->Redeem(code, kUiScope).status().msg_id(), "session.code_invalid");
  EXPECT_TRUE(svc_->Verify(s.cookie_value, kUiScope).ok());
}

TEST_F(SessionsTest, TheDatabaseHoldsNoCookieOrCode) {
  std::string code = Code();
  IssuedSession s = Login();
  ASSERT_TRUE(svc_->Verify(s.cookie_value, kUiScope).ok());
  const std::string secret = s.cookie_value.substr(12);
  std::string bytes = DbBytes();
  ASSERT_NE(bytes.find(s.record.id), std::string::npos);  // the row is there, by its id
  EXPECT_EQ(bytes.find(secret), std::string::npos);
  EXPECT_EQ(bytes.find(code), std::string::npos);
  EXPECT_NE(bytes.find(HashSecret(secret)), std::string::npos);  // its hash only
}

TEST_F(SessionsTest, ASessionEndsNoLaterThanTheCredentialThatMadeIt) {
  const int64_t token_end = clock_.NowMs() + 3600'000;
  auto code = svc_->IssueCode(kAlice, "alice", std::string(kUiScope), "token t1", token_end);
  ASSERT_TRUE(code.ok());
  auto s = svc_->Redeem(*code, kUiScope);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->record.ends_ms, token_end);
  EXPECT_TRUE(svc_->Verify(s->cookie_value, kUiScope).ok());
  // A session it makes is bounded by it in turn, however often renewed.
  code = svc_->IssueCode(kAlice, "alice", std::string(kUiScope), "session " + s->record.id,
                         s->record.ends_ms);
  ASSERT_TRUE(code.ok());
  auto child = svc_->Redeem(*code, kUiScope);
  ASSERT_TRUE(child.ok());
  EXPECT_LE(child->record.ends_ms, token_end);
  clock_.Advance(3600'000);
  EXPECT_FALSE(svc_->Verify(s->cookie_value, kUiScope).ok());
  EXPECT_FALSE(svc_->Verify(child->cookie_value, kUiScope).ok());
}

TEST_F(SessionsTest, ARevokedCredentialEndsWhatItMade) {
  std::set<std::string> live_tokens = {"t1"};
  svc_->SetTokenCheck([&](const std::string& id) { return live_tokens.count(id) > 0; });
  auto code = svc_->IssueCode(kAlice, "alice", std::string(kUiScope), "token t1");
  ASSERT_TRUE(code.ok());
  auto s = svc_->Redeem(*code, kUiScope);
  ASSERT_TRUE(s.ok());
  code = svc_->IssueCode(kAlice, "alice", "run:r1", "session " + s->record.id);
  auto child = svc_->Redeem(*code, "run:r1");
  ASSERT_TRUE(child.ok());
  EXPECT_TRUE(svc_->Verify(child->cookie_value, "run:r1").ok());
  EXPECT_TRUE(svc_->IsLive(child->record.id));
  live_tokens.clear();  // the token is revoked
  EXPECT_FALSE(svc_->Verify(s->cookie_value, kUiScope).ok());
  EXPECT_FALSE(svc_->Verify(child->cookie_value, "run:r1").ok());
  EXPECT_FALSE(svc_->IsLive(child->record.id));
  // A code it asked for before is no good either.
  code = svc_->IssueCode(kAlice, "alice", std::string(kUiScope), "token t1");
  EXPECT_FALSE(svc_->Redeem(*code, kUiScope).ok());
  // Revoking a session ends the sessions it made.
  IssuedSession parent = Login();
  code = svc_->IssueCode(kAlice, "alice", std::string(kUiScope), "session " + parent.record.id);
  auto made = svc_->Redeem(*code, kUiScope);
  ASSERT_TRUE(made.ok());
  ASSERT_TRUE(svc_->Revoke(parent.record.id, kAlice).ok());
  EXPECT_FALSE(svc_->Verify(made->cookie_value, kUiScope).ok());
}

}  // namespace
}  // namespace lathe::api

// A home a Lathe of schema v11 left (three tables of credentials) opened by
// this one (one table, v12): what that Lathe issued keeps working, unchanged.
// The fixture (state/testdata/lathe-v11.sql and .json) was made with that
// Lathe's binary by state/testdata/make_lathe_v11.py.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "lathe/api/deploy_keys.h"
#include "lathe/api/sessions.h"
#include "lathe/api/tokens.h"
#include "lathe/common/json.h"
#include "lathe/os/test_util/fake_clock.h"
#include "lathe/state/schema.h"

namespace lathe::api {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

const std::string kTestdata = std::string(LATHE_SOURCE_DIR) + "/src/lathe/state/testdata/";

// The plaintext credentials and what the old daemon showed of them.
Json Fixture() {
  auto j = ParseJson(ReadFile(kTestdata + "lathe-v11.json"));
  return j.ok() ? *j : Json::object();
}

class CredentialUpgradeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/lathe-upgrade-XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    db_path_ = dir_ + "/lathe.db";
    fx_ = Fixture();
    ASSERT_EQ(fx_["tokens"].size(), 3u);
    ASSERT_EQ(fx_["sessions"].size(), 2u);
    ASSERT_EQ(fx_["deploy_keys"].size(), 2u);
    {
      auto db = state::Db::Open(db_path_, {});
      ASSERT_TRUE(db.ok()) << db.status().ToString();
      // As `sqlite3 lathe.db < lathe-v11.sql` would: the dump's tables come
      // in name order, so a row may name one not made yet.
      ASSERT_TRUE((*db)->Exec("PRAGMA foreign_keys=OFF").ok());
      Status loaded = (*db)->Exec(ReadFile(kTestdata + "lathe-v11.sql"));
      ASSERT_TRUE(loaded.ok()) << loaded.ToString();
    }
    // A second after the last session was made: every session is live.
    clock_ = std::make_unique<os::FakeClock>(
        fx_["sessions"][1]["session"]["created_at_ms"].get<int64_t>() + 1000);
    auto t = TokenService::Open(db_path_, *clock_);
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    tokens_ = std::move(t).value();
    auto s = SessionService::Open(db_path_, *clock_);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    sessions_ = std::move(s).value();
    sessions_->SetTokenCheck([this](const std::string& id) { return tokens_->IsLive(id); });
    auto k = DeployKeyService::Open(db_path_, *clock_);
    ASSERT_TRUE(k.ok()) << k.status().ToString();
    keys_ = std::move(k).value();
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  const Json& Token(const std::string& name) {
    for (const auto& t : fx_["tokens"])
      if (t["name"] == name) return t;
    ADD_FAILURE() << "no token " << name << " in the fixture";
    return fx_;
  }

  std::string dir_, db_path_;
  Json fx_;
  std::unique_ptr<os::FakeClock> clock_;
  std::unique_ptr<TokenService> tokens_;
  std::unique_ptr<SessionService> sessions_;
  std::unique_ptr<DeployKeyService> keys_;
};

TEST_F(CredentialUpgradeTest, TheDatabaseIsNowTheCurrentSchema) {
  auto db = state::Db::Open(db_path_, state::SchemaMigrations());
  ASSERT_TRUE(db.ok());
  EXPECT_EQ((*db)->schema_version(), static_cast<int>(state::SchemaMigrations().size()));
  auto old = (*db)->Prepare(
      "SELECT COUNT(*) FROM sqlite_master WHERE name IN ('api_tokens', "
      "'browser_sessions', 'deploy_keys')");
  ASSERT_TRUE(old.ok());
  ASSERT_TRUE(*old->Step());
  EXPECT_EQ(old->Int(0), 0);
}

TEST_F(CredentialUpgradeTest, TokensVerifyAndKeepTheirIdsNamesAndExpiry) {
  const int64_t now = clock_->NowMs();
  for (const char* name : {"laptop", "ci"}) {
    const Json& want = Token(name);
    auto v = tokens_->Verify(want["token"].get<std::string>());
    ASSERT_TRUE(v.ok()) << name << ": " << v.status().ToString();
    Json got = TokenToJson(*v, now);
    for (const char* field :
         {"id", "name", "uid", "user", "created_at_ms", "expires_at_ms", "expired", "created_by"}) {
      EXPECT_EQ(got[field], want[field]) << name << " " << field;
    }
  }
  // The short one has expired since, and says so (its secret is right).
  const Json& spare = Token("spare");
  auto late = tokens_->Verify(spare["token"].get<std::string>());
  EXPECT_EQ(late.status().msg_id(), "token.expired");
  // A wrong secret is no better after the upgrade than before.
  std::string wrong = Token("ci")["token"].get<std::string>();
  wrong.back() = wrong.back() == '0' ? '1' : '0';
  EXPECT_EQ(tokens_->Verify(wrong).status().msg_id(), "token.invalid");

  auto listed = tokens_->List(std::nullopt);
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->size(), 3u);
  EXPECT_EQ((*listed)[0].id, spare["id"]);  // newest first, as before
}

TEST_F(CredentialUpgradeTest, SessionsVerifyWithTheirCsrfTokensAndScope) {
  for (const auto& s : fx_["sessions"]) {
    const std::string cookie = s["cookie"].get<std::string>();
    auto v = sessions_->Verify(cookie, kUiScope);
    ASSERT_TRUE(v.ok()) << v.status().ToString();
    Json got = SessionToJson(*v), want = s["session"];
    want.erase("csrf");
    want.erase("csrf_header");
    EXPECT_EQ(got, want);
    // The daemon's CSRF key came along: the page's token still holds.
    EXPECT_EQ(sessions_->CsrfToken(*v), s["session"]["csrf"].get<std::string>());
    EXPECT_TRUE(sessions_->CheckCsrf(*v, s["session"]["csrf"].get<std::string>()));
    EXPECT_EQ(sessions_->Verify(cookie, "run:r1").status().msg_id(), "session.invalid");
  }
  EXPECT_EQ(sessions_->List(std::nullopt)->size(), 2u);
  // Idle for 12 hours: ended, as before.
  clock_->Advance(12LL * 3600 * 1000);
  EXPECT_EQ(sessions_->Verify(fx_["sessions"][0]["cookie"].get<std::string>(), kUiScope)
                .status()
                .msg_id(),
            "session.invalid");
}

TEST_F(CredentialUpgradeTest, DeploymentKeysVerifyForTheirDeploymentOnly) {
  const int64_t now = clock_->NowMs();
  for (const auto& want : fx_["deploy_keys"]) {
    auto v = keys_->Verify(want["key"].get<std::string>(), "web");
    ASSERT_TRUE(v.ok()) << v.status().ToString();
    Json got = DeployKeyToJson(*v, now);
    for (const char* field : {"id", "deployment", "name", "uid", "user", "created_at_ms",
                              "expires_at_ms", "expired", "created_by"}) {
      EXPECT_EQ(got[field], want[field]) << field;
    }
    EXPECT_EQ(keys_->Verify(want["key"].get<std::string>(), "llm").status().msg_id(),
              "deploy_key.invalid");
  }
  // Both were live: a third is refused until one goes.
  DeployKeyRequest req;
  req.deployment = "web";
  req.user = "root";
  req.created_by = "socket";
  EXPECT_EQ(keys_->Issue(req).status().msg_id(), "deploy_key.too_many");
  EXPECT_EQ(keys_->List("web", std::nullopt)->size(), 2u);
}

TEST_F(CredentialUpgradeTest, RevocationStillWorks) {
  // A token: refused at once, and the session made with it ends with it.
  const Json& laptop = Token("laptop");
  const Json& by_token = fx_["sessions"][1];
  ASSERT_EQ(by_token["session"]["created_by"], "token " + laptop["id"].get<std::string>());
  ASSERT_TRUE(sessions_->Verify(by_token["cookie"].get<std::string>(), kUiScope).ok());
  ASSERT_TRUE(tokens_->Revoke(laptop["id"].get<std::string>(), 0u).ok());
  EXPECT_EQ(tokens_->Verify(laptop["token"].get<std::string>()).status().msg_id(), "token.invalid");
  EXPECT_EQ(sessions_->Verify(by_token["cookie"].get<std::string>(), kUiScope).status().msg_id(),
            "session.invalid");
  EXPECT_TRUE(tokens_->Verify(Token("ci")["token"].get<std::string>()).ok());

  // A session.
  const Json& from_socket = fx_["sessions"][0];
  ASSERT_TRUE(sessions_->Revoke(from_socket["session"]["id"].get<std::string>(), 0u).ok());
  EXPECT_EQ(sessions_->Verify(from_socket["cookie"].get<std::string>(), kUiScope).status().msg_id(),
            "session.invalid");

  // A key: refused at once, and it leaves room for the next.
  const Json& ci = fx_["deploy_keys"][0];
  ASSERT_TRUE(keys_->Revoke(ci["id"].get<std::string>(), 0u).ok());
  EXPECT_EQ(keys_->Verify(ci["key"].get<std::string>(), "web").status().msg_id(),
            "deploy_key.invalid");
  EXPECT_TRUE(keys_->Verify(fx_["deploy_keys"][1]["key"].get<std::string>(), "web").ok());
  DeployKeyRequest req;
  req.deployment = "web";
  req.user = "root";
  req.created_by = "socket";
  EXPECT_TRUE(keys_->Issue(req).ok());
}

}  // namespace
}  // namespace lathe::api

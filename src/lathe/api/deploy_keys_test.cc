#include "lathe/api/deploy_keys.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>

#include "lathe/api/tokens.h"
#include "lathe/os/test_util/fake_clock.h"

namespace lathe::api {
namespace {

class DeployKeysTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/lathe-dkeys-XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    auto s = DeployKeyService::Open(dir_ + "/lathe.db", clock_);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    keys_ = std::move(s).value();
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  DeployKeyRequest For(const std::string& deployment, uid_t uid, std::string expires = "") {
    DeployKeyRequest r;
    r.deployment = deployment;
    r.uid = uid;
    r.user = "u" + std::to_string(uid);
    r.name = "ci";
    r.expires = std::move(expires);
    r.created_by = "socket";
    return r;
  }

  // Every byte of the database's files (the database, its WAL, its -shm).
  std::string DatabaseBytes() {
    std::string db;
    for (const auto& e : std::filesystem::directory_iterator(dir_)) {
      std::ifstream f(e.path(), std::ios::binary);
      db += std::string(std::istreambuf_iterator<char>(f), {});
    }
    return db;
  }

  std::string dir_;
  os::FakeClock clock_;
  std::unique_ptr<DeployKeyService> keys_;
};

TEST(DeployKeyForm, ParsesOnlyItsOwnFormAndIsNeverAUserToken) {
  std::string secret(64, 'e');
  auto p = ParseDeployKey("lathe_dk_k0123456789_" + secret);
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->id, "k0123456789");
  EXPECT_EQ(p->secret, secret);
  EXPECT_EQ(FormatDeployKey(*p), "lathe_dk_k0123456789_" + secret);
  // A key is not a user's token, and a token is not a key.
  EXPECT_FALSE(ParseToken(FormatDeployKey(*p)));
  EXPECT_FALSE(ParseDeployKey("lathe_t0123456789_" + secret));
  EXPECT_FALSE(ParseDeployKey("lathe_dk_t0123456789_" + secret));  // a token's id
  EXPECT_FALSE(ParseDeployKey("lathe_dk_k0123456789_" + secret + "0"));
  EXPECT_FALSE(ParseDeployKey("lathe_dk_k0123456789_" + secret.substr(1)));
  EXPECT_FALSE(ParseDeployKey("lathe_dk_k012345678i_" + secret));  // 'i' is not base32
  EXPECT_FALSE(ParseDeployKey("lathe_dk_k0123456789_" + std::string(64, 'E')));
  EXPECT_FALSE(ParseDeployKey(""));
}

TEST_F(DeployKeysTest, IssuedKeyVerifiesForItsDeploymentAndIsStoredOnlyHashed) {
  auto issued = keys_->Issue(For("digits", 1000));
  ASSERT_TRUE(issued.ok()) << issued.status().ToString();
  auto parts = ParseDeployKey(issued->key);
  ASSERT_TRUE(parts.has_value()) << issued->key;
  EXPECT_EQ(parts->id, issued->record.id);
  EXPECT_EQ(issued->record.secret_hash, HashSecret(parts->secret));
  EXPECT_EQ(issued->record.scope, "digits");  // its deployment

  auto v = keys_->Verify(issued->key, "digits");
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ(v->uid, 1000u);
  EXPECT_EQ(v->scope, "digits");
  EXPECT_EQ(v->last_used_at_ms, clock_.NowMs());

  // What the API would show holds neither the secret nor its hash; the
  // database's files hold the key's id but never its secret nor the key.
  auto listed = keys_->List("digits", 1000u);
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->size(), 1u);
  Json j = DeployKeyToJson((*listed)[0], clock_.NowMs());
  EXPECT_EQ(j.dump().find(parts->secret), std::string::npos);
  EXPECT_EQ(j.dump().find((*listed)[0].secret_hash), std::string::npos);
  const std::string db = DatabaseBytes();
  EXPECT_NE(db.find(issued->record.id), std::string::npos);  // the file is the one written
  EXPECT_EQ(db.find(parts->secret), std::string::npos);
  EXPECT_EQ(db.find(issued->key), std::string::npos);
}

TEST_F(DeployKeysTest, TheStoredHashIsTheOneTheFrontChecks) {
  auto issued = keys_->Issue(For("digits", 1000));
  ASSERT_TRUE(issued.ok()) << issued.status().ToString();
  auto parts = ParseDeployKey(issued->key);
  ASSERT_TRUE(parts.has_value());
  // The front (deploy/front_routes.h) gets only the stored hash in routes.json.
  EXPECT_TRUE(DeployKeySecretMatches(parts->secret, issued->record.secret_hash));
  EXPECT_EQ(HashDeployKeySecret(parts->secret), HashSecret(parts->secret));
}

TEST_F(DeployKeysTest, AnotherDeploymentsKeyIsTheSameAnswerAsAWrongOne) {
  auto a = keys_->Issue(For("digits", 1000));
  ASSERT_TRUE(a.ok());
  auto parts = *ParseDeployKey(a->key);
  std::string wrong = parts.secret;
  wrong[0] = wrong[0] == '0' ? '1' : '0';
  auto other = keys_->Verify(a->key, "llm");
  auto mistyped = keys_->Verify(FormatDeployKey({parts.id, wrong}), "digits");
  auto unknown = keys_->Verify(FormatDeployKey({"k0000000000", parts.secret}), "digits");
  for (const auto* r : {&other, &mistyped, &unknown}) {
    EXPECT_EQ(r->status().code(), Code::kPermissionDenied);
    EXPECT_EQ(r->status().msg_id(), "deploy_key.invalid");
    EXPECT_EQ(r->status().message().find(parts.secret), std::string::npos);
  }
  auto malformed = keys_->Verify("lathe_t0123456789_" + parts.secret, "digits");
  EXPECT_EQ(malformed.status().code(), Code::kPermissionDenied);
  EXPECT_EQ(malformed.status().msg_id(), "deploy_key.malformed");
  EXPECT_EQ(keys_->Verify("", "digits").status().msg_id(), "deploy_key.malformed");
  EXPECT_TRUE(keys_->Verify(a->key, "digits").ok());  // still good where it belongs
}

TEST_F(DeployKeysTest, TwoLiveAtOnceAThirdIsRefusedUntilOneIsRevoked) {
  auto first = keys_->Issue(For("digits", 1000));
  clock_.Advance(1);
  auto second = keys_->Issue(For("digits", 1000));
  ASSERT_TRUE(first.ok() && second.ok());
  // Both work at once: the clients can move from one to the other.
  EXPECT_TRUE(keys_->Verify(first->key, "digits").ok());
  EXPECT_TRUE(keys_->Verify(second->key, "digits").ok());

  auto third = keys_->Issue(For("digits", 1000));
  EXPECT_EQ(third.status().code(), Code::kResourceExhausted);
  EXPECT_EQ(third.status().msg_id(), "deploy_key.too_many");
  EXPECT_NE(third.status().message().find("2"), std::string::npos);  // names the limit
  EXPECT_EQ(keys_->List("digits", 1000u)->size(), 2u);               // nothing revoked by it
  EXPECT_TRUE(keys_->Verify(first->key, "digits").ok());

  // The limit is per deployment.
  EXPECT_TRUE(keys_->Issue(For("llm", 1000)).ok());

  // Rotation: revoke the old one, issue the next.
  ASSERT_TRUE(keys_->Revoke(first->record.id, 1000u).ok());
  EXPECT_EQ(keys_->Verify(first->key, "digits").status().msg_id(), "deploy_key.invalid");
  auto next = keys_->Issue(For("digits", 1000));
  ASSERT_TRUE(next.ok()) << next.status().ToString();
  EXPECT_TRUE(keys_->Verify(second->key, "digits").ok());
  EXPECT_TRUE(keys_->Verify(next->key, "digits").ok());
}

TEST_F(DeployKeysTest, AnExpiredKeyNeitherWorksNorCountsAsLive) {
  auto soon = keys_->Issue(For("digits", 1000, "30s"));
  ASSERT_TRUE(soon.ok());
  EXPECT_EQ(soon->record.expires_at_ms, clock_.NowMs() + 30'000);
  ASSERT_TRUE(keys_->Issue(For("digits", 1000)).ok());
  EXPECT_EQ(keys_->Issue(For("digits", 1000)).status().msg_id(), "deploy_key.too_many");
  clock_.Advance(29'999);
  EXPECT_TRUE(keys_->Verify(soon->key, "digits").ok());
  clock_.Advance(1);
  auto v = keys_->Verify(soon->key, "digits");
  EXPECT_EQ(v.status().code(), Code::kPermissionDenied);
  EXPECT_EQ(v.status().msg_id(), "deploy_key.expired");
  EXPECT_TRUE(keys_->Issue(For("digits", 1000)).ok());  // the expired one left room
  auto listed = keys_->List("digits", 1000u);
  ASSERT_EQ(listed->size(), 3u);  // listed as expired until revoked
  for (const auto& k : *listed) {
    EXPECT_EQ(DeployKeyToJson(k, clock_.NowMs())["expired"].get<bool>(), k.id == soon->record.id);
  }
}

TEST_F(DeployKeysTest, RevocationIsOnlyTheOwnersAndRevokeAllEmptiesADeployment) {
  auto mine = keys_->Issue(For("digits", 1000));
  auto theirs = keys_->Issue(For("llm", 1001));
  ASSERT_TRUE(mine.ok() && theirs.ok());
  // Another user's key is "not found", and stays valid; nor is it listed.
  auto r = keys_->Revoke(theirs->record.id, 1000u);
  EXPECT_EQ(r.status().code(), Code::kNotFound);
  EXPECT_EQ(r.status().msg_id(), "deploy_key.not_found");
  EXPECT_TRUE(keys_->Verify(theirs->key, "llm").ok());
  EXPECT_TRUE(keys_->List("llm", 1000u)->empty());
  EXPECT_EQ(keys_->List("llm", std::nullopt)->size(), 1u);
  // An admin (no owner) revokes anyone's.
  ASSERT_TRUE(keys_->Revoke(theirs->record.id, std::nullopt).ok());
  EXPECT_EQ(keys_->Verify(theirs->key, "llm").status().msg_id(), "deploy_key.invalid");
  EXPECT_TRUE(keys_->Revoke(theirs->record.id, std::nullopt).status().IsNotFound());

  // The deployment is removed: its keys go, another's stay.
  ASSERT_TRUE(keys_->Issue(For("digits", 1000)).ok());
  auto other = keys_->Issue(For("llm", 1001));
  ASSERT_TRUE(other.ok());
  EXPECT_EQ(*keys_->RevokeAll("digits"), 2);
  EXPECT_EQ(keys_->Verify(mine->key, "digits").status().msg_id(), "deploy_key.invalid");
  EXPECT_TRUE(keys_->List("digits", std::nullopt)->empty());
  EXPECT_TRUE(keys_->Verify(other->key, "llm").ok());
}

TEST_F(DeployKeysTest, RefusesBadRequestsNamingTheField) {
  DeployKeyRequest r = For("Not a name!", 1000);
  EXPECT_EQ(keys_->Issue(r).status().msg_id(), "deploy_key.bad_deployment");
  r = For("digits", 1000, "soon");
  EXPECT_EQ(keys_->Issue(r).status().msg_id(), "token.bad_expires");
  r.expires = "9999d";
  EXPECT_EQ(keys_->Issue(r).status().msg_id(), "token.bad_expires");
  r.expires = "";
  r.name = "a\nb";
  EXPECT_EQ(keys_->Issue(r).status().msg_id(), "token.bad_name");
  EXPECT_TRUE(keys_->List("digits", std::nullopt)->empty());
}

TEST_F(DeployKeysTest, UseIsWrittenAtMostOncePerInterval) {
  auto issued = keys_->Issue(For("digits", 1000));
  ASSERT_TRUE(issued.ok());
  const int64_t first = clock_.NowMs();
  ASSERT_TRUE(keys_->Verify(issued->key, "digits").ok());
  clock_.Advance(1000);
  ASSERT_TRUE(keys_->Verify(issued->key, "digits").ok());
  EXPECT_EQ((*keys_->List("digits", 1000u))[0].last_used_at_ms, first);
  clock_.Advance(60'000);
  ASSERT_TRUE(keys_->Verify(issued->key, "digits").ok());
  EXPECT_EQ((*keys_->List("digits", 1000u))[0].last_used_at_ms, clock_.NowMs());
}

}  // namespace
}  // namespace lathe::api

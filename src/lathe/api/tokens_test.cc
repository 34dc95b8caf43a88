#include "lathe/api/tokens.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>

#include "lathe/os/test_util/fake_clock.h"
#include "lathe/snap/sha256.h"

namespace lathe::api {
namespace {

class TokensTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/lathe-tokens-XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    TokenService::Options o;
    o.max_tokens_per_user = 3;
    auto s = TokenService::Open(dir_ + "/lathe.db", clock_, o);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    tokens_ = std::move(s).value();
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  TokenRequest For(uid_t uid, std::optional<std::string> expires = std::nullopt) {
    TokenRequest r;
    r.uid = uid;
    r.user = "u" + std::to_string(uid);
    r.name = "laptop";
    r.expires = std::move(expires);
    r.created_by = "socket";
    return r;
  }

  std::string dir_;
  os::FakeClock clock_;
  std::unique_ptr<TokenService> tokens_;
};

TEST(TokenForm, ParsesOnlyItsOwnForm) {
  std::string secret(64, 'f');
  auto p = ParseToken("lathe_t0123456789_" + secret);
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->id, "t0123456789");
  EXPECT_EQ(p->secret, secret);
  EXPECT_EQ(FormatToken(*p), "lathe_t0123456789_" + secret);
  EXPECT_FALSE(ParseToken(secret));                                       // the daemon's own token
  EXPECT_FALSE(ParseToken("lathe_t0123456789_" + secret + "0"));          // too long
  EXPECT_FALSE(ParseToken("lathe_t0123456789_" + secret.substr(1)));      // too short
  EXPECT_FALSE(ParseToken("lathe_x0123456789_" + secret));                // not a token id
  EXPECT_FALSE(ParseToken("lathe_t012345678i_" + secret));                // 'i' is not base32
  EXPECT_FALSE(ParseToken("lathe_t0123456789_" + std::string(64, 'F')));  // upper-case hex
  EXPECT_FALSE(ParseToken("lathe_t0123456789-" + secret));
}

TEST(TokenForm, HashIsTheSecretsSha256) {
  EXPECT_EQ(HashSecret("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST_F(TokensTest, IssuedTokenVerifiesAndIsStoredOnlyHashed) {
  auto issued = tokens_->Issue(For(1000));
  ASSERT_TRUE(issued.ok()) << issued.status().ToString();
  auto parts = ParseToken(issued->token);
  ASSERT_TRUE(parts.has_value()) << issued->token;
  EXPECT_EQ(parts->id, issued->record.id);
  EXPECT_EQ(issued->record.secret_hash, HashSecret(parts->secret));
  EXPECT_EQ(issued->record.expires_at_ms, 0);

  auto v = tokens_->Verify(issued->token);
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ(v->uid, 1000u);
  EXPECT_EQ(v->last_used_at_ms, clock_.NowMs());

  // Neither the secret nor the whole token is in the database file.
  auto listed = tokens_->List(1000u);
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ((*listed)[0].last_used_at_ms, clock_.NowMs());
  Json j = TokenToJson((*listed)[0], clock_.NowMs());
  EXPECT_EQ(j.dump().find(parts->secret), std::string::npos);
  EXPECT_EQ(j.dump().find((*listed)[0].secret_hash), std::string::npos);
  std::string db;
  for (const auto& e : std::filesystem::directory_iterator(dir_)) {
    std::ifstream f(e.path(), std::ios::binary);
    db += std::string(std::istreambuf_iterator<char>(f), {});
  }
  EXPECT_NE(db.find(issued->record.id), std::string::npos);  // the file is the one written
  EXPECT_EQ(db.find(parts->secret), std::string::npos);
}

TEST_F(TokensTest, WrongSecretAndUnknownIdAreTheSameAnswer) {
  auto issued = tokens_->Issue(For(1000));
  ASSERT_TRUE(issued.ok());
  auto parts = *ParseToken(issued->token);
  std::string wrong = parts.secret;
  wrong[0] = wrong[0] == '0' ? '1' : '0';
  auto a = tokens_->Verify(FormatToken({parts.id, wrong}));
  auto b = tokens_->Verify(FormatToken({"t0000000000", parts.secret}));
  EXPECT_EQ(a.status().code(), Code::kPermissionDenied);
  EXPECT_EQ(a.status().msg_id(), "token.invalid");
  EXPECT_EQ(b.status().msg_id(), "token.invalid");
  EXPECT_EQ(a.status().message().find(wrong), std::string::npos);
  EXPECT_EQ(tokens_->Verify("not-a-token").status().msg_id(), "api.unauthenticated");
}

TEST_F(TokensTest, ExpiresAtOnce) {
  auto issued = tokens_->Issue(For(1000, "30s"));
  ASSERT_TRUE(issued.ok());
  EXPECT_EQ(issued->record.expires_at_ms, clock_.NowMs() + 30'000);
  clock_.Advance(29'999);
  EXPECT_TRUE(tokens_->Verify(issued->token).ok());
  clock_.Advance(1);
  auto v = tokens_->Verify(issued->token);
  EXPECT_EQ(v.status().code(), Code::kPermissionDenied);
  EXPECT_EQ(v.status().msg_id(), "token.expired");
  Json j = TokenToJson((*tokens_->List(1000u))[0], clock_.NowMs());
  EXPECT_TRUE(j["expired"].get<bool>());
}

TEST_F(TokensTest, RevocationIsImmediateAndOnlyTheOwners) {
  auto mine = tokens_->Issue(For(1000));
  auto theirs = tokens_->Issue(For(1001));
  ASSERT_TRUE(mine.ok() && theirs.ok());
  // Another user's token is "not found" to a user, and stays valid.
  auto r = tokens_->Revoke(theirs->record.id, 1000u);
  EXPECT_EQ(r.status().msg_id(), "token.not_found");
  EXPECT_TRUE(tokens_->Verify(theirs->token).ok());
  ASSERT_TRUE(tokens_->Revoke(mine->record.id, 1000u).ok());
  EXPECT_EQ(tokens_->Verify(mine->token).status().msg_id(), "token.invalid");
  EXPECT_TRUE(tokens_->Revoke(mine->record.id, 1000u).status().IsNotFound());
  // An admin (no owner) revokes anyone's.
  ASSERT_TRUE(tokens_->Revoke(theirs->record.id, std::nullopt).ok());
  EXPECT_EQ(tokens_->Verify(theirs->token).status().msg_id(), "token.invalid");
}

TEST_F(TokensTest, RefusesBadRequestsNamingTheField) {
  TokenRequest r = For(1000, "soon");
  EXPECT_EQ(tokens_->Issue(r).status().msg_id(), "token.bad_expires");
  r.expires = "0s";
  EXPECT_EQ(tokens_->Issue(r).status().msg_id(), "token.bad_expires");
  r.expires = "9999d";
  EXPECT_EQ(tokens_->Issue(r).status().msg_id(), "token.bad_expires");
  r.expires = "";  // given, and empty: not a way to say "never"
  EXPECT_EQ(tokens_->Issue(r).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(tokens_->Issue(r).status().msg_id(), "token.bad_expires");
  r.expires = std::nullopt;
  r.name = std::string(kMaxTokenNameBytes + 1, 'x');
  EXPECT_EQ(tokens_->Issue(r).status().msg_id(), "token.bad_name");
  r.name = "a\nb";
  EXPECT_EQ(tokens_->Issue(r).status().msg_id(), "token.bad_name");
  EXPECT_TRUE(tokens_->List(1000u)->empty());
}

TEST_F(TokensTest, NeverExpiresOnlyWhenLeftOutOrSaidSo) {
  auto left_out = tokens_->Issue(For(1000));
  ASSERT_TRUE(left_out.ok()) << left_out.status().ToString();
  EXPECT_EQ(left_out->record.expires_at_ms, 0);
  auto never = tokens_->Issue(For(1000, "never"));
  ASSERT_TRUE(never.ok()) << never.status().ToString();
  EXPECT_EQ(never->record.expires_at_ms, 0);
  EXPECT_EQ(RequestedTtlMs(std::nullopt).value(), 0);
  EXPECT_EQ(RequestedTtlMs("1h").value(), 3'600'000);
  EXPECT_EQ(RequestedTtlMs("").status().msg_id(), "token.bad_expires");
  EXPECT_EQ(tokens_->List(1000u)->size(), 2u);
}

TEST_F(TokensTest, CapsExpiryAtTheIssuingTokensAndLimitsCount) {
  TokenRequest r = For(1000);
  r.not_after_ms = clock_.NowMs() + 5000;
  auto capped = tokens_->Issue(r);
  ASSERT_TRUE(capped.ok());
  EXPECT_EQ(capped->record.expires_at_ms, r.not_after_ms);
  r.expires = "1s";
  auto sooner = tokens_->Issue(r);
  ASSERT_TRUE(sooner.ok());
  EXPECT_EQ(sooner->record.expires_at_ms, clock_.NowMs() + 1000);
  ASSERT_TRUE(tokens_->Issue(For(1000)).ok());
  auto over = tokens_->Issue(For(1000));
  EXPECT_EQ(over.status().code(), Code::kResourceExhausted);
  EXPECT_EQ(over.status().msg_id(), "token.too_many");
  EXPECT_TRUE(tokens_->Issue(For(1001)).ok());  // per user
}

TEST_F(TokensTest, UseIsWrittenAtMostOncePerInterval) {
  auto issued = tokens_->Issue(For(1000));
  ASSERT_TRUE(issued.ok());
  const int64_t first = clock_.NowMs();
  ASSERT_TRUE(tokens_->Verify(issued->token).ok());
  clock_.Advance(1000);
  ASSERT_TRUE(tokens_->Verify(issued->token).ok());
  EXPECT_EQ((*tokens_->List(1000u))[0].last_used_at_ms, first);
  clock_.Advance(60'000);
  ASSERT_TRUE(tokens_->Verify(issued->token).ok());
  EXPECT_EQ((*tokens_->List(1000u))[0].last_used_at_ms, clock_.NowMs());
}

}  // namespace
}  // namespace lathe::api

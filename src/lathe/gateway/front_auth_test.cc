#include "lathe/gateway/front_auth.h"

#include <gtest/gtest.h>

#include "lathe/common/deploy_key_format.h"

namespace lathe::gateway {
namespace {

const std::string kSecret(64, 'c');
const std::string kKey = "lathe_dk_k0123456789_" + kSecret;

Route Private(int64_t expires_ms = 0) {
  Route r;
  r.name = "digits";
  r.keys.push_back({"kzzzzzzzzzz", HashDeployKeySecret(std::string(64, 'd')), 0});
  r.keys.push_back({"k0123456789", HashDeployKeySecret(kSecret), expires_ms});
  return r;
}

std::string IdOf(const Status& s) { return s.ok() ? "ok" : s.msg_id(); }

TEST(FrontAuth, OnlyALiveKeyOfTheDeploymentOpensIt) {
  const int64_t now = 1'700'000'000'000;
  EXPECT_EQ(IdOf(CheckDeployKey(Private(), "Bearer " + kKey, now)), "ok");
  EXPECT_EQ(IdOf(CheckDeployKey(Private(), "", now)), "deploy_key.missing");
  EXPECT_EQ(IdOf(CheckDeployKey(Private(), kKey, now)), "deploy_key.malformed");  // no "Bearer "
  EXPECT_EQ(IdOf(CheckDeployKey(Private(), "Bearer lathe_t_abc", now)), "deploy_key.api_token");
  EXPECT_EQ(IdOf(CheckDeployKey(Private(), "Bearer abc", now)), "deploy_key.malformed");
  // The right id with another secret, and an id the deployment does not have.
  EXPECT_EQ(
      IdOf(CheckDeployKey(Private(), "Bearer lathe_dk_k0123456789_" + std::string(64, 'd'), now)),
      "deploy_key.invalid");
  EXPECT_EQ(IdOf(CheckDeployKey(Private(), "Bearer lathe_dk_k9999999999_" + kSecret, now)),
            "deploy_key.invalid");
  // Expiry: live until its instant, not from it on.
  EXPECT_EQ(IdOf(CheckDeployKey(Private(now + 1), "Bearer " + kKey, now)), "ok");
  EXPECT_EQ(IdOf(CheckDeployKey(Private(now), "Bearer " + kKey, now)), "deploy_key.expired");
  // A public deployment needs no key at all.
  Route pub = Private();
  pub.is_public = true;
  EXPECT_EQ(IdOf(CheckDeployKey(pub, "", now)), "ok");
  // A deployment without keys opens to none.
  Route none;
  none.name = "x";
  EXPECT_EQ(IdOf(CheckDeployKey(none, "Bearer " + kKey, now)), "deploy_key.invalid");
  EXPECT_TRUE(CheckDeployKey(none, "", now).IsPermissionDenied());
}

// A header holding the key's prefix meant a key: one cut short, or with a
// character mistyped, is deploy_key.invalid, not "no deployment key".
TEST(FrontAuth, AKeyCutShortOrMistypedIsInvalidNotMalformed) {
  const int64_t now = 1'700'000'000'000;
  const std::string cut = "Bearer " + kKey.substr(0, kKey.size() - 10);
  std::string typo = "Bearer " + kKey;
  typo.back() = 'x';  // not hex
  for (const std::string& auth :
       {cut, typo, std::string("Bearer lathe_dk_"), std::string("Bearer lathe_dk_k01")}) {
    const Status s = CheckDeployKey(Private(), auth, now);
    EXPECT_EQ(IdOf(s), "deploy_key.invalid") << auth;
    for (const auto& a : s.args()) {
      if (a.key == "id") EXPECT_EQ(a.value.find(kSecret.substr(0, 8)), std::string::npos) << auth;
    }
  }
  const Status s = CheckDeployKey(Private(), cut, now);
  EXPECT_NE(s.message().find("lathe_dk_k0123456789"), std::string::npos) << s.message();
  // A token is none, nor a key without "Bearer ".
  EXPECT_EQ(IdOf(CheckDeployKey(Private(), "Bearer lathe_t_abc", now)), "deploy_key.api_token");
  EXPECT_EQ(IdOf(CheckDeployKey(Private(), cut.substr(7), now)), "deploy_key.malformed");
}

// A key the deployment does not hold is explained to its holder only: a
// revoked key of this deployment, or a key of another, when the secret
// matches; an id alone says nothing of other deployments.
TEST(FrontAuth, ARefusedKeyIsExplainedOnlyToWhoeverHoldsIt) {
  const int64_t now = 1'700'000'000'000;
  Route here;
  here.name = "llm";
  const std::string auth = "Bearer " + kKey;
  const Status refused = CheckDeployKey(here, auth, now);
  ASSERT_EQ(IdOf(refused), "deploy_key.invalid");
  const std::vector<RouteKey> gone = {{"k0123456789", HashDeployKeySecret(kSecret), 0}};
  EXPECT_EQ(IdOf(ExplainKeyRefusal(refused, here, auth, gone, {})), "deploy_key.revoked");
  const std::vector<std::pair<std::string, std::vector<RouteKey>>> others = {
      {"digits", Private().keys}};
  Status other = ExplainKeyRefusal(refused, here, auth, {}, others);
  EXPECT_EQ(IdOf(other), "deploy_key.wrong_deployment");
  EXPECT_NE(other.ToString().find("digits"), std::string::npos) << other.ToString();
  // The right id with a wrong secret: nothing more is said.
  const std::string forged = "Bearer lathe_dk_k0123456789_" + std::string(64, 'e');
  const Status refused_forged = CheckDeployKey(here, forged, now);
  EXPECT_EQ(IdOf(ExplainKeyRefusal(refused_forged, here, forged, gone, others)),
            "deploy_key.invalid");
  // Other refusals pass as they are.
  const Status missing = CheckDeployKey(here, "", now);
  EXPECT_EQ(IdOf(ExplainKeyRefusal(missing, here, "", gone, others)), "deploy_key.missing");
}

}  // namespace
}  // namespace lathe::gateway

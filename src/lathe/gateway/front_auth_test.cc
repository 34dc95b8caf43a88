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
  EXPECT_EQ(IdOf(CheckDeployKey(Private(), "", now)), "deploy_key.malformed");
  EXPECT_EQ(IdOf(CheckDeployKey(Private(), kKey, now)), "deploy_key.malformed");  // no "Bearer "
  EXPECT_EQ(IdOf(CheckDeployKey(Private(), "Bearer lathe_t_abc", now)), "deploy_key.malformed");
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

}  // namespace
}  // namespace lathe::gateway

#include "lathe/common/deploy_key_format.h"

#include <gtest/gtest.h>

namespace lathe {
namespace {

TEST(DeployKeyFormat, ParsesOnlyItsOwnForm) {
  const std::string secret(64, 'a');
  auto p = ParseDeployKey("lathe_dk_k0123456789_" + secret);
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->id, "k0123456789");
  EXPECT_EQ(FormatDeployKey(*p), "lathe_dk_k0123456789_" + secret);
  EXPECT_FALSE(ParseDeployKey("lathe_dk_k0123456789_" + std::string(63, 'a')));
  EXPECT_FALSE(ParseDeployKey("lathe_dk_k0123456789_" + std::string(64, 'A')));  // lower-case only
  EXPECT_FALSE(ParseDeployKey("lathe_dk_x0123456789_" + secret));
  EXPECT_FALSE(ParseDeployKey("lathe_dk_k012345678i_" + secret));  // 'i' is not base32 here
  EXPECT_FALSE(ParseDeployKey("Bearer lathe_dk_k0123456789_" + secret));
}

TEST(DeployKeyFormat, TheStoredHashIsSha256OfTheSecretsCharacters) {
  // SHA-256("abc"), FIPS 180-2's first example.
  EXPECT_EQ(HashDeployKeySecret("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  const std::string secret(64, 'e');
  const std::string hash = HashDeployKeySecret(secret);
  EXPECT_TRUE(DeployKeySecretMatches(secret, hash));
  EXPECT_FALSE(DeployKeySecretMatches(std::string(64, 'f'), hash));
  EXPECT_FALSE(DeployKeySecretMatches(secret, hash.substr(1)));
  EXPECT_FALSE(DeployKeySecretMatches(secret, ""));
}

}  // namespace
}  // namespace lathe

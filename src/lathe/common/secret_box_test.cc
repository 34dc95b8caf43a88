#include "lathe/common/secret_box.h"

#include <gtest/gtest.h>

namespace lathe {
namespace {

TEST(SecretBox, SealsAndOpensWithTheSameKeyAndAssociatedData) {
  auto box = SecretBox::FromKey(NewSecretKey());
  ASSERT_TRUE(box.ok());
  auto sealed = box->Seal("hf_abcdef123456", "1000/HF_TOKEN");
  ASSERT_TRUE(sealed.ok());
  EXPECT_EQ(sealed->find("hf_abcdef123456"), std::string::npos);
  EXPECT_EQ(sealed->size(), kSecretNonceBytes + 15 + kSecretTagBytes);
  auto opened = box->Open(*sealed, "1000/HF_TOKEN");
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  EXPECT_EQ(*opened, "hf_abcdef123456");
}

TEST(SecretBox, TwoSealsOfOneValueDiffer) {
  auto box = SecretBox::FromKey(NewSecretKey());
  ASSERT_TRUE(box.ok());
  EXPECT_NE(*box->Seal("same", "a"), *box->Seal("same", "a"));
}

TEST(SecretBox, RefusesAnotherKeyOtherDataAndAChangedByte) {
  auto box = SecretBox::FromKey(NewSecretKey());
  auto other = SecretBox::FromKey(NewSecretKey());
  ASSERT_TRUE(box.ok() && other.ok());
  std::string sealed = *box->Seal("value", "1000/A");
  EXPECT_FALSE(other->Open(sealed, "1000/A").ok());
  EXPECT_FALSE(box->Open(sealed, "1001/A").ok());
  std::string changed = sealed;
  changed[kSecretNonceBytes] ^= 1;
  EXPECT_FALSE(box->Open(changed, "1000/A").ok());
  EXPECT_FALSE(box->Open(sealed.substr(0, 10), "1000/A").ok());
}

TEST(SecretBox, NeedsA256BitKey) {
  EXPECT_FALSE(SecretBox::FromKey("short").ok());
  EXPECT_TRUE(SecretBox::FromKey(std::string(kSecretKeyBytes, 'k')).ok());
}

}  // namespace
}  // namespace lathe

#include "lathe/run/secret_mask.h"

#include <gtest/gtest.h>

namespace lathe::run {
namespace {

TEST(SecretMask, HidesEveryOccurrence) {
  SecretMask m({"hf_secret123"});
  EXPECT_EQ(m.Apply("token=hf_secret123 again hf_secret123\n"), "token=*** again ***\n");
  EXPECT_EQ(m.Apply("nothing here"), "nothing here");
}

TEST(SecretMask, LongerValuesFirstAndShortOnesLeft) {
  SecretMask m({"abcd", "abcdefgh", "xyz"});
  EXPECT_EQ(m.Apply("abcdefgh abcd xyz"), "*** *** xyz");
  EXPECT_TRUE(SecretMask({"abc", ""}).empty());
}

TEST(SecretMask, HidesAMultiLineValueLineByLine) {
  SecretMask m({"-----BEGIN KEY-----\nMIIEvQIBADANBg\nab\n"});
  EXPECT_EQ(m.Apply("-----BEGIN KEY-----\nMIIEvQIBADANBg\nab\n"), "***\n***\nab\n");
}

TEST(SecretMask, AValueThatContainsTheMaskDoesNotLoop) {
  SecretMask m({"a***"});
  EXPECT_EQ(m.Apply("a***a***"), "******");
}

}  // namespace
}  // namespace lathe::run

#include "lathe/common/owned_name.h"

#include <gtest/gtest.h>

namespace lathe {
namespace {

TEST(OwnedName, SplitsQualifiedAndBareKeys) {
  EXPECT_EQ(ShortName("alice/digits"), "digits");
  EXPECT_EQ(ShortName("digits"), "digits");
  EXPECT_EQ(NamespaceOf("alice/digits"), "alice");
  EXPECT_EQ(NamespaceOf("digits"), "");
  EXPECT_EQ(OwnedKey("bob", "digits"), "bob/digits");
}

TEST(OwnedName, ValidatesEachPart) {
  EXPECT_TRUE(IsValidOwnedName("digits"));
  EXPECT_TRUE(IsValidOwnedName("alice/digits"));
  EXPECT_FALSE(IsValidOwnedName("alice/"));
  EXPECT_FALSE(IsValidOwnedName("/digits"));
  EXPECT_FALSE(IsValidOwnedName("a/b/c"));
  EXPECT_FALSE(IsValidOwnedName(""));
  EXPECT_FALSE(IsValidOwnedName("alice/-x"));
}

TEST(OwnedName, FileSafeNamesNeverCollide) {
  EXPECT_EQ(FileSafeName("alice/digits"), "alice~digits");
  EXPECT_EQ(FileSafeName("digits"), "digits");
  EXPECT_NE(FileSafeName("a/b"), FileSafeName("a_b"));
}

// Keys as the stores hold them: "owner/name", or an older bare "name" whose
// owner is given beside it.
struct Obj {
  std::string key, owner;
  bool visible = false;
};

NameChoice<Obj> Choose(std::string_view name, std::string_view user, std::vector<Obj> all) {
  return ChooseByName(
      std::move(all), name, user, [](const Obj& o) { return o.key; },
      [](const Obj& o) { return o.owner; }, [](const Obj& o) { return o.visible; });
}

TEST(OwnedName, ABareNameIsYoursFirstThenTheOnlyOneYouSee) {
  std::vector<Obj> all = {
      {"digits", "alice", true}, {"bob/digits", "bob", true}, {"carol/digits", "carol", false}};
  EXPECT_EQ(Choose("digits", "bob", all).found->key, "bob/digits");
  EXPECT_EQ(Choose("digits", "alice", all).found->key, "digits");  // an older bare key
  auto two = Choose("digits", "dave", all);
  EXPECT_FALSE(two.found);
  EXPECT_EQ(two.several.size(), 2u);  // carol's is not seen
  all[1].visible = false;
  EXPECT_EQ(Choose("digits", "dave", all).found->key, "digits");
  EXPECT_FALSE(Choose("other", "dave", all).found);
}

TEST(OwnedName, AnOwnerNamesThatOwnersWhateverIsSeen) {
  std::vector<Obj> all = {{"digits", "alice", false}, {"bob/digits", "bob", false}};
  EXPECT_EQ(Choose("alice/digits", "dave", all).found->key, "digits");
  EXPECT_EQ(Choose("bob/digits", "dave", all).found->key, "bob/digits");
  EXPECT_FALSE(Choose("carol/digits", "dave", all).found);
  EXPECT_TRUE(Choose("carol/digits", "dave", all).several.empty());
}

}  // namespace
}  // namespace lathe

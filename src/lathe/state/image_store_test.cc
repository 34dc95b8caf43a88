#include "lathe/state/image_store.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>

namespace lathe::state {
namespace {

const std::string kA(64, 'a'), kB(64, 'b');

class ImageStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/lathe-images-XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    auto s = ImageStore::Open(dir_ + "/lathe.db");
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    store_ = std::move(s).value();
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string dir_;
  std::unique_ptr<ImageStore> store_;
};

TEST_F(ImageStoreTest, NamesArePerUserAndGrantTheirIds) {
  ASSERT_TRUE(store_->Put({1000, "pytorch:latest", kA, "import a.tar", 0}, 10).ok());
  ASSERT_TRUE(store_->Put({1001, "pytorch:latest", kB, "import b.tar", 0}, 11).ok());
  auto mine = store_->Find(1000, "pytorch:latest");
  ASSERT_TRUE(mine.ok() && mine->has_value());
  EXPECT_EQ((*mine)->id, kA);
  auto theirs = store_->Find(1001, "pytorch:latest");
  ASSERT_TRUE(theirs.ok() && theirs->has_value());
  EXPECT_EQ((*theirs)->id, kB);
  EXPECT_TRUE(*store_->HasGrant(1000, kA));
  EXPECT_FALSE(*store_->HasGrant(1000, kB));
  EXPECT_FALSE(*store_->HasGrant(1001, kA));
  EXPECT_FALSE(store_->Find(1002, "pytorch:latest")->has_value());
}

TEST_F(ImageStoreTest, AMovedNameKeepsTheOldGrant) {
  ASSERT_TRUE(store_->Put({1000, "bb:1", kA, "pull r/bb:1", 0}, 10).ok());
  auto before = store_->Put({1000, "bb:1", kB, "pull r/bb:1", 0}, 20);
  ASSERT_TRUE(before.ok());
  EXPECT_EQ(before->value_or(""), kA);
  EXPECT_EQ((*store_->Find(1000, "bb:1"))->id, kB);
  EXPECT_TRUE(*store_->HasGrant(1000, kA));  // a run recorded with it runs it again
  EXPECT_TRUE(*store_->HasGrant(1000, kB));
  EXPECT_EQ(store_->List(1000)->size(), 1u);
}

TEST_F(ImageStoreTest, RemoveRevokeForgetAndUse) {
  ASSERT_TRUE(store_->Put({1000, "x:1", kA, "", 0}, 10).ok());
  ASSERT_TRUE(store_->Put({1000, "y:1", kA, "", 0}, 10).ok());
  ASSERT_TRUE(store_->Put({1001, "z:1", kA, "", 0}, 10).ok());
  EXPECT_EQ(*store_->NamesOf(1000, kA), (std::vector<std::string>{"x:1", "y:1"}));
  EXPECT_TRUE(*store_->RemoveName(1000, "x:1"));
  EXPECT_FALSE(*store_->RemoveName(1000, "x:1"));
  ASSERT_TRUE(store_->TouchGrant(1000, kA, 99).ok());
  auto grants = store_->Grants(1000);
  ASSERT_EQ(grants->size(), 1u);
  EXPECT_EQ((*grants)[0].last_used_at_ms, 99);
  auto all = store_->AllIds();
  ASSERT_EQ(all->size(), 1u);
  EXPECT_EQ((*all)[0].last_used_at_ms, 99);
  ASSERT_TRUE(store_->RevokeGrant(1000, kA).ok());
  EXPECT_FALSE(*store_->HasGrant(1000, kA));
  EXPECT_TRUE(*store_->HasGrant(1001, kA));
  ASSERT_TRUE(store_->Forget(kA).ok());
  EXPECT_TRUE(store_->AllIds()->empty());
  EXPECT_TRUE(store_->List(1001)->empty());
}

}  // namespace
}  // namespace lathe::state

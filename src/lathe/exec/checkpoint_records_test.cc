#include "lathe/exec/checkpoint_records.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>

#include "lathe/os/files.h"

namespace lathe::exec {
namespace {

class CheckpointRecordsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/lathe-ckpt-records-XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    path_ = dir_ + "/checkpoints.jsonl";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir_, path_;
};

TEST_F(CheckpointRecordsTest, NoFileIsNoRecord) {
  auto n = CountCheckpointRecords(path_);
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  EXPECT_EQ(*n, 0);
}

TEST_F(CheckpointRecordsTest, EachRecordIsOneLineAndCounts) {
  ASSERT_TRUE(AppendCheckpointRecord(path_, {1, 1000, {"ckpt_000050.pt"}}).ok());
  ASSERT_TRUE(AppendCheckpointRecord(path_, {2, 2000, {"a b/\"q\"\n.pt", "x"}}).ok());
  auto n = CountCheckpointRecords(path_);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 2);
  auto text = os::ReadFile(path_);
  ASSERT_TRUE(text.ok());
  const std::string first = text->substr(0, text->find('\n'));
  auto j = ParseJson(first);
  ASSERT_TRUE(j.ok());
  EXPECT_EQ((*j)["seq"], 1);
  EXPECT_EQ((*j)["paths"][0], "ckpt_000050.pt");
  EXPECT_EQ(os::FileMode(path_).value_or(0) & 0777, 0600u);
}

// A line cut short (the node died while writing it) is not a record.
TEST_F(CheckpointRecordsTest, AnUnfinishedLineDoesNotCount) {
  ASSERT_TRUE(AppendCheckpointRecord(path_, {1, 1000, {"a"}}).ok());
  ASSERT_TRUE(os::WriteFileAtomic(path_, *os::ReadFile(path_) + "{\"seq\": 2, \"at").ok());
  EXPECT_EQ(CountCheckpointRecords(path_).value_or(-1), 1);
}

TEST_F(CheckpointRecordsTest, ASymlinkIsNeitherFollowedForWritingNorCounted) {
  ASSERT_TRUE(os::WriteFileAtomic(dir_ + "/elsewhere", "x\ny\nz\n").ok());
  ASSERT_TRUE(os::MakeSymlink(dir_ + "/elsewhere", path_).ok());
  EXPECT_FALSE(AppendCheckpointRecord(path_, {1, 1000, {"a"}}).ok());
  EXPECT_FALSE(CountCheckpointRecords(path_).ok());
  EXPECT_EQ(*os::ReadFile(dir_ + "/elsewhere"), "x\ny\nz\n");
}

}  // namespace
}  // namespace lathe::exec

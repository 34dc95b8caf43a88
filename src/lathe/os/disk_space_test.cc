#include "lathe/os/disk_space.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "lathe/os/files.h"

namespace lathe::os {
namespace {

std::string TempDir() {
  std::string t = ::testing::TempDir() + "lathe-du-XXXXXX";
  return ::mkdtemp(t.data());
}

void WriteBytes(const std::string& path, size_t n) {
  ASSERT_TRUE(WriteFileAtomic(path, std::string(n, 'x')).ok()) << path;
}

TEST(TreeDiskBytes, CountsFilesBelowButNotWhatSymlinksPointTo) {
  const std::string dir = TempDir();
  const std::string other = TempDir();
  ASSERT_EQ(::mkdir((dir + "/sub").c_str(), 0700), 0);
  WriteBytes(dir + "/a", 1 << 20);
  WriteBytes(dir + "/sub/b", 1 << 20);
  WriteBytes(other + "/big", 8 << 20);
  ASSERT_EQ(::symlink(other.c_str(), (dir + "/link").c_str()), 0);
  ASSERT_EQ(::symlink((other + "/big").c_str(), (dir + "/big").c_str()), 0);
  auto bytes = TreeDiskBytes(dir);
  ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
  EXPECT_GE(*bytes, 2u << 20);
  EXPECT_LT(*bytes, 4u << 20);  // the 8 MiB behind the links are not counted
  (void)RemoveAll(dir);
  (void)RemoveAll(other);
}

TEST(TreeDiskBytes, ASparseFileCountsWhatItHolds) {
  const std::string dir = TempDir();
  const std::string f = dir + "/sparse";
  int fd = ::open(f.c_str(), O_CREAT | O_WRONLY, 0600);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::ftruncate(fd, 1LL << 30), 0);  // 1 GiB long, nothing written
  ASSERT_EQ(::pwrite(fd, "x", 1, 0), 1);
  ::close(fd);
  auto bytes = TreeDiskBytes(dir);
  ASSERT_TRUE(bytes.ok());
  EXPECT_LT(*bytes, 1u << 20);
  (void)RemoveAll(dir);
}

TEST(TreeDiskBytes, MissingIsNotFound) {
  auto bytes = TreeDiskBytes(::testing::TempDir() + "lathe-du-missing-" + std::to_string(getpid()));
  ASSERT_FALSE(bytes.ok());
  EXPECT_TRUE(bytes.status().IsNotFound());
}

}  // namespace
}  // namespace lathe::os

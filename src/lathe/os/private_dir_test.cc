#include "lathe/os/private_dir.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <ctime>

#include "lathe/os/files.h"

namespace lathe::os {
namespace {

class PrivateDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/lathe-private-XXXXXX";
    base_ = ::mkdtemp(tmpl);
  }
  void TearDown() override { (void)RemoveAll(base_); }

  static unsigned ModeOf(const std::string& path) {
    struct stat st;
    EXPECT_EQ(::lstat(path.c_str(), &st), 0) << path;
    return st.st_mode & 07777;
  }

  std::string base_;
};

TEST_F(PrivateDirTest, MakesTheDirectoryAndItsParentsPrivate) {
  const std::string dir = base_ + "/a/b";
  auto fd = OpenPrivateDir(dir);
  ASSERT_TRUE(fd.ok()) << fd.status().ToString();
  EXPECT_EQ(ModeOf(base_ + "/a"), 0700u);
  EXPECT_EQ(ModeOf(dir), 0700u);
  // A looser mode of the user's own directory is tightened.
  ASSERT_EQ(::chmod(dir.c_str(), 0755), 0);
  ASSERT_TRUE(OpenPrivateDir(dir).ok());
  EXPECT_EQ(ModeOf(dir), 0700u);
}

TEST_F(PrivateDirTest, RefusesASymlinkOrAFileInItsPlace) {
  ASSERT_EQ(::mkdir((base_ + "/real").c_str(), 0700), 0);
  ASSERT_EQ(::symlink((base_ + "/real").c_str(), (base_ + "/link").c_str()), 0);
  auto linked = OpenPrivateDir(base_ + "/link");
  EXPECT_TRUE(linked.status().IsPermissionDenied()) << linked.status().ToString();
  ASSERT_TRUE(WriteFileAtomic(base_ + "/file", "x", 0600).ok());
  EXPECT_FALSE(OpenPrivateDir(base_ + "/file").ok());
}

TEST_F(PrivateDirTest, RefusesAnotherUsersDirectory) {
  EXPECT_TRUE(IsOwnDirectory(base_));
  EXPECT_FALSE(IsOwnDirectory(base_ + "/missing"));
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to give a directory away";
  const std::string dir = base_ + "/theirs";
  ASSERT_EQ(::mkdir(dir.c_str(), 0700), 0);
  ASSERT_EQ(::chown(dir.c_str(), 65534, 65534), 0);
  EXPECT_FALSE(IsOwnDirectory(dir));
  auto fd = OpenPrivateDir(dir);
  EXPECT_TRUE(fd.status().IsPermissionDenied()) << fd.status().ToString();
  EXPECT_EQ(ModeOf(dir), 0700u);
}

TEST_F(PrivateDirTest, WritesNewFilesOnlyWithMode0600) {
  auto fd = OpenPrivateDir(base_ + "/d");
  ASSERT_TRUE(fd.ok());
  const mode_t old = ::umask(0);
  Status st = WriteNewFileAt(fd->get(), base_ + "/d", "page.html", "<p>hi</p>");
  ::umask(old);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(ModeOf(base_ + "/d/page.html"), 0600u);
  EXPECT_EQ(*ReadFile(base_ + "/d/page.html"), "<p>hi</p>");
  // Never over an existing entry, nor through a planted symlink.
  EXPECT_EQ(WriteNewFileAt(fd->get(), base_ + "/d", "page.html", "x").code(), Code::kAlreadyExists);
  ASSERT_EQ(::symlink((base_ + "/target").c_str(), (base_ + "/d/planted").c_str()), 0);
  EXPECT_FALSE(WriteNewFileAt(fd->get(), base_ + "/d", "planted", "x").ok());
  EXPECT_FALSE(Exists(base_ + "/target"));
  EXPECT_FALSE(WriteNewFileAt(fd->get(), base_ + "/d", "../escape", "x").ok());
}

TEST_F(PrivateDirTest, RemovesOnlyOldFilesWithThePrefix) {
  const std::string dir = base_ + "/d";
  auto fd = OpenPrivateDir(dir);
  ASSERT_TRUE(fd.ok());
  for (const char* name : {"page-old.html", "page-new.html", "other-old"}) {
    ASSERT_TRUE(WriteNewFileAt(fd->get(), dir, name, "x").ok());
  }
  const struct timespec old_times[2] = {{1000, 0}, {1000, 0}};  // 1970
  ASSERT_EQ(::utimensat(fd->get(), "page-old.html", old_times, 0), 0);
  ASSERT_EQ(::utimensat(fd->get(), "other-old", old_times, 0), 0);
  ASSERT_EQ(::symlink("/etc/passwd", (dir + "/page-link").c_str()), 0);
  auto removed =
      RemoveOldFilesAt(fd->get(), dir, "page-", int64_t{::time(nullptr)} * 1000 - 60'000);
  ASSERT_TRUE(removed.ok()) << removed.status().ToString();
  EXPECT_EQ(*removed, 1);
  EXPECT_FALSE(Exists(dir + "/page-old.html"));
  EXPECT_TRUE(Exists(dir + "/page-new.html"));
  EXPECT_TRUE(Exists(dir + "/other-old"));
  EXPECT_TRUE(Exists("/etc/passwd"));
}

}  // namespace
}  // namespace lathe::os

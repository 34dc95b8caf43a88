#include "lathe/daemon/secret_files.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "lathe/os/files.h"

namespace lathe::daemon {
namespace {

class SecretFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/lathe-secret-files-XXXXXX";
    run_dir_ = ::mkdtemp(tmpl);
    ::chmod(run_dir_.c_str(), 0711);  // as the daemon's run directories are
    root_ = ::geteuid() == 0;
    uid_ = root_ ? 65534 : ::geteuid();
    gid_ = root_ ? 65534 : ::getegid();
  }
  void TearDown() override { std::filesystem::remove_all(run_dir_); }

  std::string run_dir_;
  bool root_ = false;
  uid_t uid_ = 0;
  gid_t gid_ = 0;
};

TEST_F(SecretFilesTest, WrittenForTheUserAndRemovedWithWhatTheRunLeft) {
  const std::string dir = SecretFilesDir(run_dir_, 3);
  EXPECT_EQ(dir, run_dir_ + "/secrets-3");
  ASSERT_TRUE(WriteSecretFiles(dir, {{"HF_TOKEN", "v1"}}, uid_, gid_).ok());
  struct stat st;
  ASSERT_EQ(::stat((dir + "/HF_TOKEN").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  EXPECT_EQ(st.st_uid, uid_);
  EXPECT_EQ(*os::ReadFile(dir + "/HF_TOKEN"), "v1");

  // What the run may leave: a link to a file it must not touch, a
  // subdirectory, and no permissions of its own on the directory.
  const std::string outside = run_dir_ + "/keep-me";
  { std::ofstream(outside) << "x"; }
  ASSERT_EQ(::symlink(outside.c_str(), (dir + "/link").c_str()), 0);
  ASSERT_EQ(::mkdir((dir + "/sub").c_str(), 0700), 0);
  ASSERT_EQ(::chown((dir + "/sub").c_str(), uid_, gid_), 0);
  ASSERT_EQ(::chmod(dir.c_str(), 0), 0);

  Status removed = RemoveSecretFiles(dir, uid_, gid_);
  ASSERT_TRUE(removed.ok()) << removed.ToString();
  EXPECT_FALSE(os::Exists(dir));
  EXPECT_EQ(*os::ReadFile(outside), "x");
  EXPECT_TRUE(RemoveSecretFiles(dir, uid_, gid_).ok());  // gone is fine
}

TEST_F(SecretFilesTest, ALeftoverOfTheSamePathIsReplaced) {
  const std::string dir = SecretFilesDir(run_dir_, 1);
  ASSERT_TRUE(WriteSecretFiles(dir, {{"A", "old"}, {"B", "b"}}, uid_, gid_).ok());
  ASSERT_TRUE(WriteSecretFiles(dir, {{"A", "new"}}, uid_, gid_).ok());
  EXPECT_EQ(*os::ReadFile(dir + "/A"), "new");
  EXPECT_FALSE(os::Exists(dir + "/B"));
}

// Contents are removed as the run's user: a root daemon does not remove,
// through a directory the user made, what only root could have.
TEST_F(SecretFilesTest, ContentsAreRemovedWithTheUsersIdentity) {
  if (!root_) GTEST_SKIP() << "needs root to act as another user";
  const std::string dir = SecretFilesDir(run_dir_, 2);
  ASSERT_TRUE(WriteSecretFiles(dir, {{"A", "v"}}, uid_, gid_).ok());
  // A root-owned directory inside (as if it were another run's, bind-mounted
  // or planted): the user may not empty it, so neither does the daemon.
  const std::string roots = dir + "/roots";
  ASSERT_EQ(::mkdir(roots.c_str(), 0755), 0);
  { std::ofstream(roots + "/f") << "root's"; }
  EXPECT_FALSE(RemoveSecretFiles(dir, uid_, gid_).ok());
  EXPECT_TRUE(os::Exists(roots + "/f"));
}

}  // namespace
}  // namespace lathe::daemon

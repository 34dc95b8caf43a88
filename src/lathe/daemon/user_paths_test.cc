#include "lathe/daemon/user_paths.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

namespace lathe::daemon {
namespace {

TEST(UserPaths, PathWithinComparesWholeComponents) {
  EXPECT_TRUE(PathWithin("/var/lib/lathe", "/var/lib/lathe"));
  EXPECT_TRUE(PathWithin("/var/lib/lathe/store", "/var/lib/lathe"));
  EXPECT_FALSE(PathWithin("/var/lib/lathe2", "/var/lib/lathe"));
  EXPECT_FALSE(PathWithin("/var/lib", "/var/lib/lathe"));
  EXPECT_TRUE(PathWithin("/anything", "/"));
}

class ReservedPathsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/lathe-paths-XXXXXX";
    base_ = ::mkdtemp(tmpl);
    ::chmod(base_.c_str(), 0755);
    home_ = PathsFor(base_ + "/home", false);
    ASSERT_TRUE(SecureHome(home_).ok());
  }
  void TearDown() override { std::filesystem::remove_all(base_); }
  std::string base_;
  HomePaths home_;
};

TEST_F(ReservedPathsTest, TheDaemonsOwnDirectoriesAreRefusedWhateverTheSpelling) {
  ReservedPaths r(home_);
  std::filesystem::create_directory_symlink(home_.home, base_ + "/link");
  for (const std::string& p :
       {home_.home, home_.store, home_.home + "/runs/x", home_.home + "/./store/", base_ + "/link",
        base_ + "/link/new", base_ + "/other/../home"}) {
    Status st = r.Check("checkpoints.dir", p, PathUse::kCheckpointDir, {});
    EXPECT_EQ(st.msg_id(), "path.reserved") << p << ": " << st.ToString();
    EXPECT_NE(st.message().find(p), std::string::npos)
        << "the error names the path: " << st.message();
  }
  // A directory above the home would be read whole or replaced: refused too,
  // except as a working directory, which is only entered.
  for (const std::string& p : {base_, std::string("/")}) {
    EXPECT_EQ(r.Check("checkpoints.dir", p, PathUse::kCheckpointDir, {}).msg_id(),
              "path.contains_reserved")
        << p;
    EXPECT_EQ(r.Check("to", p, PathUse::kRestoreTarget, {}).msg_id(), "path.contains_reserved")
        << p;
    EXPECT_TRUE(r.Check("workdir", p, PathUse::kWorkdir, {}).ok()) << p;
  }
  EXPECT_TRUE(r.Check("checkpoints.dir", base_ + "/ckpt", PathUse::kCheckpointDir, {}).ok());
  EXPECT_TRUE(r.Check("checkpoints.dir", base_ + "/homework", PathUse::kCheckpointDir, {}).ok());
}

TEST_F(ReservedPathsTest, BadPathsAreInvalidArguments) {
  ReservedPaths r(home_);
  EXPECT_EQ(r.Check("to", "relative/dir", PathUse::kRestoreTarget, {}).msg_id(),
            "path.not_absolute");
  EXPECT_EQ(r.Check("to", std::string("/tmp/a\0b", 8), PathUse::kRestoreTarget, {}).msg_id(),
            "input.nul_byte");
  EXPECT_EQ(r.Check("to", "/" + std::string(5000, 'a'), PathUse::kRestoreTarget, {}).msg_id(),
            "path.too_long");
  EXPECT_EQ(r.Check("to", "/tmp/" + std::string(300, 'a'), PathUse::kRestoreTarget, {}).msg_id(),
            "path.name_too_long");
  EXPECT_EQ(r.Check("workdir", base_ + "/home/missing", PathUse::kWorkdir, {}).msg_id(),
            "path.reserved");
  EXPECT_TRUE(
      r.Check("workdir", base_ + "/missing", PathUse::kWorkdir, {}).ok());  // may be made later
}

// Needs root (to take another identity) and the `nobody` user.
TEST_F(ReservedPathsTest, AccessIsJudgedWithTheUsersIdentity) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root";
  auto nobody = os::LookupUserByName("nobody");
  if (!nobody.ok()) GTEST_SKIP() << "no user nobody";
  ReservedPaths r(home_);
  os::AccessAs as = os::AccessAsUser(os::IdentityOf(nobody->uid, nobody->gid));
  std::string root_only = base_ + "/root-only";  // root's 0700 directory
  ASSERT_EQ(::mkdir(root_only.c_str(), 0700), 0);
  std::string theirs = base_ + "/theirs";
  ASSERT_EQ(::mkdir(theirs.c_str(), 0755), 0);
  ASSERT_EQ(::chown(theirs.c_str(), nobody->uid, nobody->gid), 0);

  // Absent under a directory root owns: they could not have made it.
  Status st = r.Check("checkpoints.dir", base_ + "/new", PathUse::kCheckpointDir, as);
  EXPECT_EQ(st.msg_id(), "path.cannot_create") << st.ToString();
  EXPECT_FALSE(std::filesystem::exists(base_ + "/new"));
  // Root's 0700 directory, as it is or below it.
  EXPECT_EQ(r.Check("checkpoints.dir", root_only, PathUse::kCheckpointDir, as).msg_id(),
            "path.cannot_use");
  EXPECT_EQ(r.Check("checkpoints.dir", root_only + "/x", PathUse::kCheckpointDir, as).msg_id(),
            "path.cannot_reach");
  EXPECT_EQ(r.Check("workdir", root_only, PathUse::kWorkdir, as).msg_id(), "path.cannot_enter");
  // A symlink in their own tree into root's directory does not help.
  std::filesystem::create_directory_symlink(root_only, theirs + "/link");
  EXPECT_FALSE(r.Check("checkpoints.dir", theirs + "/link", PathUse::kCheckpointDir, as).ok());
  // Their own directory, existing or to be made in it.
  EXPECT_TRUE(r.Check("checkpoints.dir", theirs, PathUse::kCheckpointDir, as).ok());
  EXPECT_TRUE(r.Check("checkpoints.dir", theirs + "/a/b", PathUse::kCheckpointDir, as).ok());
  // Root itself may use root's directory.
  EXPECT_TRUE(r.Check("checkpoints.dir", root_only, PathUse::kCheckpointDir, {}).ok());

  // A source to read only has to be readable: their own read-only directory
  // is fine; a missing one is not there (not "may not create").
  std::string readonly = theirs + "/ro";
  ASSERT_EQ(::mkdir(readonly.c_str(), 0555), 0);
  ASSERT_EQ(::chown(readonly.c_str(), nobody->uid, nobody->gid), 0);
  EXPECT_EQ(r.Check("from_dir", readonly, PathUse::kCheckpointDir, as).msg_id(), "path.cannot_use");
  EXPECT_TRUE(r.Check("from_dir", readonly, PathUse::kReadSource, as).ok());
  Status missing = r.Check("from_dir", theirs + "/missing", PathUse::kReadSource, as);
  EXPECT_EQ(missing.msg_id(), "path.not_found") << missing.ToString();
  EXPECT_EQ(missing.code(), Code::kNotFound);
  EXPECT_EQ(r.Check("from_dir", "/nonexistent-lathe-dir", PathUse::kReadSource, as).msg_id(),
            "path.not_found");
  EXPECT_EQ(r.Check("from_dir", root_only, PathUse::kReadSource, as).msg_id(), "path.cannot_read");
  EXPECT_EQ(r.Check("from_dir", home_.home, PathUse::kReadSource, {}).msg_id(), "path.reserved");
}

}  // namespace
}  // namespace lathe::daemon

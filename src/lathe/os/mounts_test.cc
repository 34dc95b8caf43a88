#include "lathe/os/mounts.h"

#include <fcntl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>

#include <gtest/gtest.h>

namespace lathe::os {
namespace {

constexpr uid_t kNobody = 65534;
constexpr gid_t kNogroup = 65534;

int WaitExit(pid_t pid) {
  int ws = 0;
  if (::waitpid(pid, &ws, 0) != pid) return -1;
  return WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
}

FsIdentity Nobody() { return FsIdentity{kNobody, kNogroup, {kNogroup}, "nobody"}; }

class MountsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root";
    char tmpl[] = "/tmp/lathe-mounts-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    ASSERT_EQ(::chmod(root_.c_str(), 0755), 0);
  }
  void TearDown() override {
    if (!root_.empty()) std::filesystem::remove_all(root_);
  }
  std::string Dir(const std::string& name, uid_t owner) {
    std::string d = root_ + "/" + name;
    EXPECT_EQ(::mkdir(d.c_str(), 0755), 0);
    EXPECT_EQ(::chown(d.c_str(), owner, owner == 0 ? 0 : kNogroup), 0);
    return d;
  }
  std::string root_;
};

TEST_F(MountsTest, OpensADirectoryOfTheUsersOwn) {
  std::string d = Dir("mine", kNobody);
  auto fd = OpenOwnedDirAs(d, Nobody());
  ASSERT_TRUE(fd.ok()) << fd.status().ToString();
}

TEST_F(MountsTest, RefusesADirectoryOfAnotherOwner) {
  std::string d = Dir("roots", 0);
  auto fd = OpenOwnedDirAs(d, Nobody());
  ASSERT_FALSE(fd.ok());
  EXPECT_EQ(fd.status().code(), Code::kPermissionDenied);
  EXPECT_NE(fd.status().message().find(d), std::string::npos);
}

TEST_F(MountsTest, NeverFollowsASymlinkAtTheEnd) {
  Dir("mine", kNobody);
  std::string link = root_ + "/link";
  ASSERT_EQ(::symlink((root_ + "/mine").c_str(), link.c_str()), 0);
  EXPECT_FALSE(OpenOwnedDirAs(link, Nobody()).ok());
}

TEST_F(MountsTest, ResolvesAsTheUser) {
  // A directory of nobody's behind one that nobody may not enter.
  std::string closed = Dir("closed", 0);
  ASSERT_EQ(::chmod(closed.c_str(), 0700), 0);
  std::string inner = closed + "/inner";
  ASSERT_EQ(::mkdir(inner.c_str(), 0755), 0);
  ASSERT_EQ(::chown(inner.c_str(), kNobody, kNogroup), 0);
  auto fd = OpenOwnedDirAs(inner, Nobody());
  ASSERT_FALSE(fd.ok());
  EXPECT_EQ(fd.status().code(), Code::kPermissionDenied);
}

TEST_F(MountsTest, BindsTheOpenDirectoryReadOnlyInItsNamespace) {
  std::string d = Dir("ws", kNobody);
  pid_t pid = ::fork();
  if (pid == 0) {
    if (::unshare(CLONE_NEWNS) != 0) _exit(10);
    if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) _exit(11);
    auto fd = OpenOwnedDirAs(d, Nobody());
    if (!fd.ok()) _exit(12);
    if (!BindReadOnlyOnItself(fd->get(), d).ok()) _exit(13);
    int f = ::open((d + "/x").c_str(), O_WRONLY | O_CREAT, 0644);
    _exit(f < 0 && errno == EROFS ? 0 : 14);
  }
  EXPECT_EQ(WaitExit(pid), 0);
  // Outside the child's namespace the directory is writable as before.
  int f = ::open((d + "/y").c_str(), O_WRONLY | O_CREAT, 0644);
  EXPECT_GE(f, 0);
  if (f >= 0) ::close(f);
}

TEST(NoNewPrivs, IsSetForTheProcessAndItsChildren) {
  pid_t pid = ::fork();
  if (pid == 0) {
    if (!ForbidNewPrivileges().ok()) _exit(1);
    _exit(::prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) == 1 ? 0 : 2);
  }
  EXPECT_EQ(WaitExit(pid), 0);
}

}  // namespace
}  // namespace lathe::os

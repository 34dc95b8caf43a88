#include "lathe/os/users.h"

#include <fcntl.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <thread>

namespace lathe::os {
namespace {

// Needs root (to take another identity) and the `nobody` user.
TEST(Users, RunAsUserWritesWithTheUsersPermissionsOnItsThreadOnly) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root";
  auto nobody = LookupUserByName("nobody");
  if (!nobody.ok()) GTEST_SKIP() << "no user nobody";
  char tmpl[] = "/tmp/lathe-users-XXXXXX";
  std::string root_dir = ::mkdtemp(tmpl);  // root's, 0700
  ASSERT_EQ(::chmod(root_dir.c_str(), 0755), 0);
  std::string theirs = root_dir + "/theirs";
  ASSERT_EQ(::mkdir(theirs.c_str(), 0755), 0);
  ASSERT_EQ(::chown(theirs.c_str(), nobody->uid, nobody->gid), 0);
  std::filesystem::create_directory_symlink(root_dir, theirs + "/link");  // into root's directory

  Status st = RunAsUser(*nobody, [&]() -> Status {
    // Their own directory: created, and theirs.
    int fd = ::open((theirs + "/mine").c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) return Status::Internal("cannot create in their own directory");
    ::close(fd);
    // Root's directory, directly or through a symlink in their tree: refused.
    for (const std::string& p : {root_dir + "/x", theirs + "/link/y"}) {
      fd = ::open(p.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
      if (fd >= 0 || errno != EACCES) return Status::Internal("created " + p);
    }
    return Status::OK();
  });
  EXPECT_TRUE(st.ok()) << st.ToString();
  struct stat s;
  ASSERT_EQ(::stat((theirs + "/mine").c_str(), &s), 0);
  EXPECT_EQ(s.st_uid, nobody->uid);
  EXPECT_EQ(s.st_gid, nobody->gid);
  EXPECT_FALSE(std::filesystem::exists(root_dir + "/x"));
  // This thread is still root: it may write anywhere.
  int fd = ::open((root_dir + "/x").c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  EXPECT_GE(fd, 0);
  if (fd >= 0) ::close(fd);
  // A failure inside comes back.
  EXPECT_EQ(RunAsUser(*nobody, [] { return Status::NotFound("x"); }).code(), Code::kNotFound);
  std::filesystem::remove_all(root_dir);
}

TEST(Users, AsUserActsWithTheUsersIdentityThenGivesTheThreadItsOwnBack) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root";
  auto nobody = LookupUserByName("nobody");
  if (!nobody.ok()) GTEST_SKIP() << "no user nobody";
  char tmpl[] = "/tmp/lathe-asuser-XXXXXX";
  std::string root_dir = ::mkdtemp(tmpl);  // root's, 0700
  std::string secret = root_dir + "/secret";
  int fd = ::open(secret.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
  ASSERT_GE(fd, 0);
  ::close(fd);
  FsIdentity id = IdentityOf(nobody->uid, nobody->gid);
  EXPECT_EQ(id.name, "nobody");
  for (int i = 0; i < 3; ++i) {  // back and forth, on one thread
    Status st = AsUser(id, [&]() -> Status {
      int f = ::open(secret.c_str(), O_RDONLY | O_CLOEXEC);
      if (f >= 0 || errno != EACCES) return Status::Internal("read root's file");
      // A thread started here keeps the identity.
      bool child_refused = false;
      std::thread([&] {
        int g = ::open(secret.c_str(), O_RDONLY | O_CLOEXEC);
        child_refused = g < 0 && errno == EACCES;
        if (g >= 0) ::close(g);
      }).join();
      return child_refused ? Status::OK()
                           : Status::Internal("a thread started inside read root's file");
    });
    EXPECT_TRUE(st.ok()) << st.ToString();
    int f = ::open(secret.c_str(), O_RDONLY | O_CLOEXEC);  // root again
    EXPECT_GE(f, 0);
    if (f >= 0) ::close(f);
  }
  EXPECT_EQ(AsUser(id, [] { return Status::NotFound("x"); }).code(), Code::kNotFound);
  // The access functor form does the same; empty means "as the process".
  AccessAs as = AccessAsUser(id);
  EXPECT_FALSE(WithAccess(as, [&] {
                 int f = ::open(secret.c_str(), O_RDONLY | O_CLOEXEC);
                 if (f >= 0) ::close(f);
                 return f >= 0 ? Status::OK() : ErrnoStatus(secret, errno);
               }).ok());
  EXPECT_TRUE(WithAccess({}, [&] {
                int f = ::open(secret.c_str(), O_RDONLY | O_CLOEXEC);
                if (f >= 0) ::close(f);
                return f >= 0 ? Status::OK() : ErrnoStatus(secret, errno);
              }).ok());
  std::filesystem::remove_all(root_dir);
}

// In a child process: what it may do after dropping to nobody.
TEST(Users, DropPrivilegesChangesEveryThreadForGood) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root";
  auto nobody = LookupUserByName("nobody");
  if (!nobody.ok()) GTEST_SKIP() << "no user nobody";
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    std::atomic<bool> dropped{false};
    std::atomic<long> thread_uid{-1};
    std::thread t([&] {  // started before the drop: the raw syscall sees its own ids
      while (!dropped) std::this_thread::yield();
      thread_uid = ::syscall(SYS_geteuid);
    });
    if (!DropPrivileges(nobody->uid, nobody->gid).ok()) _exit(2);
    dropped = true;
    t.join();
    if (thread_uid != static_cast<long>(nobody->uid)) _exit(3);
    if (::getgroups(0, nullptr) != 0) _exit(4);
    if (::setuid(0) == 0 || ::seteuid(0) == 0) _exit(5);
    if (::open("/proc/1/environ", O_RDONLY) >= 0) _exit(6);  // root's file, 0400
    // Already that user: nothing to do, no error.
    if (!DropPrivileges(nobody->uid, nobody->gid).ok()) _exit(7);
    _exit(DropPrivileges(0, 0).ok() ? 8 : 0);
  }
  int ws = 0;
  ASSERT_EQ(::waitpid(pid, &ws, 0), pid);
  ASSERT_TRUE(WIFEXITED(ws));
  EXPECT_EQ(WEXITSTATUS(ws), 0);
}

}  // namespace
}  // namespace lathe::os

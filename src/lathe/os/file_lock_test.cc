#include "lathe/os/file_lock.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "lathe/os/files.h"

namespace lathe::os {
namespace {

std::string TempDir() {
  char tmpl[] = "/tmp/lathe-lock-XXXXXX";
  return ::mkdtemp(tmpl);
}

// The flags of this process's descriptor open on `path`, from
// /proc/self/fdinfo (octal); -1 when none is open on it.
long OpenFlagsOf(const std::string& path) {
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) {
    std::error_code ec;
    if (std::filesystem::read_symlink(e.path(), ec) != path) continue;
    auto info = ReadFile("/proc/self/fdinfo/" + e.path().filename().string());
    if (!info.ok()) continue;
    size_t at = info->find("flags:");
    if (at == std::string::npos) continue;
    return std::strtol(info->c_str() + at + 6, nullptr, 8);
  }
  return -1;
}

TEST(FileLock, TryAcquireExclusiveFailsWhileAnotherDescriptionHoldsIt) {
  std::string dir = TempDir();
  std::string p = dir + "/daemon.lock";
  auto first = FileLock::TryAcquire(p, FileLock::Mode::kExclusive, 0600);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  // The same process, its own open file description: refused at once.
  auto second = FileLock::TryAcquire(p, FileLock::Mode::kExclusive, 0600);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), Code::kAlreadyExists) << second.status().ToString();
  EXPECT_EQ(FileLock::TryAcquire(p, FileLock::Mode::kShared).status().code(), Code::kAlreadyExists);
  // Released with the object: the next one gets it.
  { FileLock gone = std::move(*first); }
  EXPECT_TRUE(FileLock::TryAcquire(p, FileLock::Mode::kExclusive, 0600).ok());
  (void)RemoveAll(dir);
}

TEST(FileLock, CreatesTheFileWithItsModeAndCloseOnExec) {
  std::string dir = TempDir();
  std::string p = dir + "/daemon.lock";
  auto lock = FileLock::TryAcquire(p, FileLock::Mode::kExclusive, 0600);
  ASSERT_TRUE(lock.ok());
  struct stat st;
  ASSERT_EQ(::stat(p.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  long flags = OpenFlagsOf(p);
  ASSERT_GE(flags, 0);
  EXPECT_NE(flags & O_CLOEXEC, 0) << std::oct << flags;
  (void)RemoveAll(dir);
}

TEST(FileLock, SharedLocksCoexistAndKeepAnExclusiveOneOut) {
  std::string dir = TempDir();
  std::string p = dir + "/lock";
  auto a = FileLock::Acquire(p, FileLock::Mode::kShared);
  auto b = FileLock::TryAcquire(p, FileLock::Mode::kShared);
  ASSERT_TRUE(a.ok());
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(FileLock::TryAcquire(p, FileLock::Mode::kExclusive).status().code(),
            Code::kAlreadyExists);
  (void)RemoveAll(dir);
}

TEST(FileLock, AnUnopenablePathKeepsItsErrno) {
  auto r = FileLock::TryAcquire("/nonexistent/lathe/lock", FileLock::Mode::kExclusive);
  EXPECT_TRUE(r.status().IsNotFound()) << r.status().ToString();
}

}  // namespace
}  // namespace lathe::os

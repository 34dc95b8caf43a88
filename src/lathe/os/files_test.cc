#include "lathe/os/files.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "lathe/os/fd.h"

namespace lathe::os {
namespace {

std::string TempDir() {
  char tmpl[] = "/tmp/lathe-files-XXXXXX";
  return ::mkdtemp(tmpl);
}

TEST(Files, AtomicWriteReplacesAndLeavesNoTemp) {
  std::string dir = TempDir();
  std::string p = dir + "/a.json";
  ASSERT_TRUE(WriteFileAtomic(p, "one", 0600).ok());
  ASSERT_TRUE(WriteFileAtomic(p, "two", 0600).ok());
  EXPECT_EQ(*ReadFile(p), "two");
  struct stat st;
  ASSERT_EQ(::stat(p.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  int entries = 0;
  for (auto& e : std::filesystem::directory_iterator(dir)) (void)e, ++entries;
  EXPECT_EQ(entries, 1);  // no temp file left behind
  (void)RemoveAll(dir);
}

TEST(Files, FailedWriteKeepsOldContent) {
  std::string dir = TempDir();
  std::string p = dir + "/a";
  ASSERT_TRUE(WriteFileAtomic(p, "old").ok());
  // A directory that does not exist: the write fails, the old file is intact.
  EXPECT_FALSE(WriteFileAtomic(dir + "/missing/a", "new").ok());
  EXPECT_EQ(*ReadFile(p), "old");
  (void)RemoveAll(dir);
}

TEST(Files, ReadMissingIsNotFound) {
  EXPECT_TRUE(ReadFile("/nonexistent/lathe/x").status().IsNotFound());
}

TEST(Files, FileModeIsThePermissionBits) {
  std::string dir = TempDir();
  std::string p = dir + "/a";
  ASSERT_TRUE(WriteFileAtomic(p, "x", 0600, Durability::kNoSync).ok());
  EXPECT_EQ(*FileMode(p), 0600u);
  ASSERT_EQ(::chmod(p.c_str(), 0644), 0);
  EXPECT_EQ(*FileMode(p), 0644u);
  EXPECT_TRUE(FileMode(dir + "/missing").status().IsNotFound());
  (void)RemoveAll(dir);
}

TEST(Files, StampsNameTheOwnerAndChownChangesIt) {
  char tmpl[] = "/tmp/lathe-files-owner-XXXXXX";
  std::string dir = ::mkdtemp(tmpl);
  const std::string f = dir + "/f";
  ASSERT_TRUE(WriteFileAtomic(f, "x", 0644).ok());
  auto st = StatFile(f);
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->uid, ::geteuid());
  EXPECT_EQ(st->gid, ::getegid());
  if (::geteuid() == 0) {
    ASSERT_TRUE(Chown(f, 4242, static_cast<gid_t>(-1)).ok());
    EXPECT_EQ(StatFile(f)->uid, 4242u);
    EXPECT_EQ(StatFile(f)->gid, ::getegid());  // -1 kept it
  }
  EXPECT_EQ(Chown(dir + "/missing", 0, 0).code(), Code::kNotFound);
  // The no-follow form changes a link, never what it points at.
  const std::string link = dir + "/link";
  ASSERT_EQ(::symlink(f.c_str(), link.c_str()), 0);
  const uint32_t before = StatFile(f)->uid;
  if (::geteuid() == 0) {
    ASSERT_TRUE(ChownNoFollow(link, 4343, static_cast<gid_t>(-1)).ok());
    EXPECT_EQ(LstatFile(link)->uid, 4343u);
    EXPECT_EQ(StatFile(f)->uid, before);
  }
  // fchmod through a descriptor.
  auto fd = Fd::Open(f, O_RDONLY);
  ASSERT_TRUE(fd.ok());
  ASSERT_TRUE(ChmodOpenFile(fd->get(), 0600, f).ok());
  EXPECT_EQ(*FileMode(f), 0600u);
  std::filesystem::remove_all(dir);
}

TEST(Files, AccessErrorSaysWhyTheEffectiveIdentityMayNot) {
  char tmpl[] = "/tmp/lathe-files-access-XXXXXX";
  std::string dir = ::mkdtemp(tmpl);
  EXPECT_EQ(AccessError(dir, R_OK | W_OK | X_OK), 0);
  EXPECT_EQ(AccessError(dir + "/missing", F_OK), ENOENT);
  const std::string f = dir + "/f";
  ASSERT_TRUE(WriteFileAtomic(f, "x", 0644).ok());
  EXPECT_EQ(AccessError(f, X_OK), EACCES);  // no execute bit for anyone, root included
  std::filesystem::remove_all(dir);
}

TEST(Files, ReadUpToStopsOneBytePastTheLimit) {
  auto zero = ReadFileUpTo("/dev/zero", 100000);  // endless
  ASSERT_TRUE(zero.ok()) << zero.status().ToString();
  EXPECT_EQ(zero->size(), 100001u);
  std::string p =
      std::filesystem::temp_directory_path() / ("lathe-upto-" + std::to_string(::getpid()));
  ASSERT_TRUE(WriteFileAtomic(p, "hello", 0644, Durability::kNoSync).ok());
  EXPECT_EQ(*ReadFileUpTo(p, 5), "hello");
  EXPECT_EQ(*ReadFileUpTo(p, 3), "hell");
  EXPECT_TRUE(ReadFileUpTo("/nonexistent/lathe/x", 10).status().IsNotFound());
  ::unlink(p.c_str());
}

TEST(Files, StatFileStampChangesWithTheFile) {
  std::string dir = TempDir();
  std::string path = dir + "/f";
  EXPECT_TRUE(StatFile(path).status().IsNotFound());
  ASSERT_TRUE(WriteFileAtomic(path, "one", 0644, Durability::kNoSync).ok());
  auto a = StatFile(path);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->size_bytes, 3u);
  EXPECT_GT(a->mtime_ns, 0);
  auto same = StatFile(path);
  ASSERT_TRUE(same.ok());
  EXPECT_EQ(*a, *same);
  // An atomic replace is a new inode even when size and mtime tick agree.
  ASSERT_TRUE(WriteFileAtomic(path, "two", 0644, Durability::kNoSync).ok());
  auto b = StatFile(path);
  ASSERT_TRUE(b.ok());
  EXPECT_NE(a->inode, b->inode);
  EXPECT_FALSE(*a == *b);
  (void)RemoveAll(dir);
}

uid_t OwnerOf(const std::string& p) {
  struct stat st;
  return ::lstat(p.c_str(), &st) == 0 ? st.st_uid : static_cast<uid_t>(-1);
}

TEST(Files, MakeDirsOwnedGivesOnlyNewDirectoriesAway) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to chown";
  std::string dir = TempDir();
  ASSERT_TRUE(MakeDirsOwned(dir + "/a/b", 0755, 65534, 65534).ok());
  EXPECT_EQ(OwnerOf(dir), 0u);  // existed before: untouched
  EXPECT_EQ(OwnerOf(dir + "/a"), 65534u);
  EXPECT_EQ(OwnerOf(dir + "/a/b"), 65534u);
  (void)RemoveAll(dir);
}

TEST(Files, ChownTreeReachesEveryEntryButNotLinkTargets) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to chown";
  std::string dir = TempDir(), outside = TempDir();
  ASSERT_TRUE(MakeDirs(dir + "/x/y").ok());
  ASSERT_TRUE(WriteFileAtomic(dir + "/x/y/f", "f").ok());
  ASSERT_EQ(::symlink(outside.c_str(), (dir + "/x/link").c_str()), 0);
  ASSERT_TRUE(ChownTree(dir, 65534, 65534).ok());
  for (const char* p : {"", "/x", "/x/y", "/x/y/f", "/x/link"})
    EXPECT_EQ(OwnerOf(dir + p), 65534u) << p;
  EXPECT_EQ(OwnerOf(outside), 0u);
  (void)RemoveAll(dir);
  (void)RemoveAll(outside);
}

TEST(Files, MakeDirMakesOneAndRefusesAnExistingOne) {
  std::string dir = TempDir();
  ASSERT_TRUE(MakeDir(dir + "/a", 0700).ok());
  EXPECT_TRUE(S_ISDIR(StatFile(dir + "/a")->mode));
  EXPECT_EQ(StatFile(dir + "/a")->mode & 0777, 0700u);
  EXPECT_EQ(MakeDir(dir + "/a", 0700).code(), Code::kAlreadyExists);
  EXPECT_TRUE(MakeDir(dir + "/x/y", 0700).IsNotFound());  // no -p
  (void)RemoveAll(dir);
}

TEST(Files, MakeDirsNested) {
  std::string dir = TempDir();
  ASSERT_TRUE(MakeDirs(dir + "/a/b/c", 0700).ok());
  EXPECT_TRUE(Exists(dir + "/a/b/c"));
  ASSERT_TRUE(WriteFileAtomic(dir + "/f", "x").ok());
  EXPECT_FALSE(MakeDirs(dir + "/f").ok());
  (void)RemoveAll(dir);
}

TEST(Files, ListDirIsSortedWithoutDotsAndAMissingOneIsNotFound) {
  std::string dir = TempDir();
  ASSERT_TRUE(WriteFileAtomic(dir + "/b", "", 0644, Durability::kNoSync).ok());
  ASSERT_TRUE(WriteFileAtomic(dir + "/a", "", 0644, Durability::kNoSync).ok());
  ASSERT_TRUE(MakeDirs(dir + "/c").ok());
  auto names = ListDir(dir);
  ASSERT_TRUE(names.ok()) << names.status().ToString();
  EXPECT_EQ(*names, (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_TRUE(ListDir(dir + "/missing").status().IsNotFound());
  (void)RemoveAll(dir);
}

TEST(Files, RemoveFileAndRenameSayWhatIsMissing) {
  std::string dir = TempDir();
  EXPECT_TRUE(RemoveFile(dir + "/none").ok());  // nothing to remove is fine
  EXPECT_TRUE(Rename(dir + "/none", dir + "/b").IsNotFound());
  ASSERT_TRUE(WriteFileAtomic(dir + "/a", "x", 0644, Durability::kNoSync).ok());
  ASSERT_TRUE(Rename(dir + "/a", dir + "/b").ok());
  EXPECT_FALSE(Exists(dir + "/a"));
  EXPECT_EQ(*ReadFile(dir + "/b"), "x");
  ASSERT_TRUE(RemoveFile(dir + "/b").ok());
  EXPECT_FALSE(Exists(dir + "/b"));
  ASSERT_TRUE(MakeDirs(dir + "/d").ok());
  EXPECT_FALSE(RemoveFile(dir + "/d").ok());  // a directory is not a file
  (void)RemoveAll(dir);
}

TEST(Files, LstatSeesTheLinkStatItsTargetAndReadLinkWhatItHolds) {
  std::string dir = TempDir();
  ASSERT_TRUE(WriteFileAtomic(dir + "/t", "four", 0640, Durability::kNoSync).ok());
  ASSERT_EQ(::symlink("t", (dir + "/l").c_str()), 0);
  auto link = LstatFile(dir + "/l");
  auto target = StatFile(dir + "/l");
  ASSERT_TRUE(link.ok() && target.ok());
  EXPECT_TRUE(S_ISLNK(link->mode));
  EXPECT_TRUE(S_ISREG(target->mode));
  EXPECT_EQ(target->mode & 07777, 0640u);
  EXPECT_EQ(target->size_bytes, 4u);
  EXPECT_EQ(*ReadLink(dir + "/l"), "t");
  EXPECT_FALSE(ReadLink(dir + "/t").ok());  // not a link
  EXPECT_TRUE(LstatFile(dir + "/none").status().IsNotFound());
  int fd = ::open((dir + "/t").c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  auto open = StatOpenFile(fd, "t");
  ::close(fd);
  ASSERT_TRUE(open.ok());
  EXPECT_EQ(open->inode, target->inode);
  (void)RemoveAll(dir);
}

TEST(Files, ChmodIsExecutableAndProbeWritable) {
  std::string dir = TempDir();
  std::string f = dir + "/f";
  ASSERT_TRUE(WriteFileAtomic(f, "#!/bin/sh\n", 0644, Durability::kNoSync).ok());
  EXPECT_FALSE(IsExecutable(f));
  ASSERT_TRUE(Chmod(f, 0755).ok());
  EXPECT_TRUE(IsExecutable(f));
  EXPECT_TRUE(Chmod(dir + "/none", 0755).IsNotFound());
  EXPECT_TRUE(ProbeWritable(dir).ok());
  EXPECT_EQ(ListDir(dir)->size(), 1u);  // the probe's file is gone again
  EXPECT_TRUE(ProbeWritable(dir + "/none").IsNotFound());
  (void)RemoveAll(dir);
}

TEST(Files, WritePrivateDirGivesAFreshDirectoryAndItsFilesToTheUser) {
  const std::string root = TempDir();
  const std::string dir = root + "/private";
  // As root, to another user; otherwise to this process's own user.
  const uid_t uid = ::geteuid() == 0 ? 65534 : ::geteuid();
  const gid_t gid = ::geteuid() == 0 ? 65534 : ::getegid();
  const mode_t old_umask = ::umask(0);  // the modes hold whatever the umask
  Status st = WritePrivateDir(dir, {{"HF_TOKEN", "value-1"}, {"B", "x"}}, uid, gid);
  ::umask(old_umask);
  ASSERT_TRUE(st.ok()) << st.ToString();
  struct stat d, f;
  ASSERT_EQ(::lstat(dir.c_str(), &d), 0);
  EXPECT_EQ(d.st_mode & 07777, 0700u);
  EXPECT_EQ(d.st_uid, uid);
  EXPECT_EQ(d.st_gid, gid);
  ASSERT_EQ(::lstat((dir + "/HF_TOKEN").c_str(), &f), 0);
  EXPECT_TRUE(S_ISREG(f.st_mode));
  EXPECT_EQ(f.st_mode & 07777, 0600u);
  EXPECT_EQ(f.st_uid, uid);
  EXPECT_EQ(*ReadFile(dir + "/HF_TOKEN"), "value-1");
  EXPECT_EQ(*ListDir(dir), (std::vector<std::string>{"B", "HF_TOKEN"}));

  // Never into a directory that is there already, whoever made it.
  EXPECT_EQ(WritePrivateDir(dir, {{"C", "y"}}, uid, gid).code(), Code::kAlreadyExists);
  EXPECT_FALSE(Exists(dir + "/C"));
  // A name that is not plain is refused, and nothing is left behind.
  EXPECT_FALSE(WritePrivateDir(root + "/other", {{"../escape", "z"}}, uid, gid).ok());
  EXPECT_FALSE(Exists(root + "/other"));
  EXPECT_FALSE(Exists(root + "/escape"));
  std::filesystem::remove_all(root);
}

TEST(Files, RemoveFileIfPresentSaysWhetherThereWasOne) {
  std::string dir = TempDir();
  std::string p = dir + "/f";
  ASSERT_TRUE(WriteFileAtomic(p, "x").ok());
  auto first = RemoveFileIfPresent(p);
  ASSERT_TRUE(first.ok());
  EXPECT_TRUE(*first);
  EXPECT_FALSE(Exists(p));
  auto again = RemoveFileIfPresent(p);
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(*again);
  // A directory is not a file: the error is unlink's, and the directory stays.
  ASSERT_TRUE(MakeDir(dir + "/d", 0700).ok());
  EXPECT_FALSE(RemoveFileIfPresent(dir + "/d").ok());
  EXPECT_TRUE(Exists(dir + "/d"));
  (void)RemoveAll(dir);
}

TEST(Files, ExchangePathsSwapsTwoDirectoriesWithTheirContents) {
  std::string dir = TempDir();
  ASSERT_TRUE(MakeDir(dir + "/a", 0700).ok());
  ASSERT_TRUE(MakeDir(dir + "/b", 0700).ok());
  ASSERT_TRUE(WriteFileAtomic(dir + "/a/from-a", "A").ok());
  ASSERT_TRUE(WriteFileAtomic(dir + "/b/from-b", "B").ok());
  Status st = ExchangePaths(dir + "/a", dir + "/b");
  if (st.code() == Code::kIoError) GTEST_SKIP() << "no RENAME_EXCHANGE here: " << st.ToString();
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(*ReadFile(dir + "/a/from-b"), "B");
  EXPECT_EQ(*ReadFile(dir + "/b/from-a"), "A");
  // Both must exist: nothing moves when one is missing.
  EXPECT_EQ(ExchangePaths(dir + "/a", dir + "/missing").code(), Code::kNotFound);
  EXPECT_TRUE(Exists(dir + "/a/from-b"));
  (void)RemoveAll(dir);
}

TEST(Files, MakeSymlinkHoldsItsTargetAndNeverReplaces) {
  std::string dir = TempDir();
  std::string link = dir + "/link";
  ASSERT_TRUE(MakeSymlink("target/that/need/not/exist", link).ok());
  EXPECT_EQ(*ReadLink(link), "target/that/need/not/exist");
  Status again = MakeSymlink("other", link);
  EXPECT_EQ(again.code(), Code::kAlreadyExists) << again.ToString();
  EXPECT_EQ(*ReadLink(link), "target/that/need/not/exist");
  (void)RemoveAll(dir);
}

TEST(Files, SetMtimeSetsTheLinksOwnTimeNotItsTargets) {
  std::string dir = TempDir();
  std::string file = dir + "/f", link = dir + "/link";
  ASSERT_TRUE(WriteFileAtomic(file, "x").ok());
  ASSERT_TRUE(MakeSymlink("f", link).ok());
  const int64_t file_ns = 1'600'000'000'123'456'789, link_ns = 1'500'000'000'000'000'001;
  ASSERT_TRUE(SetMtime(file, file_ns).ok());
  ASSERT_TRUE(SetMtime(link, link_ns).ok());
  EXPECT_EQ(LstatFile(file)->mtime_ns, file_ns);
  EXPECT_EQ(LstatFile(link)->mtime_ns, link_ns);
  EXPECT_EQ(StatFile(link)->mtime_ns, file_ns);  // through the link: the file's, unchanged
  EXPECT_EQ(SetMtime(dir + "/missing", file_ns).code(), Code::kNotFound);
  (void)RemoveAll(dir);
}

}  // namespace
}  // namespace lathe::os

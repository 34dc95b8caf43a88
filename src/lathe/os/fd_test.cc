#include "lathe/os/fd.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <thread>

#include "lathe/os/files.h"

namespace lathe::os {
namespace {

std::string TempDir() {
  char tmpl[] = "/tmp/lathe-fd-XXXXXX";
  return ::mkdtemp(tmpl);
}

TEST(Fd, WriteFullThenPreadFullReadsItBackAndAShortFileIsAnError) {
  std::string dir = TempDir();
  std::string p = dir + "/f";
  auto fd = Fd::Open(p, O_RDWR | O_CREAT | O_EXCL, 0600);
  ASSERT_TRUE(fd.ok()) << fd.status().ToString();
  ASSERT_TRUE(WriteFull(fd->get(), std::string_view("hello world"), p).ok());
  char buf[5];
  ASSERT_TRUE(PreadFull(fd->get(), buf, sizeof buf, 6, p).ok());
  EXPECT_EQ(std::string(buf, sizeof buf), "world");
  Status past = PreadFull(fd->get(), buf, sizeof buf, 8, p);
  EXPECT_EQ(past.code(), Code::kIoError);
  EXPECT_NE(past.message().find("unexpected end of file"), std::string::npos) << past.message();
  ASSERT_TRUE(fd->Close(p).ok());
  EXPECT_FALSE(fd->valid());
  (void)RemoveAll(dir);
}

TEST(Fd, PwriteFullLeavesThePositionAndReadUpToStopsAtTheEnd) {
  std::string dir = TempDir();
  std::string p = dir + "/f";
  auto fd = Fd::Open(p, O_RDWR | O_CREAT | O_EXCL, 0600);
  ASSERT_TRUE(fd.ok());
  ASSERT_TRUE(WriteFull(fd->get(), std::string_view("abcdef"), p).ok());
  ASSERT_TRUE(PwriteFull(fd->get(), "XY", 2, 1, p).ok());
  ASSERT_TRUE(WriteFull(fd->get(), std::string_view("g"), p).ok());  // still at 6
  EXPECT_EQ(*ReadFile(p), "aXYdefg");
  ASSERT_EQ(::lseek(fd->get(), 0, SEEK_SET), 0);
  char buf[64];
  auto n = ReadUpTo(fd->get(), buf, sizeof buf, p);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 7u);
  (void)RemoveAll(dir);
}

TEST(Fd, OpenIsCloseOnExecAndAMissingFileIsNotFound) {
  auto fd = Fd::Open("/dev/null", O_RDONLY);
  ASSERT_TRUE(fd.ok());
  EXPECT_NE(::fcntl(fd->get(), F_GETFD) & FD_CLOEXEC, 0);
  EXPECT_TRUE(Fd::Open("/nonexistent/lathe/x", O_RDONLY).status().IsNotFound());
}

TEST(Fd, TruncateAndDirectIoSwitch) {
  std::string dir = TempDir();
  std::string p = dir + "/f";
  auto fd = Fd::Open(p, O_RDWR | O_CREAT | O_EXCL, 0600);
  ASSERT_TRUE(fd.ok());
  ASSERT_TRUE(WriteFull(fd->get(), std::string_view("abcdef"), p).ok());
  ASSERT_TRUE(Truncate(fd->get(), 2, p).ok());
  EXPECT_EQ(*ReadFile(p), "ab");
  EXPECT_FALSE(IsDirectIo(fd->get()));
  if (SetDirectIo(fd->get(), true)) {  // a tmpfs refuses O_DIRECT: then nothing changed
    EXPECT_TRUE(IsDirectIo(fd->get()));
    EXPECT_TRUE(SetDirectIo(fd->get(), false));
  }
  EXPECT_FALSE(IsDirectIo(fd->get()));
  EXPECT_TRUE(SetDirectIo(fd->get(), false));  // already off
  (void)RemoveAll(dir);
}

// A pipe takes 64 KiB at a time: the rest of 4 MiB goes out in many short
// writes, all of which WriteFull must finish.
TEST(Fd, SyncFilesystemOnAFileOrDirectoryAndNotOnABadDescriptor) {
  std::string dir = TempDir();
  auto d = Fd::Open(dir, O_RDONLY | O_DIRECTORY);
  ASSERT_TRUE(d.ok());
  EXPECT_TRUE(SyncFilesystem(d->get(), dir).ok());
  auto f = Fd::Open(dir + "/f", O_WRONLY | O_CREAT | O_EXCL, 0600);
  ASSERT_TRUE(f.ok());
  ASSERT_TRUE(WriteFull(f->get(), std::string_view("x"), "f").ok());
  EXPECT_TRUE(SyncFilesystem(f->get(), "f").ok());
  Status bad = SyncFilesystem(-1, "nothing");
  EXPECT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("syncfs nothing"), std::string::npos) << bad.ToString();
  (void)RemoveAll(dir);
}

TEST(Fd, WriteFullFinishesShortWritesToAPipe) {
  int p[2];
  ASSERT_EQ(::pipe2(p, O_CLOEXEC), 0);
  Fd r(p[0]), w(p[1]);
  std::string data(4 << 20, '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 7);
  std::string got;
  std::thread reader([&] {
    char buf[4096];  // smaller than the pipe: the writer waits for it
    while (true) {
      auto n = ReadUpTo(r.get(), buf, sizeof buf, "pipe");
      if (!n.ok() || *n == 0) break;
      got.append(buf, *n);
    }
  });
  Status st = WriteFull(w.get(), data, "pipe");
  (void)w.Close("pipe");
  reader.join();
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(got.size(), data.size());
  EXPECT_TRUE(got == data);
}

TEST(Fd, WriteFullErrnoGivesTheErrnoInsteadOfAStatus) {
  int p[2];
  ASSERT_EQ(::pipe2(p, O_CLOEXEC), 0);
  Fd r(p[0]), w(p[1]);
  int err = 17;
  EXPECT_EQ(WriteFullErrno(w.get(), &err, sizeof err), 0);
  int back = 0;
  ASSERT_EQ(*ReadUpTo(r.get(), &back, sizeof back, "pipe"), sizeof back);
  EXPECT_EQ(back, 17);
  EXPECT_EQ(WriteFullErrno(r.get(), &err, sizeof err), EBADF);  // the read end
}

// Without MSG_NOSIGNAL the write to a closed peer would raise SIGPIPE and end
// this test binary.
TEST(Fd, SendFullToAClosedPeerIsAnErrorNotASignal) {
  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  Fd a(sv[0]), b(sv[1]);
  ASSERT_TRUE(SendFull(a.get(), "ping", "socket").ok());
  char buf[4];
  ASSERT_TRUE(ReadUpTo(b.get(), buf, sizeof buf, "socket").ok());
  EXPECT_EQ(std::string(buf, 4), "ping");
  ASSERT_TRUE(b.Close("socket").ok());
  Status st = SendFull(a.get(), "pong", "socket");
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("socket"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace lathe::os

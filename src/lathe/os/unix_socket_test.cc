#include "lathe/os/unix_socket.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "lathe/os/fd.h"
#include "lathe/os/files.h"

namespace lathe::os {
namespace {

std::string TempDir() {
  char tmpl[] = "/tmp/lathe-sock-XXXXXX";
  return ::mkdtemp(tmpl);
}

// A bound socket at `path`, listening or not (a dead server's file).
Fd BoundSocket(const std::string& path, bool listening) {
  Fd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.data(), path.size());
  EXPECT_EQ(::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  if (listening) {
    EXPECT_EQ(::listen(fd.get(), 1), 0);
  }
  return fd;
}

TEST(UnixSocket, AStaleSocketIsRemovedALiveOneAndOtherFilesAreKept) {
  std::string dir = TempDir();
  std::string live = dir + "/live.sock", stale = dir + "/stale.sock", plain = dir + "/plain";
  Fd server = BoundSocket(live, true);
  { Fd gone = BoundSocket(stale, false); }  // bound, never listened: refuses connections
  ASSERT_TRUE(WriteFileAtomic(plain, "x", 0644, Durability::kNoSync).ok());

  EXPECT_TRUE(UnixSocketIsLive(live));
  EXPECT_FALSE(UnixSocketIsLive(stale));
  EXPECT_FALSE(UnixSocketIsLive(dir + "/none"));

  EXPECT_EQ(RemoveStaleUnixSocket(live).code(), Code::kAlreadyExists);
  EXPECT_TRUE(Exists(live));
  EXPECT_EQ(RemoveStaleUnixSocket(plain).code(), Code::kAlreadyExists);
  EXPECT_TRUE(Exists(plain));
  EXPECT_TRUE(RemoveStaleUnixSocket(stale).ok());
  EXPECT_FALSE(Exists(stale));
  EXPECT_TRUE(RemoveStaleUnixSocket(dir + "/none").ok());
  (void)RemoveAll(dir);
}

}  // namespace
}  // namespace lathe::os

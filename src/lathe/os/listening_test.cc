#include "lathe/os/listening.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>

#include <gtest/gtest.h>

#include "lathe/os/fd.h"

namespace lathe::os {
namespace {

constexpr const char* kTcpHeader =
    "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout "
    "inode\n";

TEST(Listening, TcpRowsInTheListenStateAreParsed) {
  std::string text = std::string(kTcpHeader) +
                     // 127.0.0.1:8888 listening, uid 1001
                     "   0: 0100007F:22B8 00000000:0000 0A 00000000:00000000 00:00000000 00000000  "
                     "1001        0 4711 1 0 100 0 0 10 0\n"
                     // 0.0.0.0:6006 listening, uid 0
                     "   1: 00000000:1776 00000000:0000 0A 00000000:00000000 00:00000000 00000000  "
                     "   0        0 4712 1 0 100 0 0 10 0\n"
                     // an established connection: not a listener
                     "   2: 0100007F:22B8 0100007F:D431 01 00000000:00000000 00:00000000 00000000  "
                     "1002        0 4713 1 0\n"
                     "garbage\n";
  auto ls = ParseTcpListeners(text, false);
  ASSERT_EQ(ls.size(), 2u);
  EXPECT_EQ(ls[0].Address(), "127.0.0.1:8888");
  EXPECT_EQ(ls[0].uid, 1001u);
  EXPECT_EQ(ls[0].inode, 4711u);
  EXPECT_EQ(ls[1].Address(), "0.0.0.0:6006");
  EXPECT_EQ(ls[1].uid, 0u);
}

TEST(Listening, Tcp6RowsAreWordsInHostOrder) {
  std::string text = std::string(kTcpHeader) +
                     // [::]:6006
                     "   0: 00000000000000000000000000000000:1776 "
                     "00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 "
                     "00000000  1000        0 99 1 0\n"
                     // [::1]:7000
                     "   1: 00000000000000000000000001000000:1B58 "
                     "00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 "
                     "00000000  1000        0 100 1 0\n";
  auto ls = ParseTcpListeners(text, true);
  ASSERT_EQ(ls.size(), 2u);
  EXPECT_EQ(ls[0].Address(), "[::]:6006");
  EXPECT_EQ(ls[1].Address(), "[::1]:7000");
  EXPECT_EQ(ls[1].host, "::1");
}

TEST(Listening, UnixRowsThatAcceptConnectionsAreParsed) {
  const char* text =
      "Num       RefCount Protocol Flags    Type St Inode Path\n"
      "0000000000000000: 00000002 00000000 00010000 0001 01 2001 /home/u/web.sock\n"
      "0000000000000000: 00000003 00000000 00000000 0001 03 2002 /home/u/client.sock\n"
      "0000000000000000: 00000002 00000000 00010000 0005 01 2003 /run/seqpacket\n"
      "0000000000000000: 00000003 00000000 00000000 0001 03 2004\n";
  auto ls = ParseUnixListeners(text);
  ASSERT_EQ(ls.size(), 1u);
  EXPECT_EQ(ls[0].Address(), "/home/u/web.sock");
  EXPECT_EQ(ls[0].inode, 2001u);
}

TEST(Listening, TheTestProcesssOwnListenersAreFoundAndNothingElse) {
  Fd l(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  ASSERT_TRUE(l.valid());
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(l.get(), reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  ASSERT_EQ(::listen(l.get(), 4), 0);
  socklen_t len = sizeof(a);
  ASSERT_EQ(::getsockname(l.get(), reinterpret_cast<sockaddr*>(&a), &len), 0);
  const int port = ntohs(a.sin_port);
  // A bound socket that does not listen is not a listener.
  Fd bound(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in b{};
  b.sin_family = AF_INET;
  b.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(bound.get(), reinterpret_cast<sockaddr*>(&b), sizeof(b)), 0);
  len = sizeof(b);
  ASSERT_EQ(::getsockname(bound.get(), reinterpret_cast<sockaddr*>(&b), &len), 0);
  // A unix listener.
  char tmpl[] = "/tmp/lathe-listening-XXXXXX";
  const std::string dir = ::mkdtemp(tmpl);
  const std::string path = dir + "/s.sock";
  Fd u(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_un ua{};
  ua.sun_family = AF_UNIX;
  std::strncpy(ua.sun_path, path.c_str(), sizeof(ua.sun_path) - 1);
  ASSERT_EQ(::bind(u.get(), reinterpret_cast<sockaddr*>(&ua), sizeof(ua)), 0);
  ASSERT_EQ(::listen(u.get(), 4), 0);

  auto mine = ListenersOf({::getpid()});
  auto has = [&](const std::string& addr) {
    return std::any_of(mine.begin(), mine.end(),
                       [&](const Listener& x) { return x.Address() == addr; });
  };
  EXPECT_TRUE(has("127.0.0.1:" + std::to_string(port)));
  EXPECT_FALSE(has("127.0.0.1:" + std::to_string(ntohs(b.sin_port))));
  EXPECT_TRUE(has(path));
  for (const auto& x : mine) {
    if (x.kind == Listener::Kind::kTcp) {
      EXPECT_EQ(x.uid, ::getuid());
    }
  }
  // Once closed, it is gone; a pid that does not exist adds nothing.
  l = Fd();
  mine = ListenersOf({::getpid()});
  EXPECT_FALSE(has("127.0.0.1:" + std::to_string(port)));
  EXPECT_TRUE(ListenersOf({0x3fffffff}).empty());
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace lathe::os

#include "lathe/os/stream_socket.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>

#include <gtest/gtest.h>

namespace lathe::os {
namespace {

TEST(StreamSocket, TcpRowParserFindsTheUidOfTheMatchingRow) {
  const char* text =
      "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout "
      "inode\n"
      "   0: 0100007F:22B8 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1001        0 "
      "1 1 0\n"
      "   1: 0100007F:22B8 0100007F:D431 01 00000000:00000000 00:00000000 00000000  1002        0 "
      "2 1 0\n";
  auto uid = UidOfTcpRow(text, "0100007F:22B8", "0100007F:D431");
  ASSERT_TRUE(uid.ok()) << uid.status().ToString();
  EXPECT_EQ(*uid, 1002u);
  EXPECT_TRUE(UidOfTcpRow(text, "0100007F:22B8", "0100007F:D432").status().IsNotFound());
}

TEST(StreamSocket, ALoopbackConnectionNamesTheListenersOwner) {
  int l = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(l, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(l, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  ASSERT_EQ(::listen(l, 4), 0);
  socklen_t len = sizeof(a);
  ASSERT_EQ(::getsockname(l, reinterpret_cast<sockaddr*>(&a), &len), 0);
  auto fd = ConnectLoopback(ntohs(a.sin_port), 2000);
  ASSERT_TRUE(fd.ok()) << fd.status().ToString();
  auto uid = LoopbackPeerUid(fd->get());
  ASSERT_TRUE(uid.ok()) << uid.status().ToString();
  EXPECT_EQ(*uid, ::geteuid());
  ::close(l);
}

// A listener on `family`'s loopback (127.0.0.1 or ::1); its port in *port.
int LoopbackListener(int family, int* port) {
  int l = ::socket(family, SOCK_STREAM, 0);
  sockaddr_in6 a{};
  socklen_t len = family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
  if (family == AF_INET) {
    auto* a4 = reinterpret_cast<sockaddr_in*>(&a);
    a4->sin_family = AF_INET;
    a4->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  } else {
    a.sin6_family = AF_INET6;
    a.sin6_addr = in6addr_loopback;
  }
  if (l < 0 || ::bind(l, reinterpret_cast<sockaddr*>(&a), len) != 0 || ::listen(l, 4) != 0 ||
      ::getsockname(l, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    return -1;
  }
  *port = ntohs(a.sin6_port);  // sin_port and sin6_port share their place
  return l;
}

// A server asks who connected: the owner of the client's socket, whichever
// loopback address it came from (any 127.x.y.z, ::1).
TEST(StreamSocket, TheServerSideOfALoopbackConnectionNamesTheClientsOwner) {
  for (const char* from : {"127.0.0.1", "127.0.0.3", "::1"}) {
    const bool v6 = std::strchr(from, ':') != nullptr;
    int port = 0;
    int l = LoopbackListener(v6 ? AF_INET6 : AF_INET, &port);
    if (l < 0 && v6) continue;  // a host without IPv6 loopback
    ASSERT_GE(l, 0) << from;
    int c = ::socket(v6 ? AF_INET6 : AF_INET, SOCK_STREAM, 0);
    sockaddr_in6 src{}, dst{};
    socklen_t len = v6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
    if (v6) {
      src.sin6_family = dst.sin6_family = AF_INET6;
      src.sin6_addr = dst.sin6_addr = in6addr_loopback;
      dst.sin6_port = htons(static_cast<uint16_t>(port));
    } else {
      auto* s4 = reinterpret_cast<sockaddr_in*>(&src);
      auto* d4 = reinterpret_cast<sockaddr_in*>(&dst);
      s4->sin_family = d4->sin_family = AF_INET;
      ASSERT_EQ(::inet_pton(AF_INET, from, &s4->sin_addr), 1);
      d4->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      d4->sin_port = htons(static_cast<uint16_t>(port));
    }
    ASSERT_EQ(::bind(c, reinterpret_cast<sockaddr*>(&src), len), 0) << from;
    ASSERT_EQ(::connect(c, reinterpret_cast<sockaddr*>(&dst), len), 0) << from;
    int accepted = ::accept(l, nullptr, nullptr);
    ASSERT_GE(accepted, 0) << from;
    auto uid = LoopbackPeerUid(accepted);
    ASSERT_TRUE(uid.ok()) << from << ": " << uid.status().ToString();
    EXPECT_EQ(*uid, ::geteuid()) << from;
    ::close(c);
    ::close(accepted);
    ::close(l);
  }
}

TEST(StreamSocket, AUnixConnectionNamesTheListenersOwner) {
  const std::string dir = ::testing::TempDir() + "/stream_socket_test";
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/s.sock";
  ::unlink(path.c_str());
  int l = ::socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::strcpy(a.sun_path, path.c_str());
  ASSERT_EQ(::bind(l, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  ASSERT_EQ(::listen(l, 4), 0);
  auto fd = ConnectUnix(path, 2000);
  ASSERT_TRUE(fd.ok()) << fd.status().ToString();
  auto uid = UnixPeerUid(fd->get());
  ASSERT_TRUE(uid.ok());
  EXPECT_EQ(*uid, ::geteuid());
  ::close(l);
  ::unlink(path.c_str());
  EXPECT_TRUE(ConnectUnix(path, 2000).status().IsUnavailable());
}

TEST(StreamSocket, ARefusedPortIsUnavailable) {
  int l = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(l, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  socklen_t len = sizeof(a);
  ASSERT_EQ(::getsockname(l, reinterpret_cast<sockaddr*>(&a), &len), 0);
  ::close(l);  // bound, never listened, now closed: nothing accepts there
  EXPECT_TRUE(ConnectLoopback(ntohs(a.sin_port), 2000).status().IsUnavailable());
}

TEST(StreamSocket, FreeLoopbackPortsAreDistinctAndBindable) {
  auto ports = PickFreeLoopbackPorts(3);
  ASSERT_TRUE(ports.ok()) << ports.status().ToString();
  ASSERT_EQ(ports->size(), 3u);
  EXPECT_NE((*ports)[0], (*ports)[1]);
  EXPECT_NE((*ports)[1], (*ports)[2]);
  EXPECT_NE((*ports)[0], (*ports)[2]);
  for (int p : *ports) {
    EXPECT_GT(p, 0);
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(static_cast<uint16_t>(p));
    EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0) << p;  // not held
    ::close(fd);
  }
}

}  // namespace
}  // namespace lathe::os

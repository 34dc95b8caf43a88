#include "lathe/os/netns.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>

#include <gtest/gtest.h>

#include "lathe/os/process.h"
#include "lathe/os/stream_socket.h"

namespace lathe::os {
namespace {

constexpr uid_t kNobody = 65534;

// A TCP socket on 127.0.0.1:port (0: any) of the calling thread's namespace,
// listening when `listen` is set; -1 on failure. `port` gets the one bound.
int LoopbackSocket(int& port, bool listen) {
  int s = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  if (s < 0 || ::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 ||
      (listen && ::listen(s, 4) != 0) ||
      ::getsockname(s, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    return -1;
  }
  port = ntohs(a.sin_port);
  return s;
}

int WaitExit(pid_t pid) {
  int ws = 0;
  if (::waitpid(pid, &ws, 0) != pid) return -1;
  return WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
}

// Whether this process may make network namespaces at all (root, and not in
// a container that forbids it); the tests skip otherwise.
bool CanMakeNamespaces() {
  if (::geteuid() != 0) return false;
  pid_t pid = ::fork();
  if (pid == 0) _exit(EnterNewNetworkNamespace().ok() ? 0 : 1);
  return pid > 0 && WaitExit(pid) == 0;
}

ino_t ThreadNamespace() {
  struct stat st {};
  return ::stat("/proc/thread-self/ns/net", &st) == 0 ? st.st_ino : 0;
}

TEST(NetNs, ANewNamespaceHasItsOwnLoopbackUpAndNoneOfTheHostsPorts) {
  if (!CanMakeNamespaces()) GTEST_SKIP() << "needs root allowed to unshare(CLONE_NEWNET)";
  int host_port = 0;
  int host = LoopbackSocket(host_port, true);
  ASSERT_GE(host, 0);
  ASSERT_TRUE(ConnectLoopback(host_port, 2000).ok());  // reachable here
  pid_t pid = ::fork();
  if (pid == 0) {
    if (!EnterNewNetworkNamespace().ok()) _exit(2);
    // The host's listener is not there: nothing listens on that port.
    auto refused = ConnectLoopback(host_port, 2000);
    if (refused.ok()) _exit(3);
    // Loopback is up: a listener of its own is reachable.
    int own_port = 0;
    if (LoopbackSocket(own_port, true) < 0) _exit(4);
    _exit(ConnectLoopback(own_port, 2000).ok() ? 0 : 5);
  }
  ASSERT_GT(pid, 0);
  EXPECT_EQ(WaitExit(pid), 0);
  ::close(host);
}

TEST(NetNs, AThreadConnectsInsideAnotherProcesssNamespaceAndReadsItsOwner) {
  if (!CanMakeNamespaces()) GTEST_SKIP() << "needs root allowed to unshare(CLONE_NEWNET)";
  // The port is bound, not listening, in the host's namespace: connecting
  // to it here is refused for certain.
  int port = 0;
  int host = LoopbackSocket(port, false);
  ASSERT_GE(host, 0);
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  pid_t pid = ::fork();
  if (pid == 0) {
    ::close(ready[0]);
    // A run: its own namespace, then another user, listening on the port.
    if (!EnterNewNetworkNamespace().ok() || ::setuid(kNobody) != 0) _exit(2);
    int p = port;
    if (LoopbackSocket(p, true) < 0) _exit(3);
    (void)!::write(ready[1], "1", 1);
    ::pause();
    _exit(0);
  }
  ASSERT_GT(pid, 0);
  ::close(ready[1]);
  char c = 0;
  ASSERT_EQ(::read(ready[0], &c, 1), 1) << "the child could not listen in its namespace";
  ::close(ready[0]);
  auto start = ProcessStartTime(pid);
  ASSERT_TRUE(start.has_value());

  EXPECT_FALSE(ConnectLoopback(port, 2000).ok());  // the host's namespace has no listener

  auto ns = OpenNetworkNamespace(pid, *start);
  ASSERT_TRUE(ns.ok()) << ns.status().ToString();
  const ino_t before = ThreadNamespace();
  Result<Fd> fd = Status(Code::kInternal, "not run");
  Result<uid_t> owner = Status(Code::kInternal, "not run");
  Status ran = RunInNetworkNamespace(ns->get(), [&] {
    fd = ConnectLoopback(port, 2000);
    if (fd.ok()) owner = LoopbackPeerUid(fd->get());
  });
  ASSERT_TRUE(ran.ok()) << ran.ToString();
  EXPECT_EQ(ThreadNamespace(), before);  // the caller never moved
  ASSERT_TRUE(fd.ok()) << fd.status().ToString();
  ASSERT_TRUE(owner.ok()) << owner.status().ToString();
  EXPECT_EQ(*owner, kNobody);
  // The socket stays in the run's namespace: usable from here, and its row
  // is in that namespace's table, not the host's.
  EXPECT_EQ(::send(fd->get(), "x", 1, MSG_NOSIGNAL), 1);
  EXPECT_TRUE(LoopbackPeerUid(fd->get()).status().IsNotFound());

  // A recorded start time that is not the process's (a reused pid) is refused.
  EXPECT_TRUE(OpenNetworkNamespace(pid, *start + 1).status().IsNotFound());
  ::kill(pid, SIGKILL);
  WaitExit(pid);
  EXPECT_TRUE(OpenNetworkNamespace(pid, *start).status().IsNotFound());
  ::close(host);
}

TEST(NetNs, ABadNamespaceDescriptorRunsNothing) {
  bool ran = false;
  Status s = RunInNetworkNamespace(-1, [&] { ran = true; });
  EXPECT_FALSE(s.ok());
  EXPECT_FALSE(ran);
}

}  // namespace
}  // namespace lathe::os

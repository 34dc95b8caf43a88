#include "lathe/net/http_server.h"

#include <arpa/inet.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "lathe/net/http_client.h"
#include "lathe/net/test_util/raw_conn.h"
#include "lathe/net/test_util/server_test_util.h"
#include "lathe/os/fd.h"

namespace lathe::net {
namespace {

using namespace std::chrono_literals;
using namespace testing;  // NOLINT: lathe::net::testing, the tests' helpers

// The connection limits (ServerOptions::max_connections and the per-client ones).

TEST(HttpServer, ConnectionsBeyondTheLimitGet503) {
  ServerOptions o;
  o.max_connections = 1;
  int port = 0;
  auto server = StartTcp(o, EchoHandler(), &port);
  RawConn first = RawConn::Tcp(port);
  ASSERT_TRUE(first.Send(Get("/1")));
  auto r1 = first.ReadResponse();  // served: the one slot is taken
  ASSERT_TRUE(r1.has_value());
  EXPECT_EQ(r1->status, 200);

  RawConn second = RawConn::Tcp(port);
  ASSERT_TRUE(second.Send(Get("/2")));
  auto r2 = second.ReadResponse();
  ASSERT_TRUE(r2.has_value());
  EXPECT_EQ(r2->status, 503);
  ExpectJsonError(*r2);
  EXPECT_TRUE(second.WaitClosed());
  EXPECT_EQ(server->active_connections(), 1u);

  first.Close();  // frees the slot
  std::optional<int> status;
  for (auto until = std::chrono::steady_clock::now() + kWait;
       std::chrono::steady_clock::now() < until && status != 200;) {
    auto res = TcpClient(port).Request("GET", "/3");
    ASSERT_TRUE(res.ok());
    status = res->status;
    if (status != 200) std::this_thread::sleep_for(10ms);
  }
  EXPECT_EQ(status, 200);
}

// A served request on `c` (kept open, keep-alive): its status, 0 for none.
int Probe(RawConn& c) {
  if (!c.connected() || !c.Send(Get("/probe"))) return 0;
  auto r = c.ReadResponse();
  return r ? r->status : 0;
}

// A unix-socket server others can reach: the directory 0755, the socket 0666.
std::unique_ptr<HttpServer> StartUnix(ServerOptions o, const TempDir& dir, std::string* path) {
  *path = dir.Path("lathe.sock");
  ::chmod(path->substr(0, path->rfind('/')).c_str(), 0755);
  auto server = HttpServer::Create(std::move(o), EchoHandler());
  EXPECT_TRUE(server.ok());
  EXPECT_TRUE((*server)->ListenUnix(*path, 0666).ok());
  EXPECT_TRUE((*server)->Start().ok());
  return std::move(*server);
}

TEST(HttpServer, ConnectionsBeyondTheLimitOfOneUidGet503) {
  TempDir dir;
  std::string path;
  ServerOptions o;
  o.max_connections_per_uid = 2;
  auto server = StartUnix(o, dir, &path);
  RawConn a = RawConn::Unix(path), b = RawConn::Unix(path);
  EXPECT_EQ(Probe(a), 200);
  EXPECT_EQ(Probe(b), 200);
  RawConn c = RawConn::Unix(path);
  ASSERT_TRUE(c.Send(Get("/3")));
  auto r = c.ReadResponse();
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->status, 503);
  EXPECT_NE(r->body.find("too many connections from this user"), std::string::npos) << r->body;
  EXPECT_TRUE(c.WaitClosed());
  a.Close();  // frees one of the uid's slots
  int status = 0;
  for (auto until = std::chrono::steady_clock::now() + kWait;
       std::chrono::steady_clock::now() < until && status != 200;) {
    RawConn d = RawConn::Unix(path);
    status = Probe(d);
    if (status != 200) std::this_thread::sleep_for(10ms);
  }
  EXPECT_EQ(status, 200);
}

TEST(HttpServer, ReservedUidsHaveNoPerUidLimitAndUseTheReserve) {
  TempDir dir;
  std::string path;
  ServerOptions o;
  o.max_connections = 2;
  o.max_connections_per_uid = 1;
  o.reserved_uids = {static_cast<unsigned>(::getuid())};
  o.reserved_connections = 1;
  auto server = StartUnix(o, dir, &path);
  std::vector<RawConn> held;
  for (int i = 0; i < 3; ++i) {  // the two ordinary slots and the reserve
    held.push_back(RawConn::Unix(path));
    EXPECT_EQ(Probe(held.back()), 200) << i;
  }
  RawConn over = RawConn::Unix(path);
  EXPECT_EQ(Probe(over), 503);  // the reserve is bounded too
  EXPECT_EQ(server->active_connections(), 3u);
}

TEST(HttpServer, ConnectionsBeyondTheLimitOfOneAddressGet503) {
  ServerOptions o;
  o.max_connections_per_address = 1;
  int port = 0;
  auto server = StartTcp(o, EchoHandler(), &port);
  RawConn a = RawConn::Tcp(port);
  EXPECT_EQ(Probe(a), 200);
  RawConn b = RawConn::Tcp(port);
  ASSERT_TRUE(b.Send(Get("/2")));
  auto r = b.ReadResponse();
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->status, 503);
  EXPECT_NE(r->body.find("too many connections from this address"), std::string::npos) << r->body;
  // Any local user may bind any 127.x.y.z: every loopback address is one.
  RawConn other = RawConn::TcpFrom("127.0.0.2", port);
  ASSERT_TRUE(other.connected());
  EXPECT_EQ(Probe(other), 503);
}

// Where a child connects: a unix socket, or 127.0.0.1:port from a source
// address of its own.
struct Target {
  sockaddr_storage to{};
  socklen_t to_len = 0;
  sockaddr_in from{};  // AF_INET: bind here first
};
Target UnixTarget(const std::string& path) {
  Target t;
  auto* a = reinterpret_cast<sockaddr_un*>(&t.to);
  a->sun_family = AF_UNIX;
  std::strncpy(a->sun_path, path.c_str(), sizeof(a->sun_path) - 1);
  t.to_len = sizeof(sockaddr_un);
  return t;
}
Target TcpTarget(int port, const char* from) {
  Target t;
  auto* a = reinterpret_cast<sockaddr_in*>(&t.to);
  a->sin_family = AF_INET;
  a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a->sin_port = htons(static_cast<uint16_t>(port));
  t.to_len = sizeof(sockaddr_in);
  t.from.sin_family = AF_INET;
  EXPECT_EQ(::inet_pton(AF_INET, from, &t.from.sin_addr), 1);
  return t;
}

// In a child that becomes `uid`: connects to `t`, sends a request and
// writes the answer's status line to `report`, then holds the connection
// until `hold` is closed. Only async-signal-safe calls after fork.
pid_t ConnectAs(uid_t uid, const Target& t, int report, int hold) {
  pid_t pid = ::fork();
  if (pid != 0) return pid;
  char buf[512];
  const char req[] = "GET /as-other HTTP/1.1\r\nHost: x\r\n\r\n";
  const bool tcp = t.from.sin_family == AF_INET;
  int fd = -1;
  if (::setgroups(0, nullptr) == 0 && ::setgid(uid) == 0 && ::setuid(uid) == 0 &&
      (fd = ::socket(t.to.ss_family, SOCK_STREAM, 0)) >= 0 &&
      (!tcp || ::bind(fd, reinterpret_cast<const sockaddr*>(&t.from), sizeof(t.from)) == 0) &&
      ::connect(fd, reinterpret_cast<const sockaddr*>(&t.to), t.to_len) == 0 &&
      ::write(fd, req, sizeof(req) - 1) == static_cast<ssize_t>(sizeof(req) - 1)) {
    ssize_t n = ::read(fd, buf, 12);  // "HTTP/1.1 200"
    if (n > 0) (void)!::write(report, buf, static_cast<size_t>(n));
  }
  ::close(report);
  (void)!::read(hold, buf, 1);
  ::_exit(0);
}

// The status another uid's connection got (0: none), the child kept holding it.
struct Other {
  pid_t pid = -1;
  int hold_w = -1;
  int status = 0;
  ~Other() {  // later children inherited hold_w too: end this one directly
    if (hold_w >= 0) ::close(hold_w);
    if (pid > 0) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
  }
};
void RunAs(uid_t uid, const Target& t, Other* o) {
  int report[2], hold[2];
  ASSERT_EQ(::pipe(report), 0);
  ASSERT_EQ(::pipe(hold), 0);
  o->pid = ConnectAs(uid, t, report[1], hold[0]);
  ::close(report[1]);
  ::close(hold[0]);
  o->hold_w = hold[1];
  char buf[32] = {};
  ssize_t n = ::read(report[0], buf, sizeof buf - 1);
  ::close(report[0]);
  if (n >= 12) o->status = std::atoi(buf + 9);
}

constexpr uid_t kNobody = 65534;

TEST(HttpServer, OneUidAtItsLimitLeavesOthersServedAndRootHasAReserve) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to connect as another uid";
  TempDir dir;
  std::string path;
  ServerOptions o;
  o.max_connections = 2;
  o.max_connections_per_uid = 1;
  o.reserved_uids = {0};
  o.reserved_connections = 1;
  auto server = StartUnix(o, dir, &path);
  // nobody takes its one slot; a second connection of nobody is refused.
  Other first, second;
  RunAs(kNobody, UnixTarget(path), &first);
  EXPECT_EQ(first.status, 200);
  RunAs(kNobody, UnixTarget(path), &second);
  EXPECT_EQ(second.status, 503);
  // Another uid is still served (the per-uid limit is nobody's alone) ...
  Other another;
  RunAs(kNobody - 1, UnixTarget(path), &another);
  EXPECT_EQ(another.status, 200);
  // ... now every ordinary slot is taken: others are refused, root is not.
  Other third;
  RunAs(kNobody - 2, UnixTarget(path), &third);
  EXPECT_EQ(third.status, 503);
  RawConn root = RawConn::Unix(path);
  EXPECT_EQ(Probe(root), 200);
}

// Over loopback TCP a client is its user, whichever 127.x.y.z it connects
// from: one user at its limit leaves another user served, and the handler
// learns who connected.
TEST(HttpServer, LoopbackClientsAreCountedPerUser) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to connect as another uid";
  ServerOptions o;
  o.max_connections_per_loopback_user = 1;
  o.max_connections_per_address = 100;
  std::mutex mu;
  std::set<std::pair<bool, unsigned>> seen;  // (loopback, uid)
  int port = 0;
  auto server = StartTcp(
      o,
      [&](HttpRequest req, std::unique_ptr<Responder> r) {
        {
          std::lock_guard<std::mutex> l(mu);
          seen.emplace(req.loopback, req.loopback_uid.value_or(99999));
        }
        r->Send(Text(200, "ok"));
      },
      &port);
  RawConn mine = RawConn::TcpFrom("127.0.0.2", port);
  EXPECT_EQ(Probe(mine), 200);
  for (const char* from : {"127.0.0.1", "127.0.0.3"}) {
    RawConn again = RawConn::TcpFrom(from, port);
    ASSERT_TRUE(again.Send(Get("/again")));
    auto r = again.ReadResponse();
    ASSERT_TRUE(r.has_value()) << from;
    EXPECT_EQ(r->status, 503) << from;
    EXPECT_NE(r->body.find("too many connections from this user"), std::string::npos) << r->body;
  }
  Other other;
  RunAs(kNobody, TcpTarget(port, "127.0.0.4"), &other);
  EXPECT_EQ(other.status, 200);
  std::lock_guard<std::mutex> l(mu);
  EXPECT_EQ(seen, (std::set<std::pair<bool, unsigned>>{{true, 0u}, {true, kNobody}}));
}

}  // namespace
}  // namespace lathe::net

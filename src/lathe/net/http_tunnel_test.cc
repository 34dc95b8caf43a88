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

// ---------------------------------------------------------------------------
// Tunnels. The handler answers every request with Tunnel to one end of a
// socketpair; the test plays the upstream on the other end.

constexpr std::string_view kUpgrade =
    "GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n";

HttpResponse SwitchingProtocols() {
  HttpResponse head;
  head.status = 101;
  head.headers = {
      {"Upgrade", "websocket"}, {"Connection", "Upgrade"}, {"Sec-WebSocket-Accept", "k"}};
  return head;  // content_type keeps its default: it must not be sent on a 101
}

// The upstream ends of the tunnels the handler opened, in request order.
class Upstreams {
 public:
  Handler Tunneling(std::string leftover, TunnelOptions options = {}) {
    return [this, leftover, options](HttpRequest, std::unique_ptr<Responder> r) {
      int sv[2];
      if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
        return r->Send(Text(500, "socketpair"));
      }
      {
        std::lock_guard<std::mutex> l(mu_);
        ends_.push_back(sv[1]);
      }
      cv_.notify_all();
      r->Tunnel(SwitchingProtocols(), sv[0], leftover, options);
    };
  }
  // The next upstream end; not connected() when none came within kWait.
  RawConn Next() {
    std::unique_lock<std::mutex> l(mu_);
    if (!cv_.wait_for(l, kWait, [&] { return !ends_.empty(); })) return RawConn::Adopt(-1);
    int fd = ends_.front();
    ends_.pop_front();
    return RawConn::Adopt(fd);
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<int> ends_;
};

// Sends back what it reads until EOF, then shuts its sending half.
void Echo(int fd) {
  std::vector<char> buf(64 << 10);
  for (;;) {
    ssize_t n = ::recv(fd, buf.data(), buf.size(), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    if (!os::SendFull(fd, std::string_view(buf.data(), static_cast<size_t>(n)), "echo").ok()) {
      break;
    }
  }
  ::shutdown(fd, SHUT_WR);
}

std::string Pattern(size_t n) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>((i * 7 + i / 4096) % 251);
  return s;
}

// Sends the upgrade request (and `early` bytes in the same write) and reads the 101.
std::optional<testing::RawResponse> Upgrade(RawConn& client, std::string_view early = {}) {
  if (!client.Send(std::string(kUpgrade) + std::string(early))) return std::nullopt;
  return client.ReadResponse(20000, /*keep_interim=*/true);
}

TEST(HttpTunnel, CopiesBothWaysLeftoverAndEarlyBytesFirst) {
  Upstreams ups;
  int port = 0;
  auto server = StartTcp({}, ups.Tunneling("LEFTOVER"), &port);
  RawConn client = RawConn::Tcp(port);
  ASSERT_TRUE(client.connected());
  // Sent with the request head, before the 101: the server has them buffered.
  auto head = Upgrade(client, "EARLY");
  ASSERT_TRUE(head.has_value());
  EXPECT_EQ(head->status, 101);
  EXPECT_TRUE(head->HeadHas("upgrade: websocket")) << head->head;
  EXPECT_TRUE(head->HeadHas("sec-websocket-accept: k")) << head->head;
  EXPECT_FALSE(head->HeadHas("content-length")) << head->head;
  EXPECT_FALSE(head->HeadHas("transfer-encoding")) << head->head;
  EXPECT_FALSE(head->HeadHas("content-type")) << head->head;
  RawConn up = ups.Next();
  ASSERT_TRUE(up.connected());
  std::thread echo(Echo, up.fd());
  EXPECT_EQ(client.Read(8).value_or("?"), "LEFTOVER");
  EXPECT_EQ(client.Read(5).value_or("?"), "EARLY");
  // More than 1 MiB each way, written while the echo comes back.
  std::string big = Pattern(3 << 20);
  std::thread writer([&] { EXPECT_TRUE(client.Send(big)); });
  auto back = client.Read(big.size());
  writer.join();
  ASSERT_TRUE(back.has_value());
  EXPECT_TRUE(*back == big);
  EXPECT_TRUE(client.ShutdownWrite());
  echo.join();  // it read EOF: the client's close reached the upstream
  EXPECT_TRUE(client.WaitClosed());
}

TEST(HttpTunnel, ClientCloseReachesTheUpstreamAfterItsLastBytes) {
  Upstreams ups;
  int port = 0;
  auto server = StartTcp({}, ups.Tunneling(""), &port);
  RawConn client = RawConn::Tcp(port);
  auto head = Upgrade(client);
  ASSERT_TRUE(head.has_value());
  ASSERT_EQ(head->status, 101);
  RawConn up = ups.Next();
  ASSERT_TRUE(up.connected());
  ASSERT_TRUE(client.Send("last words"));
  ASSERT_TRUE(client.ShutdownWrite());
  std::string got;
  EXPECT_TRUE(up.WaitClosed(20000, &got));  // EOF
  EXPECT_EQ(got, "last words");
  EXPECT_TRUE(client.WaitClosed());  // and the connection is closed
}

TEST(HttpTunnel, UpstreamCloseReachesTheClientAfterItsLastBytes) {
  Upstreams ups;
  int port = 0;
  auto server = StartTcp({}, ups.Tunneling("hello "), &port);
  RawConn client = RawConn::Tcp(port);
  auto head = Upgrade(client);
  ASSERT_TRUE(head.has_value());
  ASSERT_EQ(head->status, 101);
  RawConn up = ups.Next();
  ASSERT_TRUE(up.Send("and goodbye"));
  up.Close();
  std::string got;
  EXPECT_TRUE(client.WaitClosed(20000, &got));
  EXPECT_EQ(got, "hello and goodbye");
  for (auto until = std::chrono::steady_clock::now() + kWait;
       server->active_connections() > 0 && std::chrono::steady_clock::now() < until;) {
    std::this_thread::sleep_for(1ms);
  }
  EXPECT_EQ(server->active_connections(), 0u);
}

TEST(HttpTunnel, IdleTunnelIsClosedBothWays) {
  Upstreams ups;
  int port = 0;
  TunnelOptions to;
  to.idle_timeout_ms = 200;
  auto server = StartTcp({}, ups.Tunneling("", to), &port);
  RawConn client = RawConn::Tcp(port);
  auto head = Upgrade(client);
  ASSERT_TRUE(head.has_value());
  ASSERT_EQ(head->status, 101);
  RawConn up = ups.Next();
  EXPECT_TRUE(client.WaitClosed());
  EXPECT_TRUE(up.WaitClosed());
}

TEST(HttpTunnel, StopEndsAnOpenTunnel) {
  Upstreams ups;
  int port = 0;
  auto server = StartTcp({}, ups.Tunneling(""), &port);
  RawConn client = RawConn::Tcp(port);
  auto head = Upgrade(client);
  ASSERT_TRUE(head.has_value());
  ASSERT_EQ(head->status, 101);
  RawConn up = ups.Next();
  ASSERT_TRUE(client.Send("ping"));  // the tunnel runs
  EXPECT_EQ(up.Read(4).value_or("?"), "ping");
  server->Stop(kWait.count() * 1000);  // returns although the tunnel is busy forever
  EXPECT_TRUE(client.WaitClosed());
  EXPECT_TRUE(up.WaitClosed());
}

TEST(HttpTunnel, TunnelsBeyondTheLimitGet503AndTheirUpstreamClosed) {
  Upstreams ups;
  ServerOptions o;
  o.max_tunnels = 1;
  int port = 0;
  auto server = StartTcp(o, ups.Tunneling(""), &port);
  RawConn first = RawConn::Tcp(port);
  auto head = Upgrade(first);
  ASSERT_TRUE(head.has_value());
  ASSERT_EQ(head->status, 101);
  RawConn first_up = ups.Next();

  RawConn second = RawConn::Tcp(port);
  auto refused = Upgrade(second);
  ASSERT_TRUE(refused.has_value());
  EXPECT_EQ(refused->status, 503);
  EXPECT_NE(refused->body.find("too many tunnels"), std::string::npos) << refused->body;
  RawConn second_up = ups.Next();
  ASSERT_TRUE(second_up.connected());
  EXPECT_TRUE(second_up.WaitClosed());  // the server closed the upstream it was handed

  // Once the first tunnel ends, its slot is free again.
  first.Close();
  EXPECT_TRUE(first_up.WaitClosed());
  int status = 0;
  for (auto until = std::chrono::steady_clock::now() + kWait;
       status != 101 && std::chrono::steady_clock::now() < until;) {
    RawConn again = RawConn::Tcp(port);
    auto res = Upgrade(again);
    status = res ? res->status : 0;
    RawConn again_up = ups.Next();
  }
  EXPECT_EQ(status, 101);
}

TEST(HttpTunnel, WorksOverAUnixSocketAndFromAnotherThread) {
  TempDir dir;
  std::string path = dir.Path("s.sock");
  Workers workers;
  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  RawConn up = RawConn::Adopt(sv[1]);
  auto server = HttpServer::Create({}, [&](HttpRequest, std::unique_ptr<Responder> r) {
    workers.Spawn(
        [r = std::move(r), fd = sv[0]]() mutable { r->Tunnel(SwitchingProtocols(), fd, ""); });
  });
  ASSERT_TRUE(server.ok());
  ASSERT_TRUE((*server)->ListenUnix(path, 0600).ok());
  ASSERT_TRUE((*server)->Start().ok());
  RawConn client = RawConn::Unix(path);
  auto head = Upgrade(client);
  ASSERT_TRUE(head.has_value());
  ASSERT_EQ(head->status, 101);
  ASSERT_TRUE(client.Send("to upstream"));
  EXPECT_EQ(up.Read(11).value_or("?"), "to upstream");
  ASSERT_TRUE(up.Send("to client"));
  EXPECT_EQ(client.Read(9).value_or("?"), "to client");
  workers.JoinAll();
}

TEST(HttpTunnel, AResponderUsedAlreadyClosesTheUpstream) {
  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  RawConn up = RawConn::Adopt(sv[1]);
  int port = 0;
  auto server = StartTcp(
      {},
      [&](HttpRequest, std::unique_ptr<Responder> r) {
        r->Send(Text(200, "plain"));
        r->Tunnel(SwitchingProtocols(), sv[0], "");  // second answer: dropped
      },
      &port);
  RawConn client = RawConn::Tcp(port);
  ASSERT_TRUE(client.Send(std::string(kUpgrade)));
  auto res = client.ReadResponse();
  ASSERT_TRUE(res.has_value());
  EXPECT_EQ(res->status, 200);
  EXPECT_TRUE(up.WaitClosed());
}

}  // namespace
}  // namespace lathe::net

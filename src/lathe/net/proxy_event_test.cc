// The reverse proxy's event-driven path (proxy_event.cc), behind a real
// HttpServer: requests on a kept upstream connection are forwarded on the
// client connection's own loop, and whatever that path leaves to a worker
// (a connection the upstream closed, a large answer) still comes out whole.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "lathe/net/http_server.h"
#include "lathe/net/proxy.h"
#include "lathe/net/status_http.h"
#include "lathe/net/test_util/raw_conn.h"

namespace lathe::net {
namespace {

using testing::RawConn;

HttpResponse ErrorPage(const Status& s) {
  return HttpResponse{HttpStatusFor(s), "text/plain", {}, s.msg_id()};
}

// What the upstream does with its n-th request (0-based, counted over all
// its connections): the bytes it sends back, or nothing at all (kHang: it
// holds the connection without answering; kClose: it closes it unanswered).
struct Answer {
  enum Kind { kSend, kHang, kClose } kind = kSend;
  std::string bytes;
  bool close_after = false;  // closes the connection once it answered
  size_t split = 0;          // sends this many bytes first, then the rest after a pause
  bool hang_after = false;   // holds the connection once it sent its bytes
};

Answer Ok() { return Answer{Answer::kSend, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"}; }

// `body` chunked, its header sent alone first: the proxy sees a header whose
// body is still to come and unsized.
Answer Chunked(const std::string& body) {
  const std::string head = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
  Answer a{Answer::kSend, head + fmt::format("{:x}\r\n", body.size()) + body + "\r\n0\r\n\r\n"};
  a.split = head.size();
  return a;
}

Answer Hang() {
  Answer a;
  a.kind = Answer::kHang;
  return a;
}

// An upstream on a unix socket whose answers a test scripts; it counts the
// connections it accepted and the request bytes (heads and bodies) it got.
class ScriptedUpstream {
 public:
  explicit ScriptedUpstream(std::function<Answer(int request)> script)
      : script_(std::move(script)) {
    dir_ = ::testing::TempDir() + "/proxy_ev_" + std::to_string(::getpid());
    std::filesystem::create_directories(dir_);
    path_ = dir_ + "/up.sock";
    ::unlink(path_.c_str());
    listen_fd_ = ::socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::strcpy(a.sun_path, path_.c_str());
    EXPECT_EQ(::bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
    EXPECT_EQ(::listen(listen_fd_, 16), 0);
    accept_ = std::thread([this] {
      for (;;) {
        int c = ::accept(listen_fd_, nullptr, nullptr);
        if (c < 0) return;
        ++connections;
        std::lock_guard<std::mutex> lock(mu_);
        open_.push_back(c);
        conns_.emplace_back([this, c] { Serve(c); });
      }
    });
  }
  ~ScriptedUpstream() {
    ::shutdown(listen_fd_, SHUT_RDWR);
    ::close(listen_fd_);
    accept_.join();
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (int c : open_) ::shutdown(c, SHUT_RDWR);  // ends the hanging ones
    }
    for (auto& t : conns_) t.join();
    ::unlink(path_.c_str());
  }
  Upstream Target() const {
    Upstream u;
    u.kind = Upstream::Kind::kUnix;
    u.socket = path_;
    u.owner_uid = ::geteuid();
    return u;
  }
  std::atomic<int> connections{0};
  std::atomic<int> requests{0};
  std::atomic<size_t> body_bytes{0};

 private:
  void Serve(int c) {
    std::string got;
    char buf[65536];
    for (;;) {
      size_t end = got.find("\r\n\r\n");
      size_t body = 0;
      if (end != std::string::npos) {
        if (auto cl = got.find("Content-Length: "); cl != std::string::npos && cl < end) {
          body = std::stoul(got.substr(cl + 16));
        }
      }
      if (end == std::string::npos || got.size() < end + 4 + body) {
        ssize_t n = ::read(c, buf, sizeof(buf));
        if (n <= 0) break;
        got.append(buf, static_cast<size_t>(n));
        continue;
      }
      got.erase(0, end + 4 + body);
      body_bytes += body;
      Answer a = script_(requests++);
      if (a.kind == Answer::kClose) break;
      if (a.kind == Answer::kHang) {
        while (::read(c, buf, sizeof(buf)) > 0) {
        }
        break;
      }
      const size_t first = a.split == 0 ? a.bytes.size() : a.split;
      (void)::send(c, a.bytes.data(), first, MSG_NOSIGNAL);
      if (first < a.bytes.size()) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        (void)::send(c, a.bytes.data() + first, a.bytes.size() - first, MSG_NOSIGNAL);
      }
      if (a.close_after) break;
      if (a.hang_after) {
        while (::read(c, buf, sizeof(buf)) > 0) {
        }
        break;
      }
    }
    ::close(c);
  }

  std::function<Answer(int)> script_;
  std::string dir_, path_;
  int listen_fd_ = -1;
  std::thread accept_;
  std::mutex mu_;
  std::vector<int> open_;
  std::vector<std::thread> conns_;
};

// An HttpServer whose every request the proxy forwards to `up`. `done`
// learns on which thread each request ended; `defer` forwards from a thread
// of its own instead of the handler (no loop: the workers' path).
class Front {
 public:
  Front(ReverseProxy& proxy, const ScriptedUpstream& up, bool defer = false) {
    ServerOptions so;
    so.io_threads = 1;
    so.loop_per_thread = true;
    auto s = HttpServer::Create(
        so, [this, &proxy, &up, defer](HttpRequest req, std::unique_ptr<Responder> res) {
          ForwardHooks h;
          h.repeatable = true;
          const std::thread::id handler = std::this_thread::get_id();
          h.done = [this, handler](const ForwardResult&) {
            std::lock_guard<std::mutex> lock(mu);
            on_loop.push_back(std::this_thread::get_id() == handler);
          };
          if (!defer)
            return proxy.Forward(std::move(req), up.Target(), std::move(res), std::move(h));
          std::thread([&proxy, &up, req = std::move(req), res = std::move(res),
                       h = std::move(h)]() mutable {
            proxy.Forward(std::move(req), up.Target(), std::move(res), std::move(h));
          }).detach();
        });
    EXPECT_TRUE(s.ok());
    server = std::move(*s);
    auto p = server->ListenTcp("127.0.0.1", 0);
    EXPECT_TRUE(p.ok());
    port = *p;
    EXPECT_TRUE(server->Start().ok());
  }
  ~Front() { server->Stop(1000); }
  // Once `n` requests ended (the hook runs just after the answer went out).
  std::vector<bool> OnLoop(size_t n) {
    for (int i = 0; i < 2000; ++i) {
      {
        std::lock_guard<std::mutex> lock(mu);
        if (on_loop.size() >= n) return on_loop;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    std::lock_guard<std::mutex> lock(mu);
    return on_loop;
  }

  std::unique_ptr<HttpServer> server;
  int port = 0;
  std::mutex mu;
  std::vector<bool> on_loop;  // guarded by mu
};

std::optional<testing::RawResponse> Get(RawConn& c, const std::string& path = "/x") {
  if (!c.Send("GET " + path + " HTTP/1.1\r\nHost: t\r\n\r\n")) return std::nullopt;
  return c.ReadResponse(20000);
}

TEST(ProxyEvents, KeptConnectionsServeRequestsOnTheClientsLoop) {
  ScriptedUpstream up([](int) { return Ok(); });
  ReverseProxy proxy({}, ErrorPage);
  Front front(proxy, up);
  RawConn c = RawConn::Tcp(front.port);
  for (int i = 0; i < 20; ++i) {
    auto r = Get(c);
    ASSERT_TRUE(r) << i;
    EXPECT_EQ(r->status, 200) << i;
    EXPECT_EQ(r->body, "ok") << i;
  }
  EXPECT_EQ(up.connections.load(), 1);
  EXPECT_EQ(up.requests.load(), 20);
  // The first made the connection (a worker's job); every later one ended on
  // the loop that received it, with no thread in between.
  std::vector<bool> on_loop = front.OnLoop(20);
  ASSERT_EQ(on_loop.size(), 20u);
  EXPECT_FALSE(on_loop[0]);
  for (size_t i = 1; i < on_loop.size(); ++i) EXPECT_TRUE(on_loop[i]) << i;
}

TEST(ProxyEvents, AKeptConnectionTheUpstreamClosedIsReplacedWithoutAFailure) {
  ScriptedUpstream up([](int) {
    Answer a = Ok();
    a.close_after = true;  // as a server closing an idle kept connection
    return a;
  });
  ReverseProxy proxy({}, ErrorPage);
  Front front(proxy, up);
  RawConn c = RawConn::Tcp(front.port);
  for (int i = 0; i < 6; ++i) {
    auto r = Get(c);
    ASSERT_TRUE(r) << i;
    EXPECT_EQ(r->status, 200) << i << " " << r->body;
  }
  EXPECT_EQ(up.requests.load(), 6);  // each sent once: none failed and none repeated
  EXPECT_EQ(up.connections.load(), 6);
}

TEST(ProxyEvents, ALargeAnswerIsStreamedWholeAndTheConnectionServesOn) {
  const std::string big(300000, 'b');
  ScriptedUpstream up([&big](int n) {
    if (n != 1) return Ok();
    return Chunked(big);
  });
  ProxyOptions o;
  o.max_buffered_body_bytes = 1024;
  ReverseProxy proxy(o, ErrorPage);
  Front front(proxy, up);
  RawConn c = RawConn::Tcp(front.port);
  auto first = Get(c);
  ASSERT_TRUE(first);
  auto r = Get(c, "/big");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, big);
  auto last = Get(c);
  ASSERT_TRUE(last);
  EXPECT_EQ(last->body, "ok");
  EXPECT_EQ(up.connections.load(), 1);
}

TEST(ProxyEvents, AnUpstreamThatDoesNotAnswerRunsOutOfTime) {
  ScriptedUpstream up([](int n) { return n == 0 ? Ok() : Hang(); });
  ProxyOptions o;
  o.response_timeout_ms = 300;
  ReverseProxy proxy(o, ErrorPage);
  Front front(proxy, up);
  RawConn c = RawConn::Tcp(front.port);
  ASSERT_TRUE(Get(c));
  auto r = Get(c);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 503);  // HttpStatusFor(DeadlineExceeded)
  EXPECT_EQ(r->body, "proxy.timeout");
  std::vector<bool> on_loop = front.OnLoop(2);
  ASSERT_EQ(on_loop.size(), 2u);
  EXPECT_TRUE(on_loop[1]);
}

// A body that stops coming: each read of it has idle_timeout_ms.
TEST(ProxyEvents, ABodyThatStopsComingRunsOutOfTime) {
  ScriptedUpstream up([](int n) {
    if (n == 0) return Ok();
    Answer a{Answer::kSend, "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc"};
    a.hang_after = true;
    return a;
  });
  ProxyOptions o;
  o.idle_timeout_ms = 300;
  ReverseProxy proxy(o, ErrorPage);
  Front front(proxy, up);
  RawConn c = RawConn::Tcp(front.port);
  ASSERT_TRUE(Get(c));
  auto r = Get(c);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 503);
  EXPECT_EQ(r->body, "proxy.timeout");
  std::vector<bool> on_loop = front.OnLoop(2);
  ASSERT_EQ(on_loop.size(), 2u);
  EXPECT_TRUE(on_loop[1]);
}

TEST(ProxyEvents, StopEndsAnExchangeWaitingOnTheLoop) {
  ScriptedUpstream up([](int n) { return n == 0 ? Ok() : Hang(); });
  ReverseProxy proxy({}, ErrorPage);
  Front front(proxy, up);
  RawConn c = RawConn::Tcp(front.port);
  ASSERT_TRUE(Get(c));
  ASSERT_TRUE(c.Send("GET /x HTTP/1.1\r\nHost: t\r\n\r\n"));
  while (up.requests.load() < 2) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  proxy.Stop();
  auto r = c.ReadResponse(20000);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 503);
  EXPECT_EQ(r->body, "proxy.stopping");
}

// A connection the loop used is left non-blocking; a worker that reuses it
// (a request forwarded from a thread without a loop) still sends a body far
// larger than the socket's buffer on it.
TEST(ProxyEvents, AWorkerSendsALargeBodyOnAConnectionTheLoopLeftNonBlocking) {
  const std::string big(300000, 'b');
  ScriptedUpstream up([&big](int n) {
    if (n != 1) return Ok();
    return Chunked(big);
  });
  ProxyOptions o;
  o.max_buffered_body_bytes = 1024;  // the second answer goes to a worker, then to its pool
  ReverseProxy proxy(o, ErrorPage);
  {
    Front front(proxy, up);
    RawConn c = RawConn::Tcp(front.port);
    ASSERT_TRUE(Get(c));
    auto r = Get(c, "/big");
    ASSERT_TRUE(r);
    ASSERT_EQ(r->body.size(), big.size());
  }
  Front deferred(proxy, up, /*defer=*/true);
  RawConn c = RawConn::Tcp(deferred.port);
  const std::string body(8 << 20, 'p');
  ASSERT_TRUE(c.Send(
      fmt::format("POST /up HTTP/1.1\r\nHost: t\r\nContent-Length: {}\r\n\r\n", body.size()) +
      body));
  auto r = c.ReadResponse(20000);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, "ok");
  EXPECT_EQ(up.body_bytes.load(), body.size());
  EXPECT_EQ(up.connections.load(), 1);  // the kept one carried it
}

}  // namespace
}  // namespace lathe::net

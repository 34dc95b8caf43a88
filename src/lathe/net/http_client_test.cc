#include "lathe/net/http_client.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <mutex>

#include "lathe/net/http_server.h"

namespace lathe::net {
namespace {

// A port that nothing listens on: bound, read back, released.
int UnusedPort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  socklen_t len = sizeof(addr);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

class HttpClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto server = HttpServer::Create({}, [this](HttpRequest req, std::unique_ptr<Responder> r) {
      {
        std::lock_guard<std::mutex> l(mu_);
        last_ = req;
      }
      if (req.path == "/missing") return r->Send(HttpResponse{404, "application/json", {}, "{}"});
      if (req.path == "/refused") {
        return r->Send(
            HttpResponse{400, "application/json", {{"X-Why", "bad"}}, R"({"error":"no"})"});
      }
      if (req.path == "/stream") {
        auto s = r->StartStream(200, "text/plain");
        for (int i = 0; i < 5; ++i) s->Write("chunk" + std::to_string(i) + ";");
        return;
      }
      r->Send(HttpResponse{200, "application/json", {{"X-Reply", "yes"}}, req.body});
    });
    ASSERT_TRUE(server.ok());
    server_ = std::move(*server);
    auto port = server_->ListenTcp("127.0.0.1", 0);
    ASSERT_TRUE(port.ok());
    port_ = *port;
    ASSERT_TRUE(server_->Start().ok());
  }

  ClientOptions Options() const {
    ClientOptions o;
    o.base_url = "http://127.0.0.1:" + std::to_string(port_);
    return o;
  }

  HttpRequest Last() {
    std::lock_guard<std::mutex> l(mu_);
    return last_;
  }

  std::unique_ptr<HttpServer> server_;
  int port_ = 0;
  std::mutex mu_;
  HttpRequest last_;
};

TEST_F(HttpClientTest, ErrorStatusIsAResponseNotAStatus) {
  HttpClient client(Options());
  auto res = client.Request("GET", "/missing");
  ASSERT_TRUE(res.ok()) << res.status().ToString();
  EXPECT_EQ(res->status, 404);
  EXPECT_EQ(res->content_type, "application/json");
}

TEST_F(HttpClientTest, SendsTokenMethodHeadersAndJsonBody) {
  ClientOptions o = Options();
  o.bearer_token = "s3cret";
  HttpClient client(o);
  auto res = client.Request("PUT", "/things/1?x=1", R"({"a":1})", {{"X-Custom", "v"}});
  ASSERT_TRUE(res.ok()) << res.status().ToString();
  EXPECT_EQ(res->body, R"({"a":1})");
  EXPECT_EQ(FindHeader(res->headers, "X-Reply"), "yes");
  HttpRequest req = Last();
  EXPECT_EQ(req.method, "PUT");
  EXPECT_EQ(req.path, "/things/1");
  EXPECT_EQ(req.query, "x=1");
  EXPECT_EQ(req.Header("Authorization"), "Bearer s3cret");
  EXPECT_EQ(req.Header("Content-Type"), "application/json");
  EXPECT_EQ(req.Header("X-Custom"), "v");
  EXPECT_EQ(req.Header("Expect"), "");
  // Host is the address the client was given, as the server's name checks expect.
  EXPECT_EQ(req.Header("Host"), "127.0.0.1:" + std::to_string(port_));

  auto del = client.Request("DELETE", "/things/1");
  ASSERT_TRUE(del.ok());
  EXPECT_EQ(Last().method, "DELETE");
  EXPECT_EQ(Last().body, "");
}

TEST_F(HttpClientTest, ReusesTheConnection) {
  HttpClient client(Options());
  ASSERT_TRUE(client.Request("GET", "/a").ok());
  std::string first = Last().remote;
  ASSERT_TRUE(client.Request("POST", "/b", "x").ok());
  EXPECT_EQ(Last().remote, first);
}

TEST_F(HttpClientTest, StreamCanStopEarly) {
  HttpClient client(Options());
  std::string all;
  auto status = client.Stream("GET", "/stream", [&](std::string_view d) {
    all += d;
    return true;
  });
  ASSERT_TRUE(status.ok()) << status.status().ToString();
  EXPECT_EQ(*status, 200);
  EXPECT_EQ(all, "chunk0;chunk1;chunk2;chunk3;chunk4;");

  int calls = 0;
  auto stopped = client.Stream("GET", "/stream", [&](std::string_view) { return ++calls < 1; });
  ASSERT_TRUE(stopped.ok()) << stopped.status().ToString();
  EXPECT_EQ(calls, 1);
  // The client is still usable after an aborted transfer.
  EXPECT_TRUE(client.Request("GET", "/after").ok());
}

// A stream asked for may be answered by a plain (Content-Length) error.
TEST_F(HttpClientTest, StreamOfAPlainAnswerGivesItsStatusHeadersAndBody) {
  HttpClient client(Options());
  std::string body;
  int seen_status = 0;
  Headers headers;
  auto status = client.Stream(
      "GET", "/refused",
      [&](std::string_view d) {
        body += d;
        return true;
      },
      {},
      [&](int st, const Headers& h) {
        seen_status = st;
        headers = h;
      });
  ASSERT_TRUE(status.ok()) << status.status().ToString();
  EXPECT_EQ(*status, 400);
  EXPECT_EQ(seen_status, 400);
  EXPECT_EQ(FindHeader(headers, "X-Why"), "bad");
  EXPECT_EQ(body, R"({"error":"no"})");
}

TEST_F(HttpClientTest, ExceptionInStreamCallbackBecomesAStatus) {
  HttpClient client(Options());
  auto status = client.Stream(
      "GET", "/stream", [](std::string_view) -> bool { throw std::runtime_error("bad consumer"); });
  EXPECT_EQ(status.status().code(), Code::kInternal);
}

// A body over the server's limit: it answers 413 and closes while the client
// is still writing; the client reads that answer instead of failing the write.
TEST(HttpClient, ReadsAnAnswerSentBeforeTheBodyWasTaken) {
  ServerOptions so;
  so.max_body_bytes = 1024;
  auto server = HttpServer::Create(so, [](HttpRequest, std::unique_ptr<Responder> r) {
    r->Send(HttpResponse{200, "application/json", {}, "{}"});
  });
  ASSERT_TRUE(server.ok());
  std::string sock = ::testing::TempDir() + "lathe-413-" + std::to_string(::getpid()) + ".sock";
  ASSERT_TRUE((*server)->ListenUnix(sock, 0600).ok());
  ASSERT_TRUE((*server)->Start().ok());
  ClientOptions o;
  o.unix_socket = sock;
  HttpClient client(o);
  auto res = client.Request("POST", "/api/v1/runs", std::string(16 << 20, 'x'));
  ASSERT_TRUE(res.ok()) << res.status().ToString();
  EXPECT_EQ(res->status, 413);
  // The spent connection is not reused: the next request gets a fresh one.
  auto next = client.Request("POST", "/api/v1/runs", "{}");
  ASSERT_TRUE(next.ok()) << next.status().ToString();
  EXPECT_EQ(next->status, 200);
  ::unlink(sock.c_str());
}

TEST(HttpClient, UnavailableWhenNothingListens) {
  ClientOptions tcp;
  tcp.base_url = "http://127.0.0.1:" + std::to_string(UnusedPort());
  auto res = HttpClient(tcp).Request("GET", "/");
  EXPECT_TRUE(res.status().IsUnavailable()) << res.status().ToString();

  ClientOptions unix_socket;
  unix_socket.unix_socket = "/nonexistent-dir-lathe/lathe.sock";
  auto res2 = HttpClient(unix_socket).Request("GET", "/");
  EXPECT_TRUE(res2.status().IsUnavailable()) << res2.status().ToString();
  auto res3 = HttpClient(unix_socket).Stream("GET", "/", [](std::string_view) { return true; });
  EXPECT_TRUE(res3.status().IsUnavailable()) << res3.status().ToString();
}

}  // namespace
}  // namespace lathe::net

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
#include "lathe/os/fd.h"

namespace lathe::net {
namespace {

using namespace std::chrono_literals;
using testing::RawConn;

// Waits are generous (the machine is shared and slow); nothing asserts an
// upper bound on time.
constexpr auto kWait = 20s;

// Threads started by handlers; joined at the end of the test.
class Workers {
 public:
  ~Workers() { JoinAll(); }
  template <typename F>
  void Spawn(F f) {
    std::lock_guard<std::mutex> l(mu_);
    threads_.emplace_back(std::move(f));
  }
  void JoinAll() {
    std::vector<std::thread> ts;
    {
      std::lock_guard<std::mutex> l(mu_);
      ts.swap(threads_);
    }
    for (auto& t : ts) t.join();
  }

 private:
  std::mutex mu_;
  std::vector<std::thread> threads_;
};

// A one-shot signal between threads.
class Event {
 public:
  void Notify() {
    std::lock_guard<std::mutex> l(mu_);
    set_ = true;
    cv_.notify_all();
  }
  bool Wait(std::chrono::milliseconds timeout = kWait) {
    std::unique_lock<std::mutex> l(mu_);
    return cv_.wait_for(l, timeout, [&] { return set_; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool set_ = false;
};

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/lathe-net-XXXXXX";
    path_ = ::mkdtemp(tmpl);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  std::string Path(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

HttpResponse Text(int status, std::string body) {
  return HttpResponse{status, "text/plain", {}, std::move(body)};
}

// "METHOD path q=<q> body=<body>"
Handler EchoHandler() {
  return [](HttpRequest req, std::unique_ptr<Responder> r) {
    std::string q = req.QueryParam("q").value_or("-");
    HttpResponse res = Text(200, req.method + " " + req.path + " q=" + q + " body=" + req.body);
    res.headers.emplace_back("X-Seen", std::string(req.Header("x-test")));
    r->Send(std::move(res));
  };
}

std::unique_ptr<HttpServer> StartTcp(ServerOptions options, Handler handler, int* port) {
  auto server = HttpServer::Create(std::move(options), std::move(handler));
  EXPECT_TRUE(server.ok()) << server.status().ToString();
  auto bound = (*server)->ListenTcp("127.0.0.1", 0);
  EXPECT_TRUE(bound.ok()) << bound.status().ToString();
  *port = *bound;
  EXPECT_TRUE((*server)->Start().ok());
  return std::move(*server);
}

HttpClient TcpClient(int port) {
  ClientOptions o;
  o.base_url = "http://127.0.0.1:" + std::to_string(port);
  o.timeout_ms = 30000;
  return HttpClient(o);
}

// The server's own errors: a JSON object with an "error" string (KServe v2 shape).
void ExpectJsonErrorBody(const std::string& body) {
  auto j = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  ASSERT_TRUE(j.is_object()) << body;
  ASSERT_TRUE(j.contains("error")) << body;
  ASSERT_TRUE(j["error"].is_string()) << body;
  EXPECT_FALSE(j["error"].get<std::string>().empty()) << body;
}

void ExpectJsonError(std::string_view content_type, const std::string& body) {
  EXPECT_EQ(content_type, "application/json");
  ExpectJsonErrorBody(body);
}

void ExpectJsonError(const testing::RawResponse& res) {
  EXPECT_TRUE(res.HeadHas("content-type: application/json")) << res.head;
  ExpectJsonErrorBody(res.body);
}

std::string Get(std::string_view path, std::string_view extra_headers = "") {
  return "GET " + std::string(path) + " HTTP/1.1\r\nHost: x\r\n" + std::string(extra_headers) +
         "\r\n";
}

TEST(HttpServer, CreateRejectsBadOptions) {
  EXPECT_TRUE(HttpServer::Create({}, nullptr).status().IsInvalidArgument());
  ServerOptions o;
  o.io_threads = 0;
  EXPECT_TRUE(HttpServer::Create(o, EchoHandler()).status().IsInvalidArgument());
  o = ServerOptions();
  o.max_tcp_connections = o.max_connections + 1;
  EXPECT_TRUE(HttpServer::Create(o, EchoHandler()).status().IsInvalidArgument());
  o = ServerOptions();
  o.newcomer_connections = o.max_connections;
  EXPECT_TRUE(HttpServer::Create(o, EchoHandler()).status().IsInvalidArgument());
  auto s = HttpServer::Create({}, EchoHandler());
  ASSERT_TRUE(s.ok());
  EXPECT_EQ((*s)->Start().code(), Code::kFailedPrecondition);  // listens nowhere
  EXPECT_TRUE((*s)->ListenTcp("not-an-ip", 0).status().IsInvalidArgument());
}

TEST(HttpServer, GetAndPostEcho) {
  int port = 0;
  auto server = StartTcp({}, EchoHandler(), &port);
  HttpClient client = TcpClient(port);

  auto get = client.Request("GET", "/echo/a%20b?q=x%2By&r", {}, {{"X-Test", "t1"}});
  ASSERT_TRUE(get.ok()) << get.status().ToString();
  EXPECT_EQ(get->status, 200);
  EXPECT_EQ(get->body, "GET /echo/a b q=x+y body=");
  EXPECT_EQ(get->content_type, "text/plain");
  EXPECT_EQ(FindHeader(get->headers, "x-seen"), "t1");
  EXPECT_EQ(FindHeader(get->headers, "server"), "lathe");

  std::string big(100000, 'z');  // larger than one socket read
  auto post = client.Request("POST", "/p", big);
  ASSERT_TRUE(post.ok()) << post.status().ToString();
  EXPECT_EQ(post->status, 200);
  EXPECT_EQ(post->body, "POST /p q=- body=" + big);
}

TEST(HttpServer, KeepAliveServesTwoRequestsOnOneConnection) {
  std::mutex mu;
  std::vector<std::string> remotes;
  int port = 0;
  auto server = StartTcp(
      {},
      [&](HttpRequest req, std::unique_ptr<Responder> r) {
        {
          std::lock_guard<std::mutex> l(mu);
          remotes.push_back(req.remote);
        }
        r->Send(Text(200, req.path));
      },
      &port);
  RawConn conn = RawConn::Tcp(port);
  ASSERT_TRUE(conn.connected());
  for (std::string path : {"/one", "/two"}) {
    ASSERT_TRUE(conn.Send(Get(path)));
    auto res = conn.ReadResponse();
    ASSERT_TRUE(res.has_value()) << path;
    EXPECT_EQ(res->status, 200);
    EXPECT_EQ(res->body, path);
  }
  EXPECT_EQ(server->active_connections(), 1u);
  std::lock_guard<std::mutex> l(mu);
  ASSERT_EQ(remotes.size(), 2u);
  EXPECT_EQ(remotes[0], remotes[1]);  // same client port: one connection
  EXPECT_EQ(remotes[0].rfind("127.0.0.1:", 0), 0u) << remotes[0];
}

// With a loop per thread, connections are dealt to the threads in turn and
// each stays on its own: every request of a connection is handled on one
// thread, and two connections made one after the other on two.
TEST(HttpServer, ALoopPerThreadKeepsEachConnectionOnItsThread) {
  std::mutex mu;
  std::map<std::string, std::set<std::thread::id>> threads;  // by client address
  ServerOptions o;
  o.io_threads = 2;
  o.loop_per_thread = true;
  int port = 0;
  auto server = StartTcp(
      o,
      [&](HttpRequest req, std::unique_ptr<Responder> r) {
        {
          std::lock_guard<std::mutex> l(mu);
          threads[req.remote].insert(std::this_thread::get_id());
        }
        r->Send(Text(200, req.path));
      },
      &port);
  RawConn a = RawConn::Tcp(port);
  RawConn b = RawConn::Tcp(port);
  for (int i = 0; i < 10; ++i) {
    for (RawConn* c : {&a, &b}) {
      ASSERT_TRUE(c->Send(Get("/n")));
      auto res = c->ReadResponse();
      ASSERT_TRUE(res.has_value()) << i;
      EXPECT_EQ(res->status, 200);
    }
  }
  std::lock_guard<std::mutex> l(mu);
  ASSERT_EQ(threads.size(), 2u);
  std::set<std::thread::id> all;
  for (const auto& [remote, ids] : threads) {
    EXPECT_EQ(ids.size(), 1u) << remote;
    all.insert(ids.begin(), ids.end());
  }
  EXPECT_EQ(all.size(), 2u);
}

TEST(HttpServer, PipelinedRequestsAreAnsweredInOrder) {
  Workers workers;
  int port = 0;
  auto server = StartTcp(
      {},
      [&](HttpRequest req, std::unique_ptr<Responder> r) {
        if (req.path == "/slow") {
          workers.Spawn([r = std::move(r)]() mutable {
            std::this_thread::sleep_for(100ms);
            r->Send(Text(200, "slow"));
          });
          return;
        }
        r->Send(Text(200, "fast"));
      },
      &port);
  RawConn conn = RawConn::Tcp(port);
  ASSERT_TRUE(conn.Send(Get("/slow") + Get("/fast") + Get("/slow")));
  for (std::string want : {"slow", "fast", "slow"}) {
    auto res = conn.ReadResponse();
    ASSERT_TRUE(res.has_value());
    EXPECT_EQ(res->body, want);
  }
}

TEST(HttpServer, ConnectionCloseIsHonoured) {
  int port = 0;
  auto server = StartTcp({}, EchoHandler(), &port);
  RawConn conn = RawConn::Tcp(port);
  ASSERT_TRUE(conn.Send(Get("/bye", "Connection: close\r\n")));
  auto res = conn.ReadResponse();
  ASSERT_TRUE(res.has_value());
  EXPECT_EQ(res->status, 200);
  EXPECT_TRUE(res->HeadHas("connection: close")) << res->head;
  EXPECT_TRUE(conn.WaitClosed());
}

TEST(HttpServer, OversizedBodyGets413) {
  ServerOptions o;
  o.max_body_bytes = 1024;
  int port = 0;
  auto server = StartTcp(o, EchoHandler(), &port);

  RawConn conn = RawConn::Tcp(port);
  std::string body(4096, 'b');
  ASSERT_TRUE(conn.Send("POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 4096\r\n\r\n" + body));
  auto res = conn.ReadResponse();
  ASSERT_TRUE(res.has_value());
  EXPECT_EQ(res->status, 413);
  ExpectJsonError(*res);
  EXPECT_TRUE(conn.WaitClosed());

  // Chunked: the limit is only known to be crossed while reading.
  RawConn chunked = RawConn::Tcp(port);
  std::string chunk(800, 'c');
  ASSERT_TRUE(
      chunked.Send("POST /x HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                   "320\r\n" +
                   chunk + "\r\n320\r\n" + chunk + "\r\n0\r\n\r\n"));
  auto res2 = chunked.ReadResponse();
  ASSERT_TRUE(res2.has_value());
  EXPECT_EQ(res2->status, 413);
  ExpectJsonError(*res2);

  auto via_client = TcpClient(port).Request("POST", "/x", body);
  ASSERT_TRUE(via_client.ok()) << via_client.status().ToString();
  EXPECT_EQ(via_client->status, 413);
  ExpectJsonError(via_client->content_type, via_client->body);
  auto small = TcpClient(port).Request("POST", "/x", "ok");
  ASSERT_TRUE(small.ok());
  EXPECT_EQ(small->status, 200);
}

TEST(HttpServer, OversizedHeaderGets431) {
  ServerOptions o;
  o.max_header_bytes = 1024;
  int port = 0;
  auto server = StartTcp(o, EchoHandler(), &port);
  RawConn conn = RawConn::Tcp(port);
  ASSERT_TRUE(conn.Send(Get("/x", "X-Big: " + std::string(4000, 'h') + "\r\n")));
  auto res = conn.ReadResponse();
  ASSERT_TRUE(res.has_value());
  EXPECT_EQ(res->status, 431);
  ExpectJsonError(*res);
  EXPECT_TRUE(conn.WaitClosed());
}

TEST(HttpServer, MalformedRequestGets400) {
  int port = 0;
  auto server = StartTcp({}, EchoHandler(), &port);
  RawConn conn = RawConn::Tcp(port);
  ASSERT_TRUE(conn.Send("GARBAGE\x01 / HTTP/1.1\r\n\r\n"));
  auto res = conn.ReadResponse();
  ASSERT_TRUE(res.has_value());
  EXPECT_EQ(res->status, 400);
  ExpectJsonError(*res);
}

// Framing two parsers in a row could read differently is refused and the
// connection closed, so nothing after it is read as another request.
TEST(HttpServer, AmbiguousFramingIsRefusedAndCloses) {
  int port = 0;
  auto server = StartTcp({}, EchoHandler(), &port);
  const std::string smuggled = "GET /second HTTP/1.1\r\nHost: x\r\n\r\n";
  const std::vector<std::pair<std::string, int>> cases = {
      {"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked, identity\r\n\r\n0\r\n\r\n", 400},
      {"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n", 400},
      {"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: xchunked\r\nContent-Length: 0\r\n\r\n",
       400},
      {"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: identity\r\n\r\n", 501},
      {"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: "
       "chunked\r\n\r\n0\r\n\r\n",
       400},
      {"GET / HTTP/1.1\r\nHost: x\r\nX-A: 1\r\n folded\r\n\r\n", 400},
      {"GET / HTTP/1.1\r\nHost: x\r\nX-A: 1\r\n\tfolded\r\n\r\n", 400},
      {"GET / HTTP/1.1\r\nHost: x\r\nHost: y\r\n\r\n", 400},
  };
  for (const auto& [request, status] : cases) {
    RawConn conn = RawConn::Tcp(port);
    ASSERT_TRUE(conn.Send(request + smuggled));
    auto res = conn.ReadResponse();
    ASSERT_TRUE(res.has_value()) << request;
    EXPECT_EQ(res->status, status) << request;
    std::string rest;
    EXPECT_TRUE(conn.WaitClosed(20000, &rest)) << request;
    EXPECT_EQ(rest.find("HTTP/1.1"), std::string::npos) << request << rest;
  }
  // Exactly "chunked" (any case, spaces around) is framing as it should be.
  RawConn conn = RawConn::Tcp(port);
  ASSERT_TRUE(conn.Send(
      "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding:  Chunked \r\n\r\n3\r\nabc\r\n0\r\n\r\n"));
  auto res = conn.ReadResponse();
  ASSERT_TRUE(res.has_value());
  EXPECT_EQ(res->status, 200);
}

TEST(HttpServer, AHeaderInPiecesIsStillCheckedWhole) {
  int port = 0;
  auto server = StartTcp({}, EchoHandler(), &port);
  RawConn conn = RawConn::Tcp(port);
  ASSERT_TRUE(conn.Send("GET / HTTP/1.1\r\nHost: x\r\nX-A: 1\r\n"));
  std::this_thread::sleep_for(50ms);
  ASSERT_TRUE(conn.Send(" folded\r\n\r\n"));
  auto res = conn.ReadResponse();
  ASSERT_TRUE(res.has_value());
  EXPECT_EQ(res->status, 400);
  RawConn ok = RawConn::Tcp(port);
  ASSERT_TRUE(ok.Send("GET / HTTP/1.1\r\nHo"));
  std::this_thread::sleep_for(50ms);
  ASSERT_TRUE(ok.Send("st: x\r\n\r\n"));
  res = ok.ReadResponse();
  ASSERT_TRUE(res.has_value());
  EXPECT_EQ(res->status, 200);
}

TEST(HttpServer, StalledHeaderIsAnswered408AndClosed) {
  ServerOptions o;
  o.first_request_timeout_ms = 200;
  o.header_timeout_ms = 200;
  int port = 0;
  auto server = StartTcp(o, EchoHandler(), &port);
  RawConn conn = RawConn::Tcp(port);
  ASSERT_TRUE(conn.Send("GET /slowloris HTTP/1.1\r\nHost: x\r\n"));  // never finished
  auto res = conn.ReadResponse();
  ASSERT_TRUE(res.has_value());
  EXPECT_EQ(res->status, 408);
  ExpectJsonError(*res);
  EXPECT_TRUE(conn.WaitClosed());

  RawConn silent = RawConn::Tcp(port);  // connects, sends nothing
  EXPECT_TRUE(silent.WaitClosed());
}

TEST(HttpServer, ANewConnectionThatSendsNothingIsClosedSooner) {
  ServerOptions o;
  o.first_request_timeout_ms = 200;
  o.header_timeout_ms = 600000;  // neither of these closes it within the test
  o.idle_timeout_ms = 600000;
  int port = 0;
  auto server = StartTcp(o, EchoHandler(), &port);
  RawConn silent = RawConn::Tcp(port);
  EXPECT_TRUE(silent.WaitClosed());
  // Once a request came, the keep-alive idle timeout applies instead.
  RawConn conn = RawConn::Tcp(port);
  ASSERT_TRUE(conn.Send(Get("/x")));
  ASSERT_TRUE(conn.ReadResponse().has_value());
  EXPECT_FALSE(conn.WaitClosed(1000));
}

TEST(HttpServer, IdleKeepAliveConnectionIsClosed) {
  ServerOptions o;
  o.idle_timeout_ms = 200;
  int port = 0;
  auto server = StartTcp(o, EchoHandler(), &port);
  RawConn conn = RawConn::Tcp(port);
  ASSERT_TRUE(conn.Send(Get("/x")));
  ASSERT_TRUE(conn.ReadResponse().has_value());
  EXPECT_TRUE(conn.WaitClosed());
}

TEST(HttpServer, Expect100ContinueGetsInterimResponse) {
  int port = 0;
  auto server = StartTcp({}, EchoHandler(), &port);
  RawConn conn = RawConn::Tcp(port);
  ASSERT_TRUE(conn.Send(
      "POST /e HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n"));
  auto interim = conn.ReadResponse(20000, /*keep_interim=*/true);
  ASSERT_TRUE(interim.has_value());
  EXPECT_EQ(interim->status, 100);
  ASSERT_TRUE(conn.Send("hello"));
  auto res = conn.ReadResponse();
  ASSERT_TRUE(res.has_value());
  EXPECT_EQ(res->body, "POST /e q=- body=hello");
}

TEST(HttpServer, ResponderCompletesFromAnotherThreadAfterHandlerReturned) {
  Workers workers;
  std::atomic<bool> handler_returned{false};
  int port = 0;
  auto server = StartTcp(
      {},
      [&](HttpRequest req, std::unique_ptr<Responder> r) {
        workers.Spawn([&, r = std::move(r)]() mutable {
          while (!handler_returned) std::this_thread::sleep_for(1ms);
          std::this_thread::sleep_for(50ms);
          r->Send(Text(201, "late"));
        });
        handler_returned = true;
      },
      &port);
  auto res = TcpClient(port).Request("GET", "/async");
  ASSERT_TRUE(res.ok()) << res.status().ToString();
  EXPECT_EQ(res->status, 201);
  EXPECT_EQ(res->body, "late");
}

TEST(HttpServer, DroppedResponderOrThrowingHandlerGives500) {
  int port = 0;
  auto server = StartTcp(
      {},
      [](HttpRequest req, std::unique_ptr<Responder> r) {
        if (req.path == "/throw") throw std::runtime_error("boom");
        // "/drop": r goes out of scope unanswered.
      },
      &port);
  HttpClient client = TcpClient(port);
  for (const char* path : {"/drop", "/throw", "/drop"}) {  // the connection stays usable
    auto res = client.Request("GET", path);
    ASSERT_TRUE(res.ok()) << res.status().ToString();
    EXPECT_EQ(res->status, 500) << path;
    ExpectJsonError(res->content_type, res->body);
  }
}

TEST(HttpServer, NoContentHasNoBody) {
  int port = 0;
  auto server = StartTcp(
      {},
      [](HttpRequest, std::unique_ptr<Responder> r) {
        r->Send(HttpResponse{204, "", {}, "ignored"});
      },
      &port);
  RawConn conn = RawConn::Tcp(port);
  ASSERT_TRUE(conn.Send(Get("/a") + Get("/b")));
  for (int i = 0; i < 2; ++i) {
    auto res = conn.ReadResponse();
    ASSERT_TRUE(res.has_value());
    EXPECT_EQ(res->status, 204);
    EXPECT_FALSE(res->HeadHas("content-length")) << res->head;
  }
}

// The head of a whole answer is the server's to frame: its own Server,
// Content-Length and Connection, the handler's other fields in order.
TEST(HttpServer, TheServerFramesTheAnswerWhateverTheHandlerSays) {
  int port = 0;
  auto server = StartTcp(
      {},
      [](HttpRequest, std::unique_ptr<Responder> r) {
        r->Send(HttpResponse{201,
                             "text/plain",
                             {{"X-One", "1"},
                              {"Content-Length", "999"},
                              {"Transfer-Encoding", "chunked"},
                              {"Connection", "upgrade"},
                              {"X-Two", "2"}},
                             "made"});
      },
      &port);
  RawConn conn = RawConn::Tcp(port);
  ASSERT_TRUE(conn.Send(Get("/a") + Get("/b", "Connection: close\r\n")));
  auto first = conn.ReadResponse();
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->status, 201);
  EXPECT_EQ(first->body, "made");
  EXPECT_EQ(first->head,
            "HTTP/1.1 201 Created\r\nServer: lathe\r\nContent-Type: text/plain\r\n"
            "X-One: 1\r\nX-Two: 2\r\nContent-Length: 4");
  auto second = conn.ReadResponse();
  ASSERT_TRUE(second.has_value());
  EXPECT_TRUE(second->HeadHas("\r\nConnection: close\r\n")) << second->head;
  EXPECT_TRUE(conn.WaitClosed());
}

// A field that would split the answer (CR or LF in a value, a name that is
// not a token) is never sent: the client gets 500 and the connection serves on.
TEST(HttpServer, AFieldThatWouldSplitTheAnswerGives500) {
  int port = 0;
  auto server = StartTcp(
      {},
      [](HttpRequest req, std::unique_ptr<Responder> r) {
        Headers h;
        if (req.path == "/value") h = {{"X-Evil", "a\r\nSet-Cookie: x=1"}};
        if (req.path == "/name") h = {{"X Evil", "a"}};
        r->Send(HttpResponse{200, "text/plain", h, "body"});
      },
      &port);
  RawConn conn = RawConn::Tcp(port);
  ASSERT_TRUE(conn.Send(Get("/value") + Get("/name") + Get("/fine")));
  for (int status : {500, 500, 200}) {
    auto res = conn.ReadResponse();
    ASSERT_TRUE(res.has_value());
    EXPECT_EQ(res->status, status) << res->head;
    EXPECT_FALSE(res->HeadHas("set-cookie")) << res->head;
    if (status == 500) ExpectJsonError(*res);
  }
}

// The same for a streamed answer's head: 500, and the field is not sent.
TEST(HttpServer, AStreamFieldThatWouldSplitTheAnswerGives500) {
  int port = 0;
  auto server = StartTcp(
      {},
      [](HttpRequest, std::unique_ptr<Responder> r) {
        auto stream = r->StartStream(200, "text/plain", {{"X-Evil", "a\r\nSet-Cookie: x=1"}});
        stream->Write("data");
        stream->Close();
      },
      &port);
  RawConn conn = RawConn::Tcp(port);
  ASSERT_TRUE(conn.Send(Get("/s")));
  auto res = conn.ReadResponse();
  ASSERT_TRUE(res.has_value());
  EXPECT_EQ(res->status, 500) << res->head;
  EXPECT_FALSE(res->HeadHas("set-cookie")) << res->head;
}

TEST(HttpServer, StreamDeliversChunksAsTheyAreWritten) {
  Workers workers;
  Event got_first;
  int port = 0;
  auto server = StartTcp(
      {},
      [&](HttpRequest, std::unique_ptr<Responder> r) {
        workers.Spawn([&, r = std::move(r)]() mutable {
          auto stream = r->StartStream(200, "text/event-stream");
          EXPECT_TRUE(stream->Write("data: 1\n\n"));
          // The second chunk waits until the client has seen the first: proves the
          // first was not buffered until the end.
          EXPECT_TRUE(got_first.Wait());
          EXPECT_TRUE(stream->Write("data: 2\n\n"));
          stream->Close();
          EXPECT_FALSE(stream->Write("late"));
        });
      },
      &port);
  std::vector<std::string> seen;
  std::string all;
  auto status = TcpClient(port).Stream("GET", "/events", [&](std::string_view data) {
    all += data;
    if (all.find("data: 1\n\n") != std::string::npos) got_first.Notify();
    return true;
  });
  ASSERT_TRUE(status.ok()) << status.status().ToString();
  EXPECT_EQ(*status, 200);
  EXPECT_EQ(all, "data: 1\n\ndata: 2\n\n");
}

TEST(HttpServer, StreamWriteFailsAfterClientDisconnects) {
  Workers workers;
  Event writer_done;
  std::atomic<bool> saw_gone{false};
  int port = 0;
  auto server = StartTcp(
      {},
      [&](HttpRequest, std::unique_ptr<Responder> r) {
        workers.Spawn([&, r = std::move(r)]() mutable {
          auto stream = r->StartStream(200, "text/event-stream");
          auto deadline = std::chrono::steady_clock::now() + kWait;
          while (std::chrono::steady_clock::now() < deadline && stream->Write("tick\n")) {
            std::this_thread::sleep_for(5ms);
          }
          saw_gone = stream->ClientGone();
          writer_done.Notify();
        });
      },
      &port);
  int chunks = 0;
  auto status = TcpClient(port).Stream("GET", "/ticks", [&](std::string_view) {
    return ++chunks < 3;  // hang up after a few chunks
  });
  ASSERT_TRUE(status.ok()) << status.status().ToString();
  EXPECT_EQ(*status, 200);
  ASSERT_TRUE(writer_done.Wait());
  EXPECT_TRUE(saw_gone);
}

TEST(HttpServer, StreamWrittenInsideTheHandlerDoesNotBlock) {
  int port = 0;
  auto server = StartTcp(
      {},
      [](HttpRequest, std::unique_ptr<Responder> r) {
        auto stream = r->StartStream(200, "text/plain", {{"X-Kind", "inline"}});
        for (int i = 0; i < 3; ++i) EXPECT_TRUE(stream->Write("line" + std::to_string(i) + "\n"));
      },
      &port);  // destroying `stream` ends the response
  RawConn conn = RawConn::Tcp(port);
  ASSERT_TRUE(conn.Send(Get("/inline") + Get("/inline")));  // keep-alive after a stream
  for (int i = 0; i < 2; ++i) {
    auto res = conn.ReadResponse();
    ASSERT_TRUE(res.has_value());
    EXPECT_TRUE(res->HeadHas("transfer-encoding: chunked"));
    EXPECT_TRUE(res->HeadHas("x-kind: inline"));
    EXPECT_EQ(res->body, "line0\nline1\nline2\n");
  }
}

TEST(HttpServer, UnixSocketReportsPeerCredentials) {
  TempDir dir;
  std::string path = dir.Path("lathe.sock");
  std::promise<HttpRequest> seen;
  auto server = HttpServer::Create({}, [&](HttpRequest req, std::unique_ptr<Responder> r) {
    seen.set_value(req);
    r->Send(Text(200, "hi"));
  });
  ASSERT_TRUE(server.ok());
  ASSERT_TRUE((*server)->ListenUnix(path, 0600).ok());
  ASSERT_TRUE((*server)->Start().ok());
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0600u);

  ClientOptions o;
  o.unix_socket = path;
  auto res = HttpClient(o).Request("GET", "/whoami");
  ASSERT_TRUE(res.ok()) << res.status().ToString();
  EXPECT_EQ(res->body, "hi");
  HttpRequest req = seen.get_future().get();
  ASSERT_TRUE(req.peer.has_value());
  EXPECT_EQ(req.peer->uid, ::getuid());
  EXPECT_EQ(req.peer->gid, ::getgid());
  EXPECT_EQ(req.peer->pid, ::getpid());
  EXPECT_EQ(req.remote, "unix");

  (*server)->Stop();
  EXPECT_FALSE(std::filesystem::exists(path));  // Stop removes its socket file
}

// Binds a unix socket at `path` and closes it without unlinking: the file a
// killed server leaves behind.
void MakeStaleSocket(const std::string& path) {
  int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ::close(fd);
}

TEST(HttpServer, StaleUnixSocketIsReplaced) {
  TempDir dir;
  std::string path = dir.Path("stale.sock");
  MakeStaleSocket(path);
  ASSERT_TRUE(std::filesystem::exists(path));
  auto server = HttpServer::Create({}, EchoHandler());
  ASSERT_TRUE((*server)->ListenUnix(path, 0666).ok());
  ASSERT_TRUE((*server)->Start().ok());
  ClientOptions o;
  o.unix_socket = path;
  auto res = HttpClient(o).Request("GET", "/x");
  ASSERT_TRUE(res.ok()) << res.status().ToString();
  EXPECT_EQ(res->status, 200);
}

TEST(HttpServer, LiveUnixSocketIsNotTaken) {
  TempDir dir;
  std::string path = dir.Path("live.sock");
  auto first = HttpServer::Create({}, EchoHandler());
  ASSERT_TRUE((*first)->ListenUnix(path, 0600).ok());
  ASSERT_TRUE((*first)->Start().ok());

  auto second = HttpServer::Create({}, EchoHandler());
  Status st = (*second)->ListenUnix(path, 0600);
  EXPECT_EQ(st.code(), Code::kAlreadyExists) << st.ToString();
  (*second)->Stop();

  ClientOptions o;
  o.unix_socket = path;
  auto res = HttpClient(o).Request("GET", "/still-first");
  ASSERT_TRUE(res.ok()) << res.status().ToString();
  EXPECT_EQ(res->status, 200);

  std::string file = dir.Path("regular");
  std::ofstream(file) << "keep me";
  EXPECT_EQ((*second)->ListenUnix(file, 0600).code(), Code::kFailedPrecondition);  // stopped
  auto third = HttpServer::Create({}, EchoHandler());
  EXPECT_EQ((*third)->ListenUnix(file, 0600).code(), Code::kAlreadyExists);
  EXPECT_TRUE(std::filesystem::is_regular_file(file));
}

TEST(HttpServer, TcpPortInUseIsAlreadyExists) {
  int port = 0;
  auto server = StartTcp({}, EchoHandler(), &port);
  auto other = HttpServer::Create({}, EchoHandler());
  EXPECT_EQ((*other)->ListenTcp("127.0.0.1", port).status().code(), Code::kAlreadyExists);
}

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

TEST(HttpServer, GracefulStopFinishesInFlightRequest) {
  Workers workers;
  Event in_handler;
  int port = 0;
  auto server = StartTcp(
      {},
      [&](HttpRequest, std::unique_ptr<Responder> r) {
        workers.Spawn([&, r = std::move(r)]() mutable {
          in_handler.Notify();
          std::this_thread::sleep_for(300ms);
          r->Send(Text(200, "finished"));
        });
      },
      &port);
  auto pending =
      std::async(std::launch::async, [port] { return TcpClient(port).Request("GET", "/slow"); });
  ASSERT_TRUE(in_handler.Wait());
  server->Stop(20000);
  auto res = pending.get();
  ASSERT_TRUE(res.ok()) << res.status().ToString();
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(res->body, "finished");
  EXPECT_TRUE(TcpClient(port).Request("GET", "/after").status().IsUnavailable());
}

TEST(HttpServer, StopDoesNotHangOnAStreamWriterOrALateResponder) {
  Workers workers;
  Event streaming;
  std::unique_ptr<Responder> parked;  // answered after the server is gone
  std::mutex mu;
  std::atomic<bool> write_failed{false};
  int port = 0;
  auto server = StartTcp(
      {},
      [&](HttpRequest req, std::unique_ptr<Responder> r) {
        if (req.path == "/park") {
          std::lock_guard<std::mutex> l(mu);
          parked = std::move(r);
          return;
        }
        workers.Spawn([&, r = std::move(r)]() mutable {
          auto stream = r->StartStream(200, "text/event-stream");
          while (stream->Write("x")) streaming.Notify();
          write_failed = true;
        });
      },
      &port);
  auto reader = std::async(std::launch::async, [port] {
    return TcpClient(port).Stream("GET", "/stream", [](std::string_view) { return true; });
  });
  RawConn parked_conn = RawConn::Tcp(port);
  ASSERT_TRUE(parked_conn.Send(Get("/park")));
  ASSERT_TRUE(streaming.Wait());
  for (auto until = std::chrono::steady_clock::now() + kWait;; std::this_thread::sleep_for(1ms)) {
    std::lock_guard<std::mutex> l(mu);
    if (parked || std::chrono::steady_clock::now() > until) break;
  }
  server->Stop(100);
  workers.JoinAll();
  EXPECT_TRUE(write_failed);
  (void)reader.get();  // ended, one way or another
  server.reset();
  std::lock_guard<std::mutex> l(mu);
  ASSERT_NE(parked, nullptr);
  parked->Send(Text(200, "nobody listens"));  // must not crash
  parked.reset();
}

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

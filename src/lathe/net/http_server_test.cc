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

}  // namespace
}  // namespace lathe::net

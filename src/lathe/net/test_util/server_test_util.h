// Helpers shared by the HTTP server's tests (http_server_test.cc,
// http_server_limits_test.cc, http_tunnel_test.cc): a server on a free
// port, clients, and the checks of the server's own error answers.
// Test-only.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "lathe/net/http_client.h"
#include "lathe/net/http_server.h"
#include "lathe/net/test_util/raw_conn.h"

namespace lathe::net::testing {

using namespace std::chrono_literals;

// Waits are generous (the machine is shared and slow); nothing asserts an
// upper bound on time.
inline constexpr auto kWait = 20s;

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

inline HttpResponse Text(int status, std::string body) {
  return HttpResponse{status, "text/plain", {}, std::move(body)};
}

// "METHOD path q=<q> body=<body>"
inline Handler EchoHandler() {
  return [](HttpRequest req, std::unique_ptr<Responder> r) {
    std::string q = req.QueryParam("q").value_or("-");
    HttpResponse res = Text(200, req.method + " " + req.path + " q=" + q + " body=" + req.body);
    res.headers.emplace_back("X-Seen", std::string(req.Header("x-test")));
    r->Send(std::move(res));
  };
}

inline std::unique_ptr<HttpServer> StartTcp(ServerOptions options, Handler handler, int* port) {
  auto server = HttpServer::Create(std::move(options), std::move(handler));
  EXPECT_TRUE(server.ok()) << server.status().ToString();
  auto bound = (*server)->ListenTcp("127.0.0.1", 0);
  EXPECT_TRUE(bound.ok()) << bound.status().ToString();
  *port = *bound;
  EXPECT_TRUE((*server)->Start().ok());
  return std::move(*server);
}

inline HttpClient TcpClient(int port) {
  ClientOptions o;
  o.base_url = "http://127.0.0.1:" + std::to_string(port);
  o.timeout_ms = 30000;
  return HttpClient(o);
}

// The server's own errors: a JSON object with an "error" string (KServe v2 shape).
inline void ExpectJsonErrorBody(const std::string& body) {
  auto j = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  ASSERT_TRUE(j.is_object()) << body;
  ASSERT_TRUE(j.contains("error")) << body;
  ASSERT_TRUE(j["error"].is_string()) << body;
  EXPECT_FALSE(j["error"].get<std::string>().empty()) << body;
}

inline void ExpectJsonError(std::string_view content_type, const std::string& body) {
  EXPECT_EQ(content_type, "application/json");
  ExpectJsonErrorBody(body);
}

inline void ExpectJsonError(const RawResponse& res) {
  EXPECT_TRUE(res.HeadHas("content-type: application/json")) << res.head;
  ExpectJsonErrorBody(res.body);
}

inline std::string Get(std::string_view path, std::string_view extra_headers = "") {
  return "GET " + std::string(path) + " HTTP/1.1\r\nHost: x\r\n" + std::string(extra_headers) +
         "\r\n";
}

}  // namespace lathe::net::testing

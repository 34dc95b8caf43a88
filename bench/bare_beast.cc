// A bare Boost.Beast HTTP/1.1 server: the ceiling `lathe serve` is compared
// with in bench/serve_bench.py. It reads each request whole (so a POST body
// costs it the same reads as it costs lathe), answers a fixed small JSON body,
// keeps connections alive, and does nothing else: no routing, no parsing of
// the body, no queue, no worker thread.
//
// With SMALL_BYTES and LARGE_BYTES it is a static upstream instead (for
// bench/proxy.sh): a target starting with /large answers LARGE_BYTES bytes of
// text/plain, any other SMALL_BYTES, both made once at start-up.
//
// Built by serve_bench.py: g++ -O2 -std=c++20 bench/bare_beast.cc -pthread
// Usage: bare_beast PORT [IO_THREADS [SMALL_BYTES LARGE_BYTES]]
//   (127.0.0.1 only; prints "ready PORT")
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using boost::system::error_code;

constexpr const char* kBody = R"({"hello":"world"})";

// The static bodies (when g_static); constant once main has set them.
bool g_static = false;
std::string g_small;
std::string g_large;

class Session : public std::enable_shared_from_this<Session> {
 public:
  explicit Session(tcp::socket socket) : socket_(std::move(socket)) {}
  void Read() {
    req_ = {};
    http::async_read(socket_, buffer_, req_,
                     [self = shared_from_this()](error_code ec, size_t) { self->OnRead(ec); });
  }

 private:
  void OnRead(error_code ec) {
    if (ec) return Close();
    res_ = {};
    res_.result(http::status::ok);
    res_.version(req_.version());
    res_.set(http::field::server, "bare");
    res_.keep_alive(req_.keep_alive());
    if (!g_static) {
      res_.set(http::field::content_type, "application/json");
      res_.body() = kBody;
    } else {
      res_.set(http::field::content_type, "text/plain");
      res_.body() = req_.target().starts_with("/large") ? g_large : g_small;
    }
    res_.prepare_payload();
    http::async_write(socket_, res_, [self = shared_from_this()](error_code ec, size_t) {
      if (ec || !self->res_.keep_alive()) return self->Close();
      self->Read();
    });
  }
  void Close() {
    error_code ignored;
    socket_.shutdown(tcp::socket::shutdown_send, ignored);
  }

  tcp::socket socket_;
  beast::flat_buffer buffer_;
  http::request<http::string_body> req_;
  http::response<http::string_body> res_;
};

void Accept(asio::io_context& ioc, tcp::acceptor& acceptor) {
  acceptor.async_accept(asio::make_strand(ioc), [&](error_code ec, tcp::socket socket) {
    if (!ec) {
      socket.set_option(tcp::no_delay(true), ec);
      std::make_shared<Session>(std::move(socket))->Read();
    }
    Accept(ioc, acceptor);
  });
}

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: bare_beast PORT [IO_THREADS [SMALL_BYTES LARGE_BYTES]]\n");
    return 2;
  }
  int threads = argc > 2 ? std::atoi(argv[2]) : 1;
  if (argc > 4) {
    g_static = true;
    g_small.assign(std::strtoul(argv[3], nullptr, 10), 'x');
    g_large.assign(std::strtoul(argv[4], nullptr, 10), 'x');
  }
  asio::io_context ioc(threads);
  tcp::acceptor acceptor(
      ioc, {asio::ip::make_address("127.0.0.1"), static_cast<unsigned short>(std::atoi(argv[1]))});
  std::printf("ready %d\n", acceptor.local_endpoint().port());
  std::fflush(stdout);
  Accept(ioc, acceptor);
  std::vector<std::thread> pool;
  for (int i = 1; i < threads; ++i) pool.emplace_back([&] { ioc.run(); });
  ioc.run();
  for (auto& t : pool) t.join();
}

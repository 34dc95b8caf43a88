#include "lathe/net/http_client.h"

// Boost.Beast's synchronous client, not libcurl: every `lathe` command and
// every per-run monitor is a fresh process, and libcurl brings ~28 shared
// libraries (Kerberos, LDAP, GnuTLS, ...) whose loading dominated start-up.
// We only speak HTTP/1.1 to our own daemon over a unix socket or TCP, plain
// or TLS (OpenSSL, which the binary links already), which Beast covers.
#include <sys/socket.h>
#include <sys/time.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>

#include <limits>
#include <optional>

#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "lathe/os/stream_socket.h"

namespace lathe::net {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using boost::system::error_code;

struct HttpClient::Conn {
  asio::io_context ioc;
  std::optional<asio::local::stream_protocol::socket> unix_sock;
  std::optional<asio::ip::tcp::socket> tcp_sock;  // moved into `tls` for https
  std::optional<asio::ssl::context> tls_ctx;
  std::optional<beast::ssl_stream<asio::ip::tcp::socket>> tls;
  beast::flat_buffer buffer;
  bool used = false;  // has carried a request: may have been closed by the peer
};

namespace {

struct Target {
  std::string host = "localhost";
  std::string port = "80";
  bool tls = false;  // https://
};

Target ParseBaseUrl(const std::string& url) {
  Target t;
  std::string_view s = url;
  if (s.substr(0, 8) == "https://") {
    t.tls = true;
    t.port = "443";
  }
  if (auto p = s.find("://"); p != std::string_view::npos) s.remove_prefix(p + 3);
  if (auto slash = s.find('/'); slash != std::string_view::npos) s = s.substr(0, slash);
  if (auto colon = s.rfind(':'); colon != std::string_view::npos) {
    t.host = std::string(s.substr(0, colon));
    t.port = std::string(s.substr(colon + 1));
  } else if (!s.empty()) {
    t.host = std::string(s);
  }
  if (t.host.size() > 2 && t.host.front() == '[' && t.host.back() == ']')  // IPv6: [::1]
    t.host = t.host.substr(1, t.host.size() - 2);
  return t;
}

// The Host header: over TCP the authority of base_url as written
// ("127.0.0.1:8421", "[::1]:8421"), which the daemon checks against its
// names (api/host_check.h); over a unix socket a placeholder.
std::string HostHeader(const ClientOptions& o) {
  if (!o.unix_socket.empty()) return "lathe";
  std::string_view s = o.base_url;
  if (auto p = s.find("://"); p != std::string_view::npos) s.remove_prefix(p + 3);
  if (auto slash = s.find('/'); slash != std::string_view::npos) s = s.substr(0, slash);
  return s.empty() ? "localhost" : std::string(s);
}

// Blocking reads and writes give up after timeout_ms (0: never).
void SetTimeouts(int fd, int timeout_ms) { (void)os::SetSocketTimeouts(fd, timeout_ms); }

Status ErrorStatus(const error_code& ec, std::string_view what) {
  std::string msg = std::string(what) + ": " + ec.message();
  if (ec == asio::error::would_block || ec == asio::error::try_again ||
      ec == beast::error::timeout) {
    return Status::DeadlineExceeded(msg);
  }
  return Status::Unavailable(msg);
}

bhttp::request<bhttp::string_body> BuildRequest(std::string_view method, std::string_view target,
                                                std::string_view body, const Headers& headers,
                                                const ClientOptions& o, const std::string& host) {
  bhttp::request<bhttp::string_body> req;
  req.method_string(beast::string_view(method.data(), method.size()));
  req.target(beast::string_view(target.data(), target.size()));
  req.version(11);
  req.set(bhttp::field::host, host);
  req.set(bhttp::field::user_agent, "lathe");
  if (!o.bearer_token.empty()) req.set(bhttp::field::authorization, "Bearer " + o.bearer_token);
  bool has_type = false;
  for (const auto& [k, v] : headers) {
    if (EqualsIgnoreCase(k, "Host")) {  // a caller's Host (a run origin) replaces the URL's
      req.set(bhttp::field::host, v);
      continue;
    }
    req.insert(k, v);
    if (EqualsIgnoreCase(k, "Content-Type")) has_type = true;
  }
  if (!body.empty() && !has_type) req.set(bhttp::field::content_type, "application/json");
  req.body() = std::string(body);
  req.prepare_payload();
  return req;
}

// Certificate checks as a browser makes them: a chain to a trusted CA (the
// system's, or only `ca_file`'s) and the URL's host name (or IP address) in it.
Status ConfigureTls(HttpClient::Conn& c, const Target& t, const ClientOptions& o) {
  error_code ec;
  try {
    c.tls_ctx.emplace(asio::ssl::context::tls_client);
  } catch (const std::exception& e) {
    return Status::Internal(std::string("TLS context: ") + e.what());
  }
  SSL_CTX_set_min_proto_version(c.tls_ctx->native_handle(), TLS1_2_VERSION);
  c.tls_ctx->set_verify_mode(asio::ssl::verify_peer, ec);
  if (!o.ca_file.empty()) {
    c.tls_ctx->load_verify_file(o.ca_file, ec);
    if (ec) {
      return Status::Msg(Code::kInvalidArgument, "tls.bad_ca",
                         {{"file", o.ca_file}, {"error", ec.message()}});
    }
  } else {
    c.tls_ctx->set_default_verify_paths(ec);  // a missing store shows as an untrusted certificate
  }
  c.tls.emplace(std::move(*c.tcp_sock), *c.tls_ctx);
  c.tcp_sock.reset();
  SSL* ssl = c.tls->native_handle();
  X509_VERIFY_PARAM* param = SSL_get0_param(ssl);
  asio::ip::make_address(t.host, ec);
  if (!ec) {
    X509_VERIFY_PARAM_set1_ip_asc(param, t.host.c_str());
  } else {
    SSL_set_tlsext_host_name(ssl, t.host.c_str());
    X509_VERIFY_PARAM_set_hostflags(param, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
    X509_VERIFY_PARAM_set1_host(param, t.host.c_str(), 0);
  }
  return Status::OK();
}

Status Handshake(HttpClient::Conn& c, const ClientOptions& o) {
  error_code ec;
  c.tls->handshake(asio::ssl::stream_base::client, ec);
  if (!ec) return Status::OK();
  long verify = SSL_get_verify_result(c.tls->native_handle());  // NOLINT(runtime/int)
  if (verify != X509_V_OK) {
    std::string reason = X509_verify_cert_error_string(verify);
    if (o.ca_file.empty()) {
      return Status::Msg(Code::kFailedPrecondition, "tls.untrusted",
                         {{"url", o.base_url}, {"reason", reason}});
    }
    return Status::Msg(Code::kFailedPrecondition, "tls.untrusted_ca",
                       {{"url", o.base_url}, {"reason", reason}, {"ca", o.ca_file}});
  }
  return ErrorStatus(ec, "TLS handshake with " + o.base_url);
}

}  // namespace

HttpClient::HttpClient(ClientOptions options) : options_(std::move(options)) {}
HttpClient::~HttpClient() = default;

Status HttpClient::Connect() {
  conn_ = std::make_unique<Conn>();
  error_code ec;
  int fd = -1;
  Target t = ParseBaseUrl(options_.base_url);
  if (!options_.unix_socket.empty()) {
    conn_->unix_sock.emplace(conn_->ioc);
    conn_->unix_sock->connect(asio::local::stream_protocol::endpoint(options_.unix_socket), ec);
    if (!ec) fd = conn_->unix_sock->native_handle();
  } else {
    asio::ip::tcp::resolver resolver(conn_->ioc);
    auto endpoints = resolver.resolve(t.host, t.port, ec);
    if (!ec) {
      conn_->tcp_sock.emplace(conn_->ioc);
      asio::connect(*conn_->tcp_sock, endpoints, ec);
      if (!ec) fd = conn_->tcp_sock->native_handle();
    }
  }
  if (ec) {
    conn_.reset();
    return Status::Unavailable(
        "connect " + (options_.unix_socket.empty() ? options_.base_url : options_.unix_socket) +
        ": " + ec.message());
  }
  SetTimeouts(fd, options_.timeout_ms);  // the handshake's too
  if (options_.unix_socket.empty() && t.tls) {
    Status st = ConfigureTls(*conn_, t, options_);
    if (st.ok()) st = Handshake(*conn_, options_);
    if (!st.ok()) {
      conn_.reset();
      return st;
    }
  }
  return Status::OK();
}

// Runs `fn(socket)` on the open connection, whichever kind it is.
template <typename Fn>
auto WithSocket(HttpClient::Conn& c, Fn&& fn) {
  if (c.unix_sock) return fn(*c.unix_sock);
  if (c.tls) return fn(*c.tls);
  return fn(*c.tcp_sock);
}

Result<HttpResponse> HttpClient::Request(std::string_view method, std::string_view path_and_query,
                                         std::string_view body, const Headers& headers) {
  // A kept-alive connection may have been closed by the server meanwhile:
  // one retry on a fresh connection, never more.
  for (int attempt = 0; attempt < 2; ++attempt) {
    if (!conn_) RETURN_IF_ERROR(Connect());
    bool reused = conn_->used;
    conn_->used = true;
    auto req = BuildRequest(method, path_and_query, body, headers, options_, HostHeader(options_));
    error_code ec;
    bhttp::response_parser<bhttp::string_body> parser;
    parser.body_limit(std::numeric_limits<std::uint64_t>::max());  // not boost::none (proxy.cc)
    bool answered_early = false;  // before the whole request was written
    WithSocket(*conn_, [&](auto& sock) {
      bhttp::write(sock, req, ec);
      if (!ec) {
        bhttp::read(sock, conn_->buffer, parser, ec);
      } else {
        // A server may answer before it has read the whole body (413 for a
        // body over its limit) and close: the answer is there to read.
        error_code read_ec;
        bhttp::read(sock, conn_->buffer, parser, read_ec);
        if (!read_ec) {
          answered_early = true;
          ec = {};
        }
      }
      return 0;
    });
    if (ec) {
      conn_.reset();
      if (reused && attempt == 0) continue;
      return ErrorStatus(ec, "request " + std::string(path_and_query));
    }
    auto& res = parser.get();
    HttpResponse out;
    out.status = static_cast<int>(res.result_int());
    for (const auto& f : res) {
      std::string name(f.name_string());
      std::string value(f.value());
      if (EqualsIgnoreCase(name, "Content-Type")) out.content_type = value;
      out.headers.emplace_back(std::move(name), std::move(value));
    }
    out.body = std::move(res.body());
    if (!res.keep_alive() || answered_early) conn_.reset();
    return out;
  }
  return Status::Unavailable("request failed");
}

Result<int> HttpClient::Stream(std::string_view method, std::string_view path_and_query,
                               const std::function<bool(std::string_view)>& on_data,
                               std::string_view body,
                               const std::function<void(int, const Headers&)>& on_header) {
  conn_.reset();  // a stream gets a connection of its own, closed afterwards
  RETURN_IF_ERROR(Connect());
  auto req = BuildRequest(method, path_and_query, body, {}, options_, HostHeader(options_));
  error_code ec;
  bhttp::response_parser<bhttp::string_body> parser;
  // Not boost::none: Boost 1.74 compares a Content-Length against an unset
  // limit as exceeding it when the header is read on its own.
  parser.body_limit(std::numeric_limits<std::uint64_t>::max());
  std::string callback_error;
  WithSocket(*conn_, [&](auto& sock) {
    bhttp::write(sock, req, ec);
    if (!ec) bhttp::read_header(sock, conn_->buffer, parser, ec);
    if (!ec && on_header) {
      Headers h;
      for (const auto& f : parser.get())
        h.emplace_back(std::string(f.name_string()), std::string(f.value()));
      on_header(static_cast<int>(parser.get().result_int()), h);
    }
    while (!ec && !parser.is_done()) {
      bhttp::read_some(sock, conn_->buffer, parser, ec);
      std::string& got = parser.get().body();
      if (got.empty()) continue;
      bool more = true;
      try {
        more = on_data(got);
      } catch (const std::exception& e) {
        callback_error = e.what();
        more = false;
      }
      got.clear();
      if (!more) break;
    }
    return 0;
  });
  int status = parser.is_header_done() ? static_cast<int>(parser.get().result_int()) : 0;
  conn_.reset();
  if (!callback_error.empty()) return Status::Internal("stream callback: " + callback_error);
  if (ec && ec != bhttp::error::end_of_stream && status == 0) {
    return ErrorStatus(ec, "stream " + std::string(path_and_query));
  }
  if (ec && ec != bhttp::error::end_of_stream && ec != asio::error::eof) {
    return ErrorStatus(ec, "stream " + std::string(path_and_query));
  }
  return status;
}

}  // namespace lathe::net

// HTTP message types shared by the server (http_server.h) and the client
// (http_client.h), and the Responder/ResponseStream interfaces through which a
// handler answers a request.
//
// These types are plain values: no Boost, no sockets. Everything here may be
// moved between threads freely; only the interfaces at the bottom carry thread
// rules, written at each method.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace lathe::net {

class IoLoop;  // io_loop.h: the I/O loop a connection is served on (Responder::loop)

// Credentials of the process on the other end of a unix socket (SO_PEERCRED),
// taken when the connection was accepted.
struct PeerCred {
  int pid = 0;
  unsigned uid = 0;
  unsigned gid = 0;
};

// Header name/value pairs in wire order. Names keep the sender's spelling;
// compare them case-insensitively (FindHeader).
using Headers = std::vector<std::pair<std::string, std::string>>;

// Case-insensitive lookup of the first header called `name`; "" if absent.
std::string_view FindHeader(const Headers& headers, std::string_view name);

// True when `a` and `b` are equal ignoring ASCII case. Inline: a forwarded
// request compares about a hundred header names, most of them of another
// length, which one comparison settles.
inline bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  auto lower = [](char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; };
  for (size_t i = 0; i < a.size(); ++i) {
    if (lower(a[i]) != lower(b[i])) return false;
  }
  return true;
}

// Decodes %XX escapes; with `plus_is_space` (query strings) '+' becomes ' '.
// A malformed escape is kept as written.
std::string PercentDecode(std::string_view in, bool plus_is_space);

// Escapes every byte outside RFC 3986 "unreserved" (for building query strings).
std::string PercentEncode(std::string_view in);

// The non-empty '/'-separated segments of a request path: "/v2/models/m/" ->
// {"v2", "models", "m"}.
std::vector<std::string> PathSegments(std::string_view path);

struct HttpRequest {
  std::string method;  // "GET", as sent (methods are case-sensitive)
  std::string target;  // raw "/api/v1/runs?all=1"
  std::string path;    // percent-decoded path without query: "/api/v1/runs"
  std::string query;   // raw query string without '?'
  Headers headers;
  std::string body;
  std::optional<PeerCred> peer;  // SO_PEERCRED of a unix-socket client; nullopt for TCP
  std::string remote;            // "127.0.0.1:53412" or "unix"
  // A TCP client on this host's loopback (127.0.0.0/8, ::1): true, with the
  // uid owning its socket when the server asks the kernel
  // (ServerOptions::max_connections_per_loopback_user) and it could tell.
  bool loopback = false;
  std::optional<unsigned> loopback_uid;

  // Case-insensitive, "" if absent. The view points into `headers`.
  std::string_view Header(std::string_view name) const;
  // First `name=value` in `query`, percent-decoded ('+' is a space); a bare
  // `name` gives "". nullopt when absent.
  std::optional<std::string> QueryParam(std::string_view name) const;
};

struct HttpResponse {
  int status = 200;                               // outside 100..999 is sent as 500
  std::string content_type = "application/json";  // empty: no Content-Type header
  Headers headers;  // extra headers; Content-Length/Transfer-Encoding are computed
  std::string body;
};

// A streamed response (chunked transfer encoding), e.g. text/event-stream.
// Obtained from Responder::StartStream; the caller owns it. It may outlive the
// server: after HttpServer::Stop every Write returns false.
// Thread-safety: use from one thread at a time (any thread); ClientGone() may be
// called from any thread concurrently.
class ResponseStream {
 public:
  virtual ~ResponseStream() = default;
  // Hands `data` to the socket as one chunk (an empty `data` is skipped).
  // From a thread of your own it blocks until the chunk is written (back-pressure
  // from a slow client); from a server I/O thread (inside a handler) it copies and
  // queues without blocking. Returns false once the client is gone, the write
  // timed out, Close was called, or the server stopped: then stop writing.
  virtual bool Write(std::string_view data) = 0;
  // Ends the response (final chunk); does not block. Called automatically by
  // the destructor if not called.
  virtual void Close() = 0;
  // True when the client has disconnected (non-blocking check).
  virtual bool ClientGone() const = 0;
};

// An open tunnel, for whoever made it: End() closes both sides, from any
// thread; once the tunnel is over it does nothing, and Open() is false.
class TunnelControl {
 public:
  virtual ~TunnelControl() = default;
  virtual void End() = 0;
  virtual bool Open() const = 0;
};

// How a tunnel (Responder::Tunnel) is bounded.
struct TunnelOptions {
  int idle_timeout_ms = 600000;  // close both sides when no byte passed either way this long
  // Sees every byte the client sends, in order, on the connection's own
  // strand (one call at a time); must be quick. May be empty.
  std::function<void(std::string_view)> on_client_bytes;
  // Called once the tunnel runs, with its control (e.g. to end it when the
  // client may no longer reach what it tunnels to). May be empty.
  std::function<void(std::shared_ptr<TunnelControl>)> on_open;
};

// Handed to the handler, which owns it. Exactly one of Send, StartStream or
// Tunnel must be called, exactly once, from ANY thread, possibly long after the
// handler returned (async completion, e.g. a batcher). None blocks. If the
// Responder is destroyed without any, a 500 is sent. If the connection is gone
// (or the server stopped) by then, the answer is dropped silently (a tunnel's
// upstream_fd is closed).
class Responder {
 public:
  virtual ~Responder() = default;
  virtual void Send(HttpResponse response) = 0;
  // Sends the status line and headers with Transfer-Encoding: chunked; the body
  // follows through the returned stream.
  virtual std::unique_ptr<ResponseStream> StartStream(int status, std::string content_type,
                                                      Headers headers = {}) = 0;
  // The third way to answer, after an HTTP upgrade (websockets) that the caller
  // negotiated with an upstream itself: writes `head` (status line and its
  // headers as given, plus Server; no Content-Length or Transfer-Encoding is
  // added, content_type is sent only for a status of 200 or more, the body is
  // ignored) and then copies bytes both ways between the client connection and
  // `upstream_fd`, a connected stream socket whose ownership passes to the
  // server, which closes it. `upstream_leftover` (bytes already read from the
  // upstream after its own header) reaches the client first; bytes the client
  // sent after its request head reach the upstream first.
  // Ends when either side closes (the other side's sending half is shut down
  // first: EOF reaches it after every byte read before the close), on
  // options.idle_timeout_ms, or on HttpServer::Stop; the client connection is
  // then closed (no keep-alive after a tunnel). Works on TCP, unix-socket and
  // TLS connections. Over ServerOptions::max_tunnels open tunnels the client
  // gets 503 {"error":"too many tunnels"} and upstream_fd is closed.
  // The default implementation (for fakes) closes upstream_fd and sends 501.
  virtual void Tunnel(HttpResponse head, int upstream_fd, std::string upstream_leftover,
                      TunnelOptions options = {});
  // The I/O loop serving this request's connection, so that code of the net
  // module (the reverse proxy) can run its own asynchronous I/O there and
  // answer without a hand-off between threads. Only on that loop's own
  // thread (in the handler, or in a completion running on the loop); nullptr
  // on any other thread, once the connection is gone, and for responders
  // that are not the server's (fakes). Valid until the caller returns.
  virtual IoLoop* loop() { return nullptr; }
};

}  // namespace lathe::net

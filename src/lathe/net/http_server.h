// HttpServer: the one HTTP/1.1 server of Lathe (daemon REST API, `lathe serve`).
//
// An asynchronous server (Boost.Beast, hidden in http_server.cc) over TCP, TLS
// over TCP and/or unix sockets, with keep-alive, pipelining (answered in order), limits and
// timeouts. Each request is handed to one Handler together with a Responder; the
// handler may answer at once or later from any thread.
//
// Answers the server gives on its own (400 malformed, 408 slow header, 413, 431,
// 503 over a connection limit, 500 for a dropped Responder) carry an
// application/json body {"error": "<reason>"}, the KServe v2 error shape.
//
// Lifecycle: Create → ListenTcp/ListenTls/ListenUnix (any number) → Start → Stop. Stop is
// called by the destructor if needed; a stopped server cannot be restarted.
//
// Threads: the handler runs on one of `io_threads` I/O threads, one request of a
// connection at a time. A handler that blocks (disk, a model, a lock held long)
// stalls every connection served by that thread: hand the Responder to a thread
// of your own instead. Create/Listen*/Start/Stop must be called from one
// controlling thread, never from inside a handler.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "lathe/common/status.h"
#include "lathe/net/http.h"

namespace lathe::net {

// Called once per request, on an I/O thread. Owns `responder` (see http.h).
// An exception escaping the handler is logged; the request then gets a 500.
using Handler = std::function<void(HttpRequest request, std::unique_ptr<Responder> responder)>;

struct ServerOptions {
  int io_threads = 2;  // threads running the I/O loop (handlers run on them)
  // false: the threads share one loop, so a handler that blocks leaves the
  // others serving every connection. true: each thread runs a loop of its
  // own, connections are dealt to them in turn at accept and stay there —
  // no thread ever wakes another for a connection's work (the deployments'
  // front, whose handlers never block), but a blocked handler stalls the
  // connections of its thread.
  bool loop_per_thread = false;
  size_t max_body_bytes = 64 << 20;     // larger bodies get 413 and the connection is closed
  size_t max_header_bytes = 64 << 10;   // larger request line + headers get 431, closed
  int first_request_timeout_ms = 5000;  // a new connection's first request header must be
                                        // complete this long after the accept, else it is
                                        // closed (408 if part of it came)
  int header_timeout_ms = 10000;        // to receive a later request's complete header (from
                                        // its first byte on keep-alive connections), else 408
  int body_timeout_ms = 60000;          // to receive the body once the header is in, else close
  int idle_timeout_ms = 60000;          // keep-alive connection with no request is closed after
                                        // this; a streamed response is never idle
  int write_timeout_ms = 60000;  // to hand one response (or one stream chunk) to a slow client
  // Connection limits (conn_limits.h). A connection over one of them is
  // answered 503 ("too many connections", or "... from this user" / "...
  // from this address" for a client's own limit) and closed.
  size_t max_connections = 1024;           // open connections in all
  size_t max_tcp_connections = 0;          // of them TCP and TLS; the rest is kept for
                                           // unix-socket clients. 0 = max_connections
  size_t newcomer_connections = 0;         // of each pool, kept for clients that hold none
  size_t max_connections_per_uid = 0;      // unix-socket connections of one peer uid
                                           // (SO_PEERCRED); 0 = no such limit
  size_t max_connections_per_address = 0;  // TCP connections from one client address: every
                                           // loopback address (127.0.0.0/8, ::1) counts as
                                           // one, an IPv6 address by its /64; 0 = no limit
  // TCP connections from this host's loopback owned by one uid (the owner of
  // the client's socket, asked of the kernel through sock_diag; an ssh
  // tunnel's is the user's sshd); a loopback client whose uid cannot be told
  // counts as the address "loopback". 0: loopback clients are not told apart
  // and HttpRequest::loopback_uid stays empty.
  size_t max_connections_per_loopback_user = 0;
  // Unix-socket peers with these uids (root, the server's own user) have no
  // per-uid limit and may open `reserved_connections` beyond max_connections,
  // so that they can connect while others hold every ordinary slot.
  std::vector<unsigned> reserved_uids;
  size_t reserved_connections = 0;
  size_t max_tunnels = 256;           // open Responder::Tunnel copies; beyond: 503
  std::string server_name = "lathe";  // Server: header
};

// A TLS listener's certificate and key: PEM files, read once by ListenTls.
struct TlsFiles {
  std::string cert_file;  // the server's certificate, then any intermediate CA certificates
  std::string key_file;   // its private key, unencrypted
};

class HttpServer {
 public:
  // Fails with InvalidArgument on a null handler, a non-positive
  // io_threads/timeout/max_connections, max_tcp_connections above
  // max_connections, or newcomer_connections not below either pool.
  static Result<std::unique_ptr<HttpServer>> Create(ServerOptions options, Handler handler);
  virtual ~HttpServer() = default;

  // Binds host:port ("" or "localhost" = 127.0.0.1; an IPv4/IPv6 literal
  // otherwise; port 0 = any free port) and listens; returns the bound port.
  // Errors: InvalidArgument (bad host), AlreadyExists (port in use), IoError.
  virtual Result<int> ListenTcp(const std::string& host, int port) = 0;

  // The same, speaking TLS (1.2 or later; no client certificates) with the
  // certificate and key of `tls`, read now: a file that cannot be read, is not
  // PEM, or a key that does not match the certificate is InvalidArgument with
  // a catalog id (tls.unreadable, tls.bad_file, tls.key_mismatch) naming the
  // file and its setting (tls.cert / tls.key). The handshake must complete
  // within first_request_timeout_ms; a client that fails it (plain HTTP, an
  // untrusted certificate) is closed without an answer. Later files are not
  // re-read: a renewed certificate takes a restart.
  virtual Result<int> ListenTls(const std::string& host, int port, const TlsFiles& tls) = 0;

  // Binds a unix socket at `path` with file mode `mode` (e.g. 0600 or 0666); the
  // mode is set before the socket listens. An existing socket file is replaced
  // ONLY if nothing accepts connections on it (stale socket of a killed
  // process); if a live server answers there, returns AlreadyExists. A path that
  // exists but is not a socket is left alone (AlreadyExists). The file is
  // removed by Stop if it is still ours.
  virtual Status ListenUnix(const std::string& path, unsigned mode) = 0;

  // Starts the I/O threads; returns immediately. FailedPrecondition if started
  // twice, stopped, or nothing listens.
  virtual Status Start() = 0;

  // Graceful: stop accepting, close idle keep-alive connections, end streams
  // (their Write returns false from now on), let in-flight requests finish (up to
  // `drain_ms`), then close everything and join the I/O threads. Responders
  // completed after Stop are dropped. Idempotent.
  virtual void Stop(int drain_ms = 5000) = 0;

  // Open connections being served (not those being refused with 503). Any thread.
  virtual size_t active_connections() const = 0;
};

}  // namespace lathe::net

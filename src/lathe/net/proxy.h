// ReverseProxy: forwards HTTP requests and websocket upgrades to a run's
// upstream (a loopback TCP port or a unix socket), for every proxied path
// of the daemon (run ports, notebooks, deployments). docs/security.md,
// "Run origins", states the rules; the proxy enforces the ones about the
// connection itself:
//   - it connects only to a listener owned by the expected user (SO_PEERCRED
//     for a unix socket, the accepted socket's owner in /proc/net/tcp for a
//     port), so a symlink to the daemon's socket or a port another user bound
//     first gets nothing;
//   - the port of an isolated run (Upstream::netns_pid) is connected inside
//     the run's own network namespace, from a short-lived thread that enters
//     it (os/netns.h), and its owner read from that namespace's table;
//   - the client's Authorization and any cookie whose name starts with one of
//     the stripped prefixes (Lathe's own) never reach the upstream, nor do
//     X-Forwarded-* headers the client made up; the upstream's own credential
//     is added by the proxy (Upstream::add_headers);
//   - Host (and Origin, when present) are rewritten to the upstream's own, so
//     that its local-host and websocket origin checks pass — the caller checks
//     Origin against the run's origin first;
//   - Set-Cookie from the upstream loses its Domain attribute (a cookie stays
//     on the run's own origin) and cookies with a stripped prefix are dropped;
//   - every wait is bounded (connect, the response header, each body read,
//     tunnel idle time), as are the response header's size and the number of
//     requests in flight;
//   - an upstream connection is kept alive for the next request to the same
//     listener (UpstreamKey: the socket or port, the namespace and the owner
//     checked): its owner was checked when it was made, and a connected
//     socket's peer never changes. Only GET, HEAD and OPTIONS ride a kept
//     connection; one the upstream closed meanwhile is retried once on a new
//     connection.
//
// Threads: Forward returns at once; the request is served by one of the
// proxy's own workers (never a server I/O thread): up to max_workers, started
// as the load asks and then kept; beyond them requests wait in a queue of
// max_queued, and one more than that gets 503 (proxy.busy).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "lathe/common/status.h"
#include "lathe/net/http.h"
#include "lathe/os/fd.h"

namespace lathe::net {

struct Upstream {
  enum class Kind { kTcp, kUnix };
  Kind kind = Kind::kTcp;
  int port = 0;  // kTcp: 127.0.0.1:port
  // kTcp of an isolated run: 127.0.0.1:port inside the network namespace of
  // this process (with its start time, against pid reuse); 0: the daemon's.
  int netns_pid = 0;
  uint64_t netns_start = 0;
  std::string socket;  // kUnix: the socket's path
  // The listener must belong to this uid, unless any_owner (a root run's).
  unsigned owner_uid = 0;
  bool any_owner = false;
  std::string host = "localhost";  // the Host (and Origin's host) the upstream sees
  Headers add_headers;             // e.g. the upstream's own token
  // A websocket's bytes from the client, as they pass (TunnelOptions).
  std::function<void(std::string_view)> on_client_bytes;
  // When nothing answered (proxy.unreachable): may turn that error into a
  // fuller one for the error page (which layer failed, docs/ports.md).
  // Called on a proxy worker; empty: the error as it is.
  std::function<Status(const Status&)> explain_unreachable;
};

struct ProxyOptions {
  int connect_timeout_ms = 5000;
  int response_timeout_ms = 120000;     // to the upstream's complete response header
  int idle_timeout_ms = 120000;         // between two reads of a response body
  int tunnel_idle_timeout_ms = 600000;  // a websocket with no byte either way
  size_t max_response_header_bytes = 64 << 10;
  size_t max_buffered_body_bytes = 8 << 20;  // larger (or unsized) bodies are streamed
  size_t max_workers = 32;                   // requests served at once
  size_t max_queued = 256;                   // waiting for a worker; more get 503
  // Upstream connections kept alive for the next request to the same
  // listener (its owner was checked when the connection was made; a
  // connection's peer never changes). 0: a new connection per request.
  size_t max_idle_upstreams = 64;
  int upstream_idle_ms = 15000;  // an idle one older than this is closed, not reused
  std::vector<std::string> strip_cookie_prefixes = {"lathe_"};
};

// Renders an error of the proxy (upstream unreachable, wrong owner, out of
// time, over a limit) as the answer the client gets.
using ProxyErrorPage = std::function<HttpResponse(const Status&)>;

class ReverseProxy {
 public:
  ReverseProxy(ProxyOptions options, ProxyErrorPage error_page);
  ~ReverseProxy();  // Stop()
  ReverseProxy(const ReverseProxy&) = delete;
  ReverseProxy& operator=(const ReverseProxy&) = delete;

  // Forwards `req` to `up` and answers through `res` (see the header comment).
  void Forward(HttpRequest req, Upstream up, std::unique_ptr<Responder> res);
  // Refuses new requests, makes the ones in flight give up at their next
  // wait (within a second) and waits for them. Idempotent.
  void Stop();

 private:
  struct Job {
    HttpRequest req;
    Upstream up;
    std::unique_ptr<Responder> res;
  };
  void Serve(const HttpRequest& req, const Upstream& up, std::unique_ptr<Responder> res);
  void Exchange(const HttpRequest& req, const Upstream& up, std::unique_ptr<Responder> res,
                os::Fd fd, std::string pending, bool eof, const std::string& key);
  // A kept-alive connection to the listener `key` names, if one is idle and
  // still open; Put hands one back after a complete exchange.
  os::Fd TakeIdle(const std::string& key);
  void PutIdle(const std::string& key, os::Fd fd);
  void Work();  // a worker: serves queued jobs until Stop

  const ProxyOptions opts_;
  const ProxyErrorPage error_page_;
  std::atomic<bool> stopping_{false};
  std::mutex mu_;
  std::condition_variable wake_;
  std::deque<Job> queue_;             // guarded by mu_
  std::vector<std::thread> workers_;  // guarded by mu_
  size_t idle_workers_ = 0;           // guarded by mu_
  struct IdleConn {
    std::string key;
    os::Fd fd;
    int64_t since_ms = 0;  // steady clock
  };
  std::mutex pool_mu_;
  std::deque<IdleConn> idle_;  // guarded by pool_mu_; oldest first
};

// ---- the pure parts (unit-tested) ----

// True for a websocket handshake: GET with Upgrade: websocket and a
// Connection header that lists "upgrade".
bool IsWebSocketUpgrade(const HttpRequest& req);

// The `Cookie` header without the cookies whose names start with one of
// `prefixes`; "" when none is left.
std::string StripCookies(std::string_view cookie, const std::vector<std::string>& prefixes);

// The request line and headers sent upstream (ending in an empty line),
// with the rules above; `upgrade` keeps the websocket handshake's headers.
// `keep_alive`: the connection may serve another request after this one.
std::string UpstreamRequestHead(const HttpRequest& req, const Upstream& up, bool upgrade,
                                const std::vector<std::string>& strip_cookie_prefixes,
                                bool keep_alive = false);
// Which listener an upstream names, as the key of its kept-alive connections.
std::string UpstreamKey(const Upstream& up);

// The upstream's response headers as passed to the client: without
// hop-by-hop headers (but Upgrade/Connection of a 101), Content-Length,
// Content-Type (the caller moves it), Server (the server sends its own), and
// with Set-Cookie sanitised.
Headers DownstreamHeaders(const Headers& upstream, int status,
                          const std::vector<std::string>& strip_cookie_prefixes);

}  // namespace lathe::net

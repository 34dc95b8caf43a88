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
//     connection (and any request the caller says may be repeated,
//     ForwardHooks::repeatable); one the upstream closed meanwhile is retried
//     once on a new connection.
//
// A caller that balances over several upstreams (the deployments' front)
// learns how each request went (ForwardHooks): when an attempt failed before
// any byte of an answer came back it may name another upstream to try, and
// it is told once when the request is over.
//
// Threads: Forward returns at once. A request that may ride a kept-alive
// connection (see above) and finds one idle is forwarded on the I/O loop of
// its own client connection (Responder::loop), driven by readiness events
// (proxy_event.cc): no thread hand-off on the way there or back, which is
// what a proxy's cost is made of when requests are small. Every other
// request — a new upstream connection, a websocket, a large or unsized
// answer (handed over once its header came), a kept connection the upstream
// had closed — is served by one of the proxy's own workers doing blocking
// I/O: up to max_workers, started as the load asks and then kept; beyond
// them requests wait in a queue of max_queued, and one more than that gets
// 503 (proxy.busy). The hooks run on whichever thread serves the request.
#pragma once

#include <array>
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
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
  // The listener must belong to this uid, or to also_owner_uid when set (a
  // root run's: the daemon's own user).
  unsigned owner_uid = 0;
  std::optional<unsigned> also_owner_uid;
  std::string host = "localhost";  // the Host (and Origin's host) the upstream sees
  Headers add_headers;             // e.g. the upstream's own token
  // Added to the answer the client gets from this upstream (not to the
  // proxy's own error pages), replacing any the upstream sent by those names.
  Headers add_response_headers;
  // A websocket's bytes from the client, as they pass (TunnelOptions).
  std::function<void(std::string_view)> on_client_bytes;
  // A websocket's tunnel, once open (TunnelOptions::on_open).
  std::function<void(std::shared_ptr<TunnelControl>)> on_tunnel_open;
  // When nothing answered (proxy.unreachable): may turn that error into a
  // fuller one for the error page (which layer failed, docs/ports.md).
  // Called on a proxy worker; empty: the error as it is.
  std::function<Status(const Status&)> explain_unreachable;
};

// An upstream made once for many requests (the deployments' front makes one
// per replica when its routes change), with the key of its kept-alive
// connections computed once: a request then costs no copy of its fields.
struct PreparedUpstream {
  Upstream up;
  std::string key;  // UpstreamKey(up)
};
std::shared_ptr<const PreparedUpstream> Prepare(Upstream up);

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

// How a forwarded request ended (ForwardHooks::done).
struct ForwardResult {
  int status = 0;         // what the client got: the upstream's status or the error page's
  Status error;           // OK when the upstream's whole answer was passed on
  bool answered = false;  // an upstream sent a response header
  int attempts = 1;       // upstreams tried (ForwardHooks::retry)
};

// What a caller of Forward may add. Every member may be empty.
struct ForwardHooks {
  // The request may be sent twice (the caller knows its upstream's requests
  // are idempotent): it rides a kept-alive connection whatever its method.
  bool repeatable = false;
  // Called on the proxy's worker when an attempt failed before any byte of
  // an answer came back: no connection (nothing listens, out of time), the
  // listener's owner was not the expected one, or the upstream closed or
  // reset the connection first. `failed` is where it was tried. Returns the
  // upstream to try next, or nullopt for the error page. Called again if
  // that attempt fails the same way: the caller bounds the retries. Never
  // called for a timeout waiting for the answer (the upstream may be
  // working on it) or when the proxy stops.
  std::function<std::optional<Upstream>(const Status& why, const Upstream& failed)> retry;
  // Called exactly once when the request is over: its answer passed on
  // (a streamed one to its end or its cut), its error page sent, or a
  // tunnel handed over. On the proxy's worker, or on the caller's thread
  // when the request is refused at once (proxy.busy).
  std::function<void(const ForwardResult&)> done;
  // Kept until the request is over: state that retry and done share, so
  // that each of them captures a plain pointer to it (a std::function with
  // more than 16 bytes of captures allocates, and these are made for every
  // request).
  std::shared_ptr<void> keep;
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
  void Forward(HttpRequest req, Upstream up, std::unique_ptr<Responder> res,
               ForwardHooks hooks = {});
  // The same, to an upstream prepared once for many requests (Prepare).
  void Forward(HttpRequest req, std::shared_ptr<const PreparedUpstream> up,
               std::unique_ptr<Responder> res, ForwardHooks hooks = {});
  // Refuses new requests, makes the ones in flight give up at their next
  // wait (within a second) and waits for them. Idempotent.
  void Stop();

 private:
  struct Job {
    HttpRequest req;
    std::shared_ptr<const PreparedUpstream> up;  // never null
    std::unique_ptr<Responder> res;
    ForwardHooks hooks;
    // Set when the event-driven path hands a request over to a worker:
    bool fresh = false;      // its kept connection had been closed: connect anew
    os::Fd cont_fd;          // or the answer began: its connection,
    std::string cont_bytes;  //   every byte of the answer read so far,
    bool cont_eof = false;   //   whether the upstream ended after them,
    std::string cont_key;    //   and the connection's key in the pool
  };
  class EventExchange;  // proxy_event.cc
  // How one attempt at one upstream went: `res` was used (answered), or
  // not (an error before the answer, which the caller shows or retries).
  struct Attempt {
    Status error;
    bool unanswered = false;  // no byte of an answer came back (ForwardHooks::retry)
    bool answered = false;    // a response header came
    int status = 0;           // the upstream's, when answered
  };
  // Answers `job` with the error page of `why` at once.
  void Refuse(Job& job, const Status& why);
  // Queues `job` for a worker (or refuses it: proxy.busy, proxy.stopping).
  void Enqueue(Job job);
  // Starts `job` on its client connection's I/O loop, when it may go there
  // (proxy_event.cc); false leaves `job` as it was, for a worker.
  bool ForwardOnLoop(Job& job);
  // Stop: makes the event-driven exchanges give up, and waits for them.
  void StopEvents();
  void EventEnded(const EventExchange* ex, size_t shard);
  void Serve(Job& job);
  Attempt Try(const HttpRequest& req, const PreparedUpstream& up, std::unique_ptr<Responder>& res,
              bool repeatable, bool reuse);
  Attempt Exchange(const HttpRequest& req, const Upstream& up, std::unique_ptr<Responder>& res,
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
  // The event-driven exchanges in flight, for Stop and the watchdog, in
  // shards: each thread that forwards uses one shard of its own (EventShard),
  // so that the loops of a server never wait on one another's lock.
  struct EventShard {
    std::mutex mu;
    std::unordered_map<const EventExchange*, std::weak_ptr<EventExchange>> live;  // guarded by mu
  };
  static constexpr size_t kEventShards = 8;
  static size_t ThisThreadsShard();
  std::array<EventShard, kEventShards> shards_;
  std::atomic<size_t> live_events_{0};  // in all shards
  std::mutex events_mu_;                // for events_done_, and to start the watchdog
  std::condition_variable events_done_;
  std::atomic<bool> watchdog_started_{false};
  // Ends the event-driven exchanges whose deadline passed (proxy_event.cc);
  // started with the first of them, joined by Stop.
  std::thread watchdog_;  // guarded by events_mu_ until Stop
  std::condition_variable watchdog_wake_;
  void Watch();
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
// Takes `upstream` by value: a caller done with it moves it in.
Headers DownstreamHeaders(Headers upstream, int status,
                          const std::vector<std::string>& strip_cookie_prefixes);

// `down` with the headers of `add` replacing any by those names
// (Upstream::add_response_headers).
void AddResponseHeaders(Headers& down, const Headers& add);

}  // namespace lathe::net

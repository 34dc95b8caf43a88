// Front: the deployments' data plane (`lathe __gateway`, docs/gateway.md).
// One HTTP endpoint per deployment, http(s)://HOST:PORT/d/NAME/..., answered
// by forwarding to the deployment's replicas over their unix sockets. It is a
// process of its own that the daemon starts and configures only through
// files in one directory, so that it keeps serving while the daemon is down:
//
//   DIR/routes.json   the daemon's: deployments, keys, replicas (front_routes.h);
//                     polled every routes_poll_ms, reloaded when it changes; a
//                     file that does not parse leaves the last good routes
//   DIR/gateway.json  the front's: {"pid", "port", "admin_socket", "started_ms"}
//                     (WriteGatewayJson), written once its listeners are bound
//   DIR/admin.sock    the front's admin socket (mode 0600, root or the front's
//                     own user only): GET /status (JSON), GET /metrics (Prometheus)
//
// A request to /d/NAME/REST?Q goes to one replica as /REST?Q, after the
// deployment's key check (front_auth.h), to the replica the balancer picks
// (balancer.h); each answer carries Lathe-Model-Version and Lathe-Replica.
// A request that failed before any byte of an answer came back is retried
// once on another replica when the deployment is idempotent, and that
// replica is taken out at once. Without a healthy replica a request is held
// (hold: true; up to max_held of them, each up to hold_ms) or answered 503
// with Retry-After.
//
// With each probe the front also reads the replica's own load from the
// route's metrics_path (replica_load.h), and once it is healthy its model
// metadata from its metadata_path; /status shows them per replica ("queued",
// "running", "metadata"), left out while unknown.
//
// Threads: the HTTP server's I/O threads (routing, auth, choice), the
// proxy's workers (the exchanges with replicas), one thread per replica for
// its probes, one ticker (routes.json, held requests' deadlines).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "lathe/common/status.h"
#include "lathe/net/http_server.h"
#include "lathe/net/proxy.h"
#include "lathe/os/clock.h"

namespace lathe::gateway {

struct FrontOptions {
  std::string dir;                   // routes.json, gateway.json, admin.sock
  std::string host = "127.0.0.1";    // the public listener
  int port = 0;                      // 0: any free port
  std::optional<net::TlsFiles> tls;  // set: the public listener speaks TLS
  int probe_interval_ms = 1000;      // between two probes of one replica
  int probe_timeout_ms = 2000;       // one probe, connect to status line
  int routes_poll_ms = 100;          // how often routes.json's stat is looked at
  int drain_ms = 10000;              // Stop: in-flight requests get this long
  int io_threads = 2;
  // Client connections (docs/gateway.md, "Limits"). In all: 0 = from the
  // open-file limit, which Create first raises (ClientConnectionBudget). One
  // client — a loopback user (the owner of its socket), else an address, an
  // IPv6 one by its /64 — holds at most max_connections_per_client; the last
  // newcomer_connections go only to a client holding none. Over a limit: 503.
  size_t max_connections = 0;
  size_t max_connections_per_client = 512;
  size_t newcomer_connections = 64;
  net::ProxyOptions proxy = DefaultProxyOptions();
  // Wall time (keys' expiry, /status) and the monotonic clock (latencies,
  // held requests' deadlines). Null: the real clocks. Not owned.
  os::Clock* clock = nullptr;

  static net::ProxyOptions DefaultProxyOptions();
};

class Front {
 public:
  // Binds the public listener (TLS files read now) and DIR/admin.sock, so
  // that a root caller may drop its privileges afterwards; serves nothing
  // before Start. Errors: the listeners' (AlreadyExists, tls.*, IoError).
  static Result<std::unique_ptr<Front>> Create(FrontOptions options);
  virtual ~Front() = default;

  virtual int port() const = 0;
  virtual std::string admin_socket() const = 0;
  // Reads routes.json and starts serving. FailedPrecondition when started twice.
  virtual Status Start() = 0;
  // Stops accepting, lets requests in flight finish (up to drain_ms), then
  // answers the held ones 503 and stops every thread. Idempotent.
  virtual void Stop() = 0;
};

// The open descriptors the front asks for (RLIMIT_NOFILE), as root may raise it.
inline constexpr uint64_t kFrontOpenFiles = 65536;

// How many client connections `open_files` descriptors carry: half of them
// (each client may need a replica connection beside its own), at least 128.
size_t ClientConnectionBudget(uint64_t open_files);

// Writes DIR/gateway.json atomically: {"pid", "port", "admin_socket", "started_ms"}.
Status WriteGatewayJson(const std::string& dir, int port, const std::string& admin_socket,
                        int64_t started_ms);

}  // namespace lathe::gateway

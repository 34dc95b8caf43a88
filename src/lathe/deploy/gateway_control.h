// The daemon's side of the deployments' front (`lathe __gateway`,
// docs/gateway.md): starting it, finding the one already running after a
// daemon restart, telling it the routes, asking it how the replicas are.
//
// The front is a process of its own, in a session of its own, not the
// daemon's child in any way that matters: a daemon killed with -9 leaves it
// serving from the routes it last read, and the daemon that starts next
// finds it by DIR/gateway.json (its pid, with the process's start time
// against pid reuse, and its command line naming DIR). The daemon talks to
// it only through files and its admin socket:
//   DIR/routes.json   written here, atomically, only when it changes
//   DIR/gateway.json  written by the front once it listens: pid, port
//   DIR/admin.sock    GET /status, GET /metrics (root's, or the daemon user's)
//
// Thread-compatible: the deployments' loop is its only caller, but for
// port() and Metrics(), which any thread may call.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "lathe/common/json.h"
#include "lathe/common/status.h"

namespace lathe::deploy {

struct GatewayConfig {
  std::string dir;       // DIR above (the daemon's, created here)
  std::string self_exe;  // the lathe binary
  std::string listen = "127.0.0.1:0";
  std::optional<uid_t> uid;  // drop to this uid:gid (a root daemon)
  gid_t gid = 0;
  std::string tls_cert, tls_key;  // a TLS listener when both are set
};

// What the deployment manager needs of its front: GatewayControl for the
// real `lathe __gateway`; the manager's tests give a fake
// (DeploymentOptions::make_front).
class FrontControl {
 public:
  virtual ~FrontControl() = default;
  // Starts the front unless it is running; OK when it runs.
  virtual Status Ensure() = 0;
  // True when the front is alive.
  virtual bool Running() = 0;
  // GET /status of the admin socket (docs/gateway.md).
  virtual Result<Json> FrontStatus() = 0;
  // GET /metrics of the admin socket, Prometheus text.
  virtual Result<std::string> Metrics() = 0;
  // Hands the front `routes` (routes.json) when they changed.
  virtual Status WriteRoutes(Json routes) = 0;
  // Has the front read routes.json now (POST /reload of its admin socket),
  // not at its next poll.
  virtual Status Reload() { return Status::OK(); }
  // The front's TCP port (0 before it first started).
  virtual int port() const = 0;
  virtual const GatewayConfig& config() const = 0;
};

class GatewayControl final : public FrontControl {
 public:
  explicit GatewayControl(GatewayConfig c) : c_(std::move(c)) {}

  // Starts the front unless it is running; then waits (up to a few
  // seconds) for its gateway.json. OK when it runs.
  Status Ensure() override;
  // True when the front recorded in gateway.json is alive.
  bool Running() override;
  // Stops the front recorded in gateway.json (SIGTERM: it drains, up to
  // 10 s; SIGKILL after `timeout_ms`). OK when none runs; true in
  // `*stopped` when one was stopped. The data plane is down afterwards:
  // for `lathe down --all`.
  Status Stop(int timeout_ms, bool* stopped);
  // FailedPrecondition (deploy.gateway_cannot_reach, naming the path) when
  // the front's user could not enter DIR; OK otherwise (and when the front
  // keeps the daemon's user).
  Status CheckReachable() const;
  // The front's TCP port (0 before it first started).
  int port() const override { return port_; }
  pid_t pid() const { return pid_; }
  // GET /status of the admin socket (docs/gateway.md).
  Result<Json> FrontStatus() override;
  // GET /metrics of the admin socket, Prometheus text.
  Result<std::string> Metrics() override;
  // Writes routes.json when `routes` differs from what was written last
  // (compared without its generation); readable by the front's group.
  Status WriteRoutes(Json routes) override;
  Status Reload() override;

  const GatewayConfig& config() const override { return c_; }

 private:
  bool ReadState();  // gateway.json → pid_, start_, port_; true when its process lives
  Result<std::string> Get(const std::string& path);

  const GatewayConfig c_;
  pid_t pid_ = 0;
  std::atomic<int> port_{0};    // read by API threads (the endpoint's URL)
  std::string routes_written_;  // the last routes written, without generation
  int64_t generation_ = 0;
  bool retry_any_port_ = false;  // the last start on the old port failed
};

}  // namespace lathe::deploy

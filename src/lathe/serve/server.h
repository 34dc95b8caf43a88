// `lathe serve`: the HTTP front (KServe v2 REST, /predict, /metrics, health)
// over the models of a repository or of --model flags.
//
// Lifecycle (an explicit state machine):
//   kLoading (Create) → kServing (Start) → kDraining (Stop) → kStopped
// Create loads every model (any failure fails Create: a server that starts is
// complete). Start binds and serves. Stop stops accepting, answers what was
// admitted, unloads the models.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "lathe/common/status.h"
#include "lathe/net/http_server.h"

namespace lathe::serve {

struct ServeOptions {
  std::string repository;              // Triton-style model repository; "" when only --model
  std::vector<std::string> models;     // "NAME=PATH" (see repository.h ModelFromFlag)
  std::string model_control = "none";  // none | explicit (load/unload over HTTP) | watch
  int watch_interval_ms = 1000;        // watch: how often the repository is scanned
  std::string host = "127.0.0.1";
  int port = 8000;  // 0: any free port; -1: no TCP listener (socket only)
  // A unix socket to listen on as well ("" = none), created with
  // socket_mode: a deployment's replica listens only there (its front
  // connects as another user through the socket's group).
  std::string socket;
  unsigned socket_mode = 0660;
  net::ServerOptions http;  // I/O threads, body limit (413), timeouts, max connections
  std::vector<std::string> backend_dirs;  // where backends are looked for; empty: the defaults
  std::string gpus = "auto";              // GPU source for per-GPU metrics: auto | nvml | none
  int drain_ms = 30000;                   // Stop: longest wait for admitted requests
  int probe_tick_ms = 100;                // how often health probes are considered
  std::function<int64_t()> now_us;        // monotonic µs; default steady_clock
};

class ServeServer {
 public:
  // Validates options, loads every model. InvalidArgument for bad options or
  // configs (naming file, field, allowed values); the load error otherwise.
  static Result<std::unique_ptr<ServeServer>> Create(ServeOptions options);
  virtual ~ServeServer() = default;

  // Binds host:port and starts serving; returns at once.
  virtual Status Start() = 0;
  // The bound TCP port (after Start).
  virtual int port() const = 0;
  // Graceful drain; idempotent. After it the process may exit 0.
  virtual void Stop() = 0;
  // Names and versions being served, for the start-up banner: "mlp v1 (READY)".
  virtual std::vector<std::string> Describe() const = 0;
};

}  // namespace lathe::serve

// The relay in front of a command deployment's program (docs/deployments.md,
// "Command deployments"). The deployments' front reaches replicas over unix
// sockets only (it checks each listener's owner, SO_PEERCRED); a user's server
// (vLLM, a FastAPI app, python3 -m http.server) listens on TCP. `lathe __relay`
// (cmd_relay.cc) is such a replica's first process: it creates the replica's
// unix listener as the run's user, starts the program as its child, and copies
// bytes both ways between every connection accepted there and a new TCP
// connection to 127.0.0.1:PORT, where the program listens.
//
// A connection that arrives before the program listens (the connect is
// refused) is closed at once: the front's health probe fails and is tried
// again later, and a request is retried on another replica (nothing reached
// this one).
//
// Hand-written, on poll(2): no Debian library copies between two sockets in a
// process of ours (socat is a program, and one process per connection), and
// the HTTP tunnel of net/ is tied to an HTTP exchange.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "lathe/common/status.h"
#include "lathe/os/process.h"

namespace lathe::gateway {

struct RelayOptions {
  std::string socket_path;  // the unix listener to create (mode 0660); a stale one is replaced
  int port = 0;             // each connection goes to 127.0.0.1:port (1-65535)
  size_t max_connections = 1024;    // open at once; one more is closed as soon as accepted
  size_t buffer_bytes = 64 * 1024;  // per direction of each connection
};

// Not thread-safe: one thread calls Step (and connections()).
class Relay {
 public:
  // Binds and listens on options.socket_path. AlreadyExists when a live
  // server listens there; InvalidArgument for a port out of range.
  static Result<std::unique_ptr<Relay>> Listen(const RelayOptions& options);
  ~Relay();  // closes every connection and the listener, removes the socket file

  // Waits up to `timeout_ms` (-1: no limit) for the listener, the connections
  // or `wake_fd` (-1: none) and moves what can be moved without blocking:
  // accepts, connects, copies, half-closes (an end of file on one side is a
  // shutdown(SHUT_WR) of the other once its bytes went out), and closes
  // connections that are done or broken. True when `wake_fd` is readable (it
  // is not read here).
  bool Step(int wake_fd, int timeout_ms);

  size_t connections() const;  // open now
  uint64_t accepted() const { return accepted_; }
  uint64_t refused() const { return refused_; }  // closed at once: nothing listened, or too many

  struct Conn;  // relay.cc

 private:
  Relay() = default;
  void AcceptAll();

  RelayOptions opts_;
  int listen_fd_ = -1;
  std::vector<std::unique_ptr<Conn>> conns_;
  uint64_t accepted_ = 0, refused_ = 0;
};

// `lathe __relay`'s life: creates the listener, starts `argv` as its child
// with PORT and LATHE_PORT set to options.port (os::SpawnChild: the same
// environment otherwise), relays until the child ends, and returns its exit.
// SIGTERM and SIGINT are passed on to the child, unless they came from this
// process's parent (a run's monitor signals every process of the run itself);
// the relay goes on until the child has ended. Blocks SIGTERM, SIGINT and
// SIGCHLD in the calling thread (call it before any other thread starts).
Result<os::ExitStatus> RunRelayed(const RelayOptions& options,
                                  const std::vector<std::string>& argv);

// `lathe __relay --beside`: the relay of a replica whose program runs in a
// container image, started beside it (exec/attempt_records.h
// ContainerLaunch::sidecar_argv) in the same network: creates the listener
// and relays until SIGTERM or SIGINT (the container's end), then returns.
// Blocks those signals in the calling thread, as RunRelayed.
Status RunRelayBeside(const RelayOptions& options);

}  // namespace lathe::gateway

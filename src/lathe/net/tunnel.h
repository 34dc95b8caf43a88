// A connection of HttpServer turned into a byte tunnel to an upstream socket
// (Responder::Tunnel: a websocket, or any HTTP upgrade a handler forwards):
// two copy loops, each one read then one write at a time, client → upstream
// and upstream → client. A loop that reads EOF shuts down the other side's
// sending half and ends the tunnel: what is still pending on either side is
// cancelled, and once every operation has returned the connection closes.
// So bytes read before an EOF always reach the other side first.
//
// Private to the net module (http_session.cc). Everything here runs on the
// connection's strand.
#pragma once

#include <boost/asio/buffer.hpp>
#include <boost/asio/socket_base.hpp>
#include <boost/asio/write.hpp>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <spdlog/spdlog.h>
#include <sys/socket.h>

#include "lathe/net/server_asio.h"
#include "lathe/os/fd.h"

namespace lathe::net::detail {

inline constexpr size_t kTunnelChunkBytes = 64 << 10;  // one read of a tunnel, each way

// What a tunnel needs of the connection it runs on (the session).
class TunnelOwner {
 public:
  virtual ~TunnelOwner() = default;
  // False while the tunnel runs. Once it is ending, true, and the last
  // operation to return (every completion asks) closes the connection.
  virtual bool TunnelOver() = 0;
  // Bytes moved: the tunnel's idle deadline starts again.
  virtual void TunnelActivity() = 0;
  // A side failed or stopped sending: the tunnel ends (Cancel).
  virtual void EndTunnel() = 0;
};

// `Stream` is the client's connection (Session's); the tunnel holds it, and
// the session's remote address for its log lines, by reference: both are
// the session's, which owns the tunnel.
template <typename Stream>
class Tunnel {
 public:
  using Ex = typename Stream::executor_type;
  using UpstreamSocket = UpstreamSocketOf<Ex>;

  Tunnel(Stream& client, const std::string& remote) : client_(client), remote_(remote) {}

  // Takes `fd` as the upstream, on `executor`. The upstream socket's family
  // decides the protocol asio is told of. False (logged) when `fd` is not a
  // socket; `fd` is closed then.
  bool Adopt(os::Fd fd, const Ex& executor) {
    sockaddr_storage addr{};
    socklen_t len = sizeof(addr);
    if (!fd.valid() || ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      spdlog::error("http {}: tunnel upstream fd {} is not a socket", remote_, fd.get());
      return false;
    }
    error_code ec;
    upstream_.emplace(executor);
    upstream_->assign(asio::generic::stream_protocol(addr.ss_family, 0), fd.get(), ec);
    if (ec) {
      spdlog::error("http {}: tunnel upstream: {}", remote_, ec.message());
      upstream_.reset();
      return false;
    }
    (void)fd.release();  // the asio socket owns it now
    return true;
  }

  // Starts both copy loops once the tunnel's head is out: `to_upstream`, what
  // the client sent after its request head; `to_client`, what the upstream
  // sent after its answer's head (either may be empty). `on_client_bytes`
  // (may be empty) sees every byte from the client as it passes. Every
  // pending operation keeps `owner` alive.
  void Start(const std::shared_ptr<TunnelOwner>& owner, std::string to_upstream,
             std::string to_client, std::function<void(std::string_view)> on_client_bytes) {
    owner_ = owner;
    on_client_bytes_ = std::move(on_client_bytes);
    to_upstream_ = std::move(to_upstream);
    to_client_ = std::move(to_client);
    if (on_client_bytes_ && !to_upstream_.empty()) on_client_bytes_(to_upstream_);
    to_upstream_.empty() ? ReadClient() : WriteUpstream();
    to_client_.empty() ? ReadUpstream() : WriteClient();
  }

  // The tunnel ends: the upstream closes (its pending operations return
  // operation_aborted) and the client's pending ones are cancelled.
  void Cancel() {
    error_code ignored;
    upstream_->close(ignored);
    if (client_ops_ > 0) Lowest(client_).cancel(ignored);
  }

  // No operation is pending on either side.
  bool Idle() const { return client_ops_ == 0 && upstream_ops_ == 0; }

  // The connection closes: so does the upstream, if there is one.
  void Close() {
    error_code ignored;
    if (upstream_) upstream_->close(ignored);
  }

 private:
  std::shared_ptr<TunnelOwner> Owner() const { return owner_.lock(); }

  void ReadClient() {
    to_upstream_.resize(kTunnelChunkBytes);
    ++client_ops_;
    client_.async_read_some(asio::buffer(to_upstream_),
                            [this, owner = Owner()](error_code ec, size_t n) {
                              --client_ops_;
                              if (owner->TunnelOver()) return;
                              if (n == 0) return OnEof(*owner, ec, /*client=*/true);
                              to_upstream_.resize(n);
                              if (on_client_bytes_) on_client_bytes_(to_upstream_);
                              owner->TunnelActivity();
                              WriteUpstream();
                            });
  }

  void WriteUpstream() {
    ++upstream_ops_;
    asio::async_write(*upstream_, asio::buffer(to_upstream_),
                      [this, owner = Owner()](error_code ec, size_t) {
                        --upstream_ops_;
                        if (owner->TunnelOver()) return;
                        if (ec) return owner->EndTunnel();
                        owner->TunnelActivity();
                        ReadClient();
                      });
  }

  void ReadUpstream() {
    to_client_.resize(kTunnelChunkBytes);
    ++upstream_ops_;
    upstream_->async_read_some(asio::buffer(to_client_),
                               [this, owner = Owner()](error_code ec, size_t n) {
                                 --upstream_ops_;
                                 if (owner->TunnelOver()) return;
                                 if (n == 0) return OnEof(*owner, ec, /*client=*/false);
                                 to_client_.resize(n);
                                 owner->TunnelActivity();
                                 WriteClient();
                               });
  }

  void WriteClient() {
    ++client_ops_;
    asio::async_write(client_, asio::buffer(to_client_),
                      [this, owner = Owner()](error_code ec, size_t) {
                        --client_ops_;
                        if (owner->TunnelOver()) return;
                        if (ec) return owner->EndTunnel();
                        owner->TunnelActivity();
                        ReadUpstream();
                      });
  }

  // One side stopped sending (or failed): the other side's sending half is
  // shut down (the client's by the session's graceful close once the tunnel
  // has ended).
  void OnEof(TunnelOwner& owner, error_code ec, bool client) {
    if (ec && !IsQuietReadError(ec))
      spdlog::debug("http {}: tunnel read: {}", remote_, ec.message());
    if (client) {
      error_code ignored;
      upstream_->shutdown(asio::socket_base::shutdown_send, ignored);
    }
    owner.EndTunnel();
  }

  Stream& client_;
  const std::string& remote_;
  std::weak_ptr<TunnelOwner> owner_;  // the session, which owns this tunnel
  std::optional<UpstreamSocket> upstream_;
  std::function<void(std::string_view)> on_client_bytes_;  // TunnelOptions'; may be empty
  // One buffer per direction, each holding what is being written.
  std::string to_upstream_;
  std::string to_client_;
  int client_ops_ = 0;    // reads/writes pending on the client's connection
  int upstream_ops_ = 0;  // ... on the upstream
};

}  // namespace lathe::net::detail

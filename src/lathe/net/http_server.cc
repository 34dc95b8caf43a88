// The HTTP server on Boost.Beast: its listeners (accept loops) and its
// lifecycle. All Boost includes of the net module live in its own .cc files
// and in headers only they include: a Beast translation unit costs ~30 s to
// compile. The parts:
//   http_server.cc   listeners, ServerImpl (Listen*, Start, Stop)
//   http_session.cc  Session: one connection (the one Beast HTTP translation unit)
//   tunnel.h         a connection turned into a byte tunnel (Responder::Tunnel)
//   server_core.*    Core, SessionBase, the Responder and ResponseStream handles
//   server_asio.h    the Asio types the parts agree on
//   tls_context.*    the TLS listeners' certificate and key
//
// Ownership, in one picture:
//   ServerImpl ─owns→ io_context, listeners, I/O threads, shared Core
//   Core ─owns→ live sessions (registry), weak refs to open streams
//   Session ─owns→ socket, timer, parser, the response being written
//   Responder/ResponseStream ─hold→ shared Core + weak Session
// Sessions are shared_ptrs because asio completion handlers must keep them
// alive; the registry keeps a session alive while a handler thinks (no I/O is
// pending then). Foreign threads only ever reach a session through
// Core::WithSession, which refuses once the server stopped, so nothing is posted
// to an io_context that is gone.
#include "lathe/net/http_server.h"

#include <sys/socket.h>
#include <sys/un.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/strand.hpp>
#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include <spdlog/spdlog.h>

#include "lathe/net/conn_limits.h"
#include "lathe/net/server_asio.h"
#include "lathe/net/server_core.h"
#include "lathe/net/tls_context.h"
#include "lathe/os/files.h"
#include "lathe/os/stream_socket.h"
#include "lathe/os/unix_socket.h"

namespace lathe::net {
namespace {

using namespace detail;  // NOLINT: the server's own internals

// The acceptors are on a strand of the first loop, whatever the sessions'.
template <typename Protocol>
using AcceptorOf = asio::basic_socket_acceptor<Protocol, Strand>;
using Timer = TimerOf<Strand>;  // the acceptors' retry timer

constexpr int kAcceptRetryMs = 100;    // after EMFILE and friends
constexpr int kCloseSettleMs = 1000;   // Stop: wait for posted closes before ioc.stop()
constexpr int kDefaultDrainMs = 5000;  // Stop from the destructor

// A new connection's executor on `ioc`.
template <typename Ex>
Ex NewExecutor(asio::io_context& ioc) {
  if constexpr (std::is_same_v<Ex, Strand>) {
    return asio::make_strand(ioc);
  } else {
    return ioc.get_executor();
  }
}

// ---------------------------------------------------------------------------
// Listeners: accept loops, one per bound address.

// The I/O loops a server runs: one shared by every I/O thread, or one per
// thread (ServerOptions::loop_per_thread), a new connection going to the next
// in turn and staying there.
class IoLoops {
 public:
  IoLoops(int threads, bool per_thread) {
    const int loops = per_thread ? threads : 1;
    for (int i = 0; i < loops; ++i) {
      loops_.push_back(std::make_unique<asio::io_context>(per_thread ? 1 : threads));
    }
  }
  asio::io_context& First() { return *loops_.front(); }
  asio::io_context& Next() {
    return *loops_[next_.fetch_add(1, std::memory_order_relaxed) % loops_.size()];
  }
  asio::io_context& At(size_t i) { return *loops_[i % loops_.size()]; }
  size_t size() const { return loops_.size(); }

 private:
  std::vector<std::unique_ptr<asio::io_context>> loops_;
  std::atomic<size_t> next_{0};
};

class ListenerBase {
 public:
  virtual ~ListenerBase() = default;
  virtual void Accept() = 0;
  virtual void Close() = 0;  // on the listener's strand, or with no I/O thread running
  virtual void PostCloseAndWait() = 0;
};

template <typename Ex>
std::string DescribePeer(const TcpSocketOf<Ex>& s) {
  error_code ec;
  auto ep = s.remote_endpoint(ec);
  if (ec) return "tcp";
  return ep.address().to_string() + ":" + std::to_string(ep.port());
}

template <typename Ex>
std::string DescribePeer(const UnixSocketOf<Ex>&) {
  return "unix";
}

// The key a TCP client address is counted under: an IPv4 address, an
// IPv4-mapped one as IPv4, an IPv6 address by its /64 (one host may hold a
// whole /64).
std::string AddressKey(const asio::ip::address& a) {
  if (a.is_v4()) return a.to_string();
  asio::ip::address_v6::bytes_type b = a.to_v6().to_bytes();
  std::fill(b.begin() + 8, b.end(), 0);
  return asio::ip::address_v6(b).to_string() + "/64";
}

// TCP clients: from this host's loopback per the uid owning the client's
// socket (sock_diag) where the options ask for it, otherwise per address —
// every loopback address being one, since any local user may bind any
// 127.x.y.z. The port changes with every connection.
template <typename Ex>
Client ClientOf(TcpSocketOf<Ex>& s, const ServerOptions& o) {
  error_code ec;
  s.set_option(asio::ip::tcp::no_delay(true), ec);  // responses are small and latency-bound
  Client c;
  c.count.tcp = true;
  c.count.limit = o.max_connections_per_address;
  auto ep = s.remote_endpoint(ec);
  if (ec) {
    c.count.key = "?";
    return c;
  }
  asio::ip::address a = ep.address();
  if (a.is_v6() && a.to_v6().is_v4_mapped()) {
    a = asio::ip::make_address_v4(asio::ip::v4_mapped, a.to_v6());
  }
  c.loopback = a.is_loopback();
  if (!c.loopback) {
    c.count.key = AddressKey(a);
    return c;
  }
  c.count.key = "loopback";
  if (o.max_connections_per_loopback_user == 0) return c;
  if (auto uid = os::LoopbackPeerUid(s.native_handle()); uid.ok()) {
    c.loopback_uid = *uid;
    c.count = ConnClient{"loopback uid " + std::to_string(*uid),
                         o.max_connections_per_loopback_user, true, true, false};
  }
  return c;
}

// Unix-socket peers per uid; one whose credentials cannot be read shares a
// key with the others like it.
template <typename Ex>
Client ClientOf(UnixSocketOf<Ex>& s, const ServerOptions& o) {
  Client c;
  c.count.limit = o.max_connections_per_uid;
  c.count.per_user = true;
  ucred cred{};
  socklen_t len = sizeof(cred);
  if (::getsockopt(s.native_handle(), SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
    c.count.key = "uid ?";
    return c;
  }
  c.peer = PeerCred{cred.pid, cred.uid, cred.gid};
  c.count.key = "uid " + std::to_string(cred.uid);
  c.count.reserved =
      std::find(o.reserved_uids.begin(), o.reserved_uids.end(), cred.uid) != o.reserved_uids.end();
  return c;
}

constexpr std::string_view kTooManyFromUser = R"({"error":"too many connections from this user"})";
constexpr std::string_view kTooManyFromAddress =
    R"({"error":"too many connections from this address"})";

// Sessions of executor `Ex` (Strand or LoopEx) for the connections it accepts.
template <typename Protocol, typename Ex>
class Listener final : public ListenerBase,
                       public std::enable_shared_from_this<Listener<Protocol, Ex>> {
 public:
  using Acceptor = AcceptorOf<Protocol>;
  using Socket = asio::basic_stream_socket<Protocol, Ex>;

  // `tls` (TCP only; not owned, outlives every session): serve TLS with it.
  Listener(IoLoops& loops, std::shared_ptr<Core> core, Acceptor acceptor,
           asio::ssl::context* tls = nullptr)
      : loops_(loops),
        core_(std::move(core)),
        acceptor_(std::move(acceptor)),
        retry_(acceptor_.get_executor()),
        tls_(tls) {}

  void Accept() override {
    Ex executor = NewExecutor<Ex>(loops_.Next());
    acceptor_.async_accept(executor, [self = this->shared_from_this(), executor](
                                         error_code ec, Socket socket) mutable {
      self->OnAccept(ec, std::move(socket), std::move(executor));
    });
  }

  void Close() override {
    CancelTimer(retry_);
    error_code ignored;
    acceptor_.close(ignored);
  }

  void PostCloseAndWait() override {
    std::promise<void> done;
    asio::post(acceptor_.get_executor(), [this, &done] {
      Close();
      done.set_value();
    });
    done.get_future().wait();
  }

 private:
  void OnAccept(error_code ec, Socket socket, Ex executor) {
    if (ec == asio::error::operation_aborted || !acceptor_.is_open()) return;
    if (ec) return RetryLater(ec);
    if (core_->draining) return;  // the socket closes as it goes out of scope
    Client client = ClientOf(socket, core_->options);
    Admission admission = core_->Admit(client.count);
    if (admission != Admission::kServe) core_->NoteRefusal(client.count, admission);
    if (admission != Admission::kDrop) {
      StartSession(std::move(socket), std::move(executor), std::move(client), admission);
    }
    Accept();
  }

  void StartSession(Socket socket, Ex executor, Client client, Admission admission) {
    std::string remote = DescribePeer(socket);
    std::string_view reject;
    if (admission == Admission::kReject) reject = ErrorBody(503);
    if (admission == Admission::kRejectClient) {
      reject = client.count.per_user ? kTooManyFromUser : kTooManyFromAddress;
    }
    if constexpr (std::is_same_v<Protocol, asio::ip::tcp>) {
      if (tls_ != nullptr) {
        return LaunchSession(core_, TlsStreamOf<Ex>(std::move(socket), *tls_), std::move(executor),
                             std::move(remote), std::move(client), reject);
      }
    }
    LaunchSession(core_, std::move(socket), std::move(executor), std::move(remote),
                  std::move(client), reject);
  }

  // EMFILE and friends: accepting again at once would spin.
  void RetryLater(error_code ec) {
    spdlog::warn("http: accept failed: {}; retrying", ec.message());
    retry_.expires_after(std::chrono::milliseconds(kAcceptRetryMs));
    retry_.async_wait([self = this->shared_from_this()](error_code wec) {
      if (!wec && self->acceptor_.is_open()) self->Accept();
    });
  }

  IoLoops& loops_;
  const std::shared_ptr<Core> core_;
  Acceptor acceptor_;
  Timer retry_;
  asio::ssl::context* const tls_;
};

// ---------------------------------------------------------------------------
// Unix socket files.

// A socket file this server bound, by identity: another server may take the
// path after it.
struct UnixPath {
  std::string path;
  uint64_t dev = 0;
  uint64_t ino = 0;
};

// ---------------------------------------------------------------------------

// Ex: the executor of every connection (Strand, or LoopEx with loop_per_thread).
template <typename Ex>
class ServerImpl final : public HttpServer {
 public:
  ServerImpl(ServerOptions options, Handler handler)
      : loops_(options.io_threads, options.loop_per_thread),
        core_(std::make_shared<Core>(std::move(options), std::move(handler))) {}

  ~ServerImpl() override { Stop(kDefaultDrainMs); }

  Result<int> ListenTcp(const std::string& host, int port) override {
    return BindAndListenTcp(host, port, nullptr);
  }

  Result<int> ListenTls(const std::string& host, int port, const TlsFiles& tls) override {
    if (stop_called_) return Status::FailedPrecondition("http server stopped");
    ASSIGN_OR_RETURN(auto ctx, MakeTlsContext(tls));
    tls_contexts_.push_back(std::move(ctx));
    return BindAndListenTcp(host, port, tls_contexts_.back().get());
  }

  Status ListenUnix(const std::string& path, unsigned mode) override {
    if (stop_called_) return Status::FailedPrecondition("http server stopped");
    if (path.empty() || path.size() >= sizeof(sockaddr_un::sun_path)) {
      return Status::InvalidArgument("unix socket path empty or longer than 107 bytes: " + path);
    }
    RETURN_IF_ERROR(os::RemoveStaleUnixSocket(path));
    AcceptorOf<asio::local::stream_protocol> acceptor(asio::make_strand(loops_.First()));
    RETURN_IF_ERROR(BindUnix(acceptor, path, mode));
    AddListener(std::make_shared<Listener<asio::local::stream_protocol, Ex>>(loops_, core_,
                                                                             std::move(acceptor)));
    return Status::OK();
  }

  Result<int> BindAndListenTcp(const std::string& host, int port, asio::ssl::context* tls) {
    if (stop_called_) return Status::FailedPrecondition("http server stopped");
    if (port < 0 || port > 65535)
      return Status::InvalidArgument("port out of range: " + std::to_string(port));
    error_code ec;
    auto addr =
        asio::ip::make_address(host.empty() || host == "localhost" ? "127.0.0.1" : host, ec);
    if (ec) return Status::InvalidArgument("listen host must be an IP address: '" + host + "'");
    asio::ip::tcp::endpoint ep(addr, static_cast<unsigned short>(port));
    AcceptorOf<asio::ip::tcp> acceptor(asio::make_strand(loops_.First()));
    RETURN_IF_ERROR(BindTcp(acceptor, ep));
    int bound = acceptor.local_endpoint(ec).port();
    AddListener(
        std::make_shared<Listener<asio::ip::tcp, Ex>>(loops_, core_, std::move(acceptor), tls));
    return bound;
  }

  Status Start() override {
    if (started_ || stop_called_) return Status::FailedPrecondition("http server already started");
    if (listeners_.empty()) return Status::FailedPrecondition("http server listens nowhere");
    started_ = true;
    for (auto& l : listeners_) l->Accept();
    for (size_t i = 0; i < loops_.size(); ++i) work_.push_back(asio::make_work_guard(loops_.At(i)));
    for (int i = 0; i < core_->options.io_threads; ++i) {
      threads_.emplace_back([this, i] { RunIo(loops_.At(static_cast<size_t>(i))); });
    }
    return Status::OK();
  }

  void Stop(int drain_ms) override {
    if (stop_called_) return;
    stop_called_ = true;
    // 1. No new connections or requests; streams end (their Write returns false).
    core_->MarkDrainingAndEndStreams();
    for (auto& l : listeners_) started_ ? l->PostCloseAndWait() : l->Close();
    for (auto& s : core_->Sessions()) s->PostDrain();
    // 2. In-flight requests finish and their connections close.
    if (started_) core_->WaitNoSessions(Clock::now() + std::chrono::milliseconds(drain_ms));
    // 3. Whatever is left is closed; responders from now on are dropped.
    core_->MarkStopped();
    ForceCloseAndJoin();
    RemoveUnixPaths();
  }

  size_t active_connections() const override { return core_->served(); }

 private:
  template <typename Acceptor, typename Endpoint>
  static Status OpenAndBind(Acceptor& acceptor, const Endpoint& ep, std::string_view what,
                            bool reuse_address) {
    error_code ec;
    acceptor.open(ep.protocol(), ec);
    if (!ec && reuse_address) acceptor.set_option(asio::socket_base::reuse_address(true), ec);
    if (!ec) acceptor.bind(ep, ec);
    if (ec == asio::error::address_in_use)
      return Status::AlreadyExists(std::string(what) + " is in use");
    if (ec) return Status::IoError("bind " + std::string(what) + ": " + ec.message());
    return Status::OK();
  }

  static Status Listen(auto& acceptor, std::string_view what) {
    error_code ec;
    acceptor.listen(asio::socket_base::max_listen_connections, ec);
    if (ec) return Status::IoError("listen " + std::string(what) + ": " + ec.message());
    return Status::OK();
  }

  // SO_REUSEADDR lets a restarted daemon bind while old connections sit in TIME_WAIT.
  static Status BindTcp(AcceptorOf<asio::ip::tcp>& acceptor, const asio::ip::tcp::endpoint& ep) {
    std::string what = ep.address().to_string() + ":" + std::to_string(ep.port());
    RETURN_IF_ERROR(OpenAndBind(acceptor, ep, what, /*reuse_address=*/true));
    return Listen(acceptor, what);
  }

  // The mode is set before listen(), so no client ever connects through a
  // socket file with looser permissions than asked for.
  Status BindUnix(AcceptorOf<asio::local::stream_protocol>& acceptor, const std::string& path,
                  unsigned mode) {
    RETURN_IF_ERROR(OpenAndBind(acceptor, asio::local::stream_protocol::endpoint(path), path,
                                /*reuse_address=*/false));
    if (Status st = os::Chmod(path, mode); !st.ok()) {
      (void)os::RemoveFile(path);  // failing anyway: the chmod error is the one to report
      return st;
    }
    if (auto st = os::StatFile(path); st.ok()) {
      unix_paths_.push_back(UnixPath{path, st->device, st->inode});
    }
    return Listen(acceptor, path);
  }

  void AddListener(std::shared_ptr<ListenerBase> l) {
    if (started_) l->Accept();
    listeners_.push_back(std::move(l));
  }

  // Handlers run inside run(); an exception escaping one must not end the thread.
  void RunIo(asio::io_context& ioc) {
    t_io_thread = true;
    for (;;) {
      try {
        ioc.run();
        return;
      } catch (const std::exception& e) {
        spdlog::error("http: I/O thread caught: {}", e.what());
      }
    }
  }

  void ForceCloseAndJoin() {
    for (auto& s : core_->Sessions()) s->PostClose();
    if (started_) core_->WaitNoSessions(Clock::now() + std::chrono::milliseconds(kCloseSettleMs));
    work_.clear();
    for (size_t i = 0; i < loops_.size(); ++i) loops_.At(i).stop();
    for (auto& t : threads_) t.join();
    threads_.clear();
    // No I/O thread runs now: closing from here cannot race a handler.
    for (auto& s : core_->Sessions()) s->CloseNow();
  }

  // Only if the file is still the one we bound (another server may have taken
  // the path since).
  void RemoveUnixPaths() {
    for (const auto& p : unix_paths_) {
      auto st = os::LstatFile(p.path);
      // Best effort: clean-up: what stays is removed again at the next start or sweep.
      if (st.ok() && st->device == p.dev && st->inode == p.ino) (void)os::RemoveFile(p.path);
    }
    unix_paths_.clear();
  }

  // Destroyed after loops_, whose queued handlers may hold sessions using them.
  std::vector<std::unique_ptr<asio::ssl::context>> tls_contexts_;
  // Destroyed next to last: queued handlers (and the sessions they hold) die with them.
  IoLoops loops_;
  const std::shared_ptr<Core> core_;
  std::vector<std::shared_ptr<ListenerBase>> listeners_;
  std::vector<asio::executor_work_guard<asio::io_context::executor_type>> work_;
  std::vector<std::thread> threads_;
  std::vector<UnixPath> unix_paths_;
  bool started_ = false;
  bool stop_called_ = false;
};

}  // namespace

Result<std::unique_ptr<HttpServer>> HttpServer::Create(ServerOptions options, Handler handler) {
  if (!handler) return Status::InvalidArgument("http server needs a handler");
  if (options.io_threads < 1) return Status::InvalidArgument("io_threads must be at least 1");
  if (options.first_request_timeout_ms <= 0 || options.header_timeout_ms <= 0 ||
      options.body_timeout_ms <= 0 || options.idle_timeout_ms <= 0 ||
      options.write_timeout_ms <= 0) {
    return Status::InvalidArgument("http server timeouts must be positive (milliseconds)");
  }
  if (options.max_connections == 0)
    return Status::InvalidArgument("max_connections must be positive");
  const size_t tcp =
      options.max_tcp_connections == 0 ? options.max_connections : options.max_tcp_connections;
  if (tcp > options.max_connections || options.newcomer_connections >= tcp) {
    return Status::InvalidArgument(
        "max_tcp_connections must not exceed max_connections, and newcomer_connections must be "
        "below both");
  }
  try {
    if (options.loop_per_thread) {
      return std::unique_ptr<HttpServer>(
          new ServerImpl<LoopEx>(std::move(options), std::move(handler)));
    }
    return std::unique_ptr<HttpServer>(
        new ServerImpl<Strand>(std::move(options), std::move(handler)));
  } catch (const std::exception& e) {  // io_context creation (epoll, eventfd) can fail
    return Status::IoError(std::string("http server: ") + e.what());
  }
}

}  // namespace lathe::net

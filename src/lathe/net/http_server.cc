// The HTTP server on Boost.Beast. All Boost includes of the net module live in
// this one file: a Beast translation unit costs ~30 s to compile.
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
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/generic/stream_protocol.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/buffers_to_string.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/chunk_encode.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <future>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include <fmt/format.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <spdlog/spdlog.h>

#include "lathe/net/conn_limits.h"
#include "lathe/net/io_loop.h"
#include "lathe/os/clock.h"
#include "lathe/os/fd.h"
#include "lathe/os/files.h"
#include "lathe/os/stream_socket.h"
#include "lathe/os/unix_socket.h"

namespace lathe::net {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using boost::system::error_code;
using Clock = std::chrono::steady_clock;
// A connection's executor: a strand of the loop when several threads run
// the loop, the loop itself when one thread runs it (loop_per_thread): that
// thread serializes the connection's completions, and a strand would only
// add its queue, its locks and its reference counts to each of them.
// Every I/O object of a server is bound to one of the two (ServerImpl<Ex>).
using Strand = asio::strand<asio::io_context::executor_type>;
using LoopEx = asio::io_context::executor_type;
template <typename Ex>
using TimerOf = asio::basic_waitable_timer<Clock, asio::wait_traits<Clock>, Ex>;
template <typename Ex>
using TcpSocketOf = asio::basic_stream_socket<asio::ip::tcp, Ex>;
template <typename Ex>
using UnixSocketOf = asio::basic_stream_socket<asio::local::stream_protocol, Ex>;
// A tunnel's upstream: any connected stream socket (TCP, unix). A socket, not
// a posix descriptor, so that writes use MSG_NOSIGNAL.
template <typename Ex>
using UpstreamSocketOf = asio::basic_stream_socket<asio::generic::stream_protocol, Ex>;
template <typename Ex>
using TlsStreamOf = beast::ssl_stream<TcpSocketOf<Ex>>;
// The acceptors are on a strand of the first loop, whatever the sessions'.
template <typename Protocol>
using AcceptorOf = asio::basic_socket_acceptor<Protocol, Strand>;
using Timer = TimerOf<Strand>;  // the acceptors' retry timer
using Admission = ConnectionLimits::Admission;

// The socket under a connection's stream: for timeouts (cancel), peeking,
// half-closing and closing.
template <typename Protocol, typename Ex>
asio::basic_stream_socket<Protocol, Ex>& Lowest(asio::basic_stream_socket<Protocol, Ex>& s) {
  return s;
}
template <typename Ex>
TcpSocketOf<Ex>& Lowest(TlsStreamOf<Ex>& s) {
  return s.next_layer();
}
template <typename Stream>
constexpr bool kIsTls = std::is_same_v<Stream, TlsStreamOf<typename Stream::executor_type>>;

// A new connection's executor on `ioc`.
template <typename Ex>
Ex NewExecutor(asio::io_context& ioc) {
  if constexpr (std::is_same_v<Ex, Strand>) {
    return asio::make_strand(ioc);
  } else {
    return ioc.get_executor();
  }
}

constexpr size_t kReadChunkBytes = 16 << 10;  // one idle read into the buffer
constexpr size_t kLingerMaxBytes = 1 << 20;   // discarded after an error response
constexpr int kLingerMs = 2000;               // ... for at most this long
constexpr int kAcceptRetryMs = 100;           // after EMFILE and friends
constexpr int kCloseSettleMs = 1000;          // Stop: wait for posted closes before ioc.stop()
constexpr int kDefaultDrainMs = 5000;         // Stop from the destructor
constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
constexpr size_t kTunnelChunkBytes = 64 << 10;  // one read of a tunnel, each way
constexpr std::string_view kTooManyTunnels = R"({"error":"too many tunnels"})";
constexpr size_t kMaxPemBytes = 1 << 20;  // a certificate chain or a key file
constexpr std::string_view kBadUpstream =
    R"({"error":"tunnel upstream is not a connected socket"})";

// The server's own answers (limits, timeouts, refusals) share the shape of
// the KServe v2 error, {"error": "..."}, so clients of `lathe serve` and of the
// daemon parse one format whoever produced the error.
constexpr std::string_view kJson = "application/json";

std::string_view ErrorBody(int status) {
  switch (status) {
    case 400:
      return R"({"error":"bad request"})";
    case 408:
      return R"({"error":"request header timeout"})";
    case 413:
      return R"({"error":"request body too large"})";
    case 431:
      return R"({"error":"request header too large"})";
    case 503:
      return R"({"error":"too many connections"})";
    default:
      return R"({"error":"internal error"})";
  }
}

// Who a connection comes from: what its requests say of it and what it is
// counted under.
struct Client {
  std::optional<PeerCred> peer;          // a unix-socket client's SO_PEERCRED
  bool loopback = false;                 // a TCP client on this host's loopback
  std::optional<unsigned> loopback_uid;  // ... and the uid owning its socket
  ConnClient count;
};

HttpResponse ErrorResponse(int status, std::string_view body) {
  return HttpResponse{status, std::string(kJson), {}, std::string(body)};
}

// Lets ResponseStream::Write know it must not block: blocking an I/O thread
// could wait for work that only this thread would run.
thread_local bool t_io_thread = false;

// Shared by a ResponseStream (writer side) and its session (socket side).
struct StreamState {
  std::mutex mu;
  std::condition_variable cv;
  uint64_t written = 0;  // highest chunk ticket handed to the socket; guarded by mu
  std::atomic<bool> gone{false};

  void MarkGone() {
    {
      std::lock_guard<std::mutex> l(mu);
      gone = true;
    }
    cv.notify_all();
  }
  void MarkWritten(uint64_t ticket) {
    {
      std::lock_guard<std::mutex> l(mu);
      if (ticket > written) written = ticket;
    }
    cv.notify_all();
  }
};

// What foreign threads (Responder, ResponseStream, Stop) may ask of a session.
// Every method only posts onto the session's strand, except CloseNow, which
// Stop calls once no I/O thread runs, and RespondHere, for the thread that is
// running the session's strand (where RunningHere is true).
class SessionBase {
 public:
  virtual ~SessionBase() = default;
  virtual bool RunningHere() const = 0;
  // The session's strand, as a loop others may run I/O on (Responder::loop).
  virtual IoLoop* Loop() = 0;
  virtual void RespondHere(uint64_t seq, HttpResponse response) = 0;
  virtual void PostResponse(uint64_t seq, HttpResponse response) = 0;
  virtual void PostStreamStart(uint64_t seq, std::shared_ptr<StreamState> st, int status,
                               std::string content_type, Headers headers) = 0;
  virtual void PostChunk(std::shared_ptr<StreamState> st, std::string data, uint64_t ticket,
                         bool last) = 0;
  virtual void PostTunnel(uint64_t seq, HttpResponse head, os::Fd upstream, std::string leftover,
                          TunnelOptions options) = 0;
  virtual void PostDrain() = 0;
  virtual void PostClose() = 0;
  virtual void CloseNow() = 0;
};

// State shared between the server, its sessions and outstanding responders.
class Core {
 public:
  Core(ServerOptions options, Handler handler)
      : options(std::move(options)),
        handler(std::move(handler)),
        limits_(ConnLimitOptions{this->options.max_connections, this->options.max_tcp_connections,
                                 this->options.newcomer_connections,
                                 this->options.reserved_connections}) {}

  const ServerOptions options;
  const Handler handler;
  std::atomic<bool> draining{false};

  // Runs fn(session) with the lock held, unless the server stopped or the
  // session is gone. fn must only post (never run session code inline).
  template <typename Fn>
  bool WithSession(const std::weak_ptr<SessionBase>& weak, Fn&& fn) {
    std::lock_guard<std::mutex> l(mu_);
    if (stopped_) return false;
    std::shared_ptr<SessionBase> s = weak.lock();
    if (!s) return false;
    fn(*s);
    return true;
  }

  // Requires mu_ (call inside WithSession). Stop marks tracked streams gone.
  void TrackStreamLocked(const std::shared_ptr<StreamState>& st) {
    if (draining) st->gone = true;
    if (streams_.size() >= streams_cap_) {
      std::erase_if(streams_, [](const auto& w) { return w.expired(); });
      streams_cap_ = std::max<size_t>(16, streams_.size() * 2);
    }
    streams_.push_back(st);
  }

  // Decides how a new connection is treated: served, refused with a 503
  // (over a pool's limit, or over its client's), or closed at once (too many
  // refusals in flight).
  Admission Admit(const ConnClient& c) { return limits_.Admit(c); }

  // Logs refusals, a line at most every refusal_log_interval_ms
  // (conn_limits.h) with how many there were: a client hammering the server
  // cannot fill its log, and the operator still learns who is refused.
  void NoteRefusal(const ConnClient& c, Admission why) {
    const int64_t now_ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now().time_since_epoch())
            .count();
    auto r = limits_.NoteRefusal(c, why, now_ms);
    if (!r) return;
    std::string reason = "every connection it may use is taken";
    if (why == Admission::kRejectClient) {
      reason = fmt::format("it holds its limit of {}", r->limit);
    } else if (why == Admission::kDrop) {
      reason = "over a limit, with too many refusals in flight: closed without an answer";
    }
    spdlog::warn("{}: refused {} connection(s) over the connection limits; the latest from {}: {}",
                 options.server_name, r->refused, r->key, reason);
  }

  void Register(std::shared_ptr<SessionBase> s) {
    std::lock_guard<std::mutex> l(mu_);
    SessionBase* key = s.get();
    sessions_.emplace(key, std::move(s));
  }

  // Called by the session when it closes; may drop the last strong reference.
  void Unregister(SessionBase* s, bool served, const ConnClient& client) {
    std::shared_ptr<SessionBase> keep;  // destroyed after the lock is released
    {
      std::lock_guard<std::mutex> l(mu_);
      auto it = sessions_.find(s);
      if (it == sessions_.end()) return;
      keep = std::move(it->second);
      sessions_.erase(it);
    }
    limits_.Release(client, served);
    empty_cv_.notify_all();
  }

  std::vector<std::shared_ptr<SessionBase>> Sessions() const {
    std::lock_guard<std::mutex> l(mu_);
    std::vector<std::shared_ptr<SessionBase>> out;
    out.reserve(sessions_.size());
    for (const auto& [key, s] : sessions_) out.push_back(s);
    return out;
  }

  bool WaitNoSessions(Clock::time_point deadline) {
    std::unique_lock<std::mutex> l(mu_);
    return empty_cv_.wait_until(l, deadline, [&] { return sessions_.empty(); });
  }

  void MarkDrainingAndEndStreams() {
    std::lock_guard<std::mutex> l(mu_);
    draining = true;
    for (const auto& w : streams_) {
      if (auto st = w.lock()) st->MarkGone();
    }
  }

  // After this no foreign thread posts anything; every open stream is gone.
  void MarkStopped() {
    std::lock_guard<std::mutex> l(mu_);
    stopped_ = true;
    for (const auto& w : streams_) {
      if (auto st = w.lock()) st->MarkGone();
    }
    streams_.clear();
  }

  size_t served() const { return limits_.served(); }

  // A slot for one more tunnel, unless max_tunnels are open.
  bool AcquireTunnel() {
    std::lock_guard<std::mutex> l(mu_);
    if (tunnels_ >= options.max_tunnels) return false;
    ++tunnels_;
    return true;
  }
  void ReleaseTunnel() {
    std::lock_guard<std::mutex> l(mu_);
    --tunnels_;
  }

 private:
  mutable std::mutex mu_;
  std::condition_variable empty_cv_;
  bool stopped_ = false;                                                     // guarded by mu_
  std::unordered_map<SessionBase*, std::shared_ptr<SessionBase>> sessions_;  // guarded by mu_
  std::vector<std::weak_ptr<StreamState>> streams_;                          // guarded by mu_
  size_t streams_cap_ = 16;                                                  // guarded by mu_
  size_t tunnels_ = 0;                                                       // guarded by mu_
  ConnectionLimits limits_;  // thread-safe on its own
};

// ---------------------------------------------------------------------------
// Responder and ResponseStream: thin handles that post onto the session.

class StreamImpl final : public ResponseStream {
 public:
  StreamImpl(std::shared_ptr<Core> core, std::weak_ptr<SessionBase> session,
             std::shared_ptr<StreamState> st)
      : core_(std::move(core)), session_(std::move(session)), st_(std::move(st)) {}
  ~StreamImpl() override { Close(); }

  bool Write(std::string_view data) override {
    if (closed_ || st_->gone) return false;
    if (data.empty()) return true;
    uint64_t ticket = ++issued_;
    std::string copy(data);
    bool posted = core_->WithSession(
        session_, [&](SessionBase& s) { s.PostChunk(st_, std::move(copy), ticket, false); });
    if (!posted) {
      st_->MarkGone();
      return false;
    }
    if (t_io_thread) return !st_->gone;
    std::unique_lock<std::mutex> l(st_->mu);
    st_->cv.wait(l, [&] { return st_->written >= ticket || st_->gone; });
    return !st_->gone;
  }

  void Close() override {
    if (closed_) return;
    closed_ = true;
    core_->WithSession(session_, [&](SessionBase& s) { s.PostChunk(st_, {}, 0, true); });
  }

  bool ClientGone() const override { return st_->gone; }

 private:
  const std::shared_ptr<Core> core_;
  const std::weak_ptr<SessionBase> session_;
  const std::shared_ptr<StreamState> st_;
  uint64_t issued_ = 0;  // tickets of this writer's chunks
  bool closed_ = false;
};

class ResponderImpl final : public Responder {
 public:
  ResponderImpl(std::shared_ptr<Core> core, std::weak_ptr<SessionBase> session, uint64_t seq)
      : core_(std::move(core)), session_(std::move(session)), seq_(seq) {}

  ~ResponderImpl() override {
    if (!done_) Send(ErrorResponse(500, R"({"error":"handler dropped the request"})"));
  }

  void Send(HttpResponse response) override {
    if (done_) {
      spdlog::error("http: Responder used twice; the second answer is dropped");
      return;
    }
    done_ = true;
    // A handler answering before it returns (or from a callback on the same
    // I/O thread) writes at once instead of a round trip through the loop.
    if (std::shared_ptr<SessionBase> s = SessionHere()) {
      return s->RespondHere(seq_, std::move(response));
    }
    core_->WithSession(session_,
                       [&](SessionBase& s) { s.PostResponse(seq_, std::move(response)); });
  }

  std::unique_ptr<ResponseStream> StartStream(int status, std::string content_type,
                                              Headers headers) override {
    auto st = std::make_shared<StreamState>();
    bool posted = false;
    if (done_) {
      spdlog::error("http: Responder used twice; the stream is dropped");
    } else {
      done_ = true;
      posted = core_->WithSession(session_, [&](SessionBase& s) {
        core_->TrackStreamLocked(st);
        s.PostStreamStart(seq_, st, status, std::move(content_type), std::move(headers));
      });
    }
    if (!posted) st->MarkGone();
    return std::make_unique<StreamImpl>(core_, session_, std::move(st));
  }

  IoLoop* loop() override {
    if (done_) return nullptr;
    std::shared_ptr<SessionBase> s = SessionHere();
    return s != nullptr ? s->Loop() : nullptr;
  }

  void Tunnel(HttpResponse head, int upstream_fd, std::string upstream_leftover,
              TunnelOptions options) override {
    os::Fd upstream(upstream_fd);  // closed here unless the session takes it
    if (done_) {
      spdlog::error("http: Responder used twice; the tunnel is dropped");
      return;
    }
    done_ = true;
    core_->WithSession(session_, [&](SessionBase& s) {
      s.PostTunnel(seq_, std::move(head), std::move(upstream), std::move(upstream_leftover),
                   options);
    });
  }

 private:
  // The session, when this thread is running its strand: its loop runs, so
  // it may be used without Core's lock (which every loop thread would
  // otherwise take twice per request). nullptr elsewhere.
  std::shared_ptr<SessionBase> SessionHere() const {
    if (!t_io_thread) return nullptr;
    std::shared_ptr<SessionBase> s = session_.lock();
    return s != nullptr && s->RunningHere() ? s : nullptr;
  }

  const std::shared_ptr<Core> core_;
  const std::weak_ptr<SessionBase> session_;
  const uint64_t seq_;
  bool done_ = false;
};

// ---------------------------------------------------------------------------
// Helpers free of session state.

bool IsQuietReadError(const error_code& ec) {
  return ec == asio::error::eof || ec == http::error::end_of_stream ||
         ec == http::error::partial_message || ec == asio::error::connection_reset ||
         ec == asio::error::operation_aborted || ec == asio::error::bad_descriptor ||
         ec == asio::error::broken_pipe || ec == asio::ssl::error::stream_truncated;
}

bool IsParseError(const error_code& ec) {
  return &ec.category() == &http::make_error_code(http::error::bad_target).category();
}

std::string_view ToStd(beast::string_view s) { return {s.data(), s.size()}; }

// Whether a request's header bytes (request line and fields, as the parser
// took them) fold a field over lines (obs-fold: CRLF then a space or tab).
// Beast's parser joins such lines; RFC 9112 (5.2) has a server refuse them,
// since a proxy in front of it may read the same bytes differently.
bool HasObsFold(std::string_view header) {
  for (size_t nl = header.find('\n'); nl != std::string_view::npos && nl + 1 < header.size();
       nl = header.find('\n', nl + 1)) {
    if (header[nl + 1] == ' ' || header[nl + 1] == '\t') return true;
  }
  return false;
}

// The status a request's framing gets refused with, or 0 (RFC 9112 6.1,
// 6.3, 3.2): a transfer coding other than exactly "chunked" (chunked last
// after another, "chunked, identity", "xchunked"), Transfer-Encoding beside
// Content-Length, and a second Host field — each a way for two parsers in a
// row to see two different requests in the same bytes.
template <typename Fields>
int FramingError(const Fields& msg) {
  if (msg.count(http::field::host) > 1) return 400;
  auto te = msg.find(http::field::transfer_encoding);
  if (te == msg.end()) return 0;
  if (msg.count(http::field::transfer_encoding) > 1) return 400;
  if (msg.find(http::field::content_length) != msg.end()) return 400;
  std::string_view v = ToStd(te->value());
  while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1);
  while (!v.empty() && (v.back() == ' ' || v.back() == '\t')) v.remove_suffix(1);
  if (EqualsIgnoreCase(v, "chunked")) return 0;
  return v.find(',') == std::string_view::npos ? 501 : 400;
}

// Timer::cancel has no error_code overload; it throws only if the reactor fails.
template <typename T>
void CancelTimer(T& timer) {
  try {
    timer.cancel();
  } catch (const std::exception& e) {
    spdlog::error("http: cancelling a timer: {}", e.what());
  }
}

unsigned SafeStatus(int status) {
  return (status >= 100 && status <= 999) ? static_cast<unsigned>(status) : 500u;
}

// Throws std::invalid_argument for a header field the server must not send:
// a name that is not a token, or a value with CR, LF or NUL in it (it would
// split the answer). Beast 1.74 checks only their lengths.
// Byte by byte against a table, not with string_view's find_first_of,
// which calls memchr over the set once per byte of the value: every field of
// every answer passes here.
constexpr std::array<bool, 256> kTokenChar = [] {
  std::array<bool, 256> t{};
  for (int c = 0x21; c < 0x7f; ++c) t[static_cast<size_t>(c)] = true;
  for (char c : std::string_view("\"(),/:;<=>?@[\\]{}")) t[static_cast<unsigned char>(c)] = false;
  return t;
}();
void CheckField(std::string_view name, std::string_view value) {
  if (name.empty() || !std::all_of(name.begin(), name.end(), [](char c) {
        return kTokenChar[static_cast<unsigned char>(c)];
      })) {
    throw std::invalid_argument("bad header name");
  }
  for (char c : value) {
    if (c == '\r' || c == '\n' || c == '\0') throw std::invalid_argument("bad header value");
  }
}

// 1xx, 204 and 304 answers have no body and no Content-Length.
bool HasNoBody(unsigned code) { return code < 200 || code == 204 || code == 304; }

// Fills the parts common to streamed responses and tunnel heads. Throws on
// values it cannot send (CheckField, and Beast's own limits); the caller catches.
template <typename Body>
void FillHeader(const ServerOptions& options, int status, const std::string& content_type,
                const Headers& headers, http::response<Body>& res) {
  res.result(SafeStatus(status));
  res.set(http::field::server, options.server_name);
  if (!content_type.empty()) res.set(http::field::content_type, content_type);
  for (const auto& [name, value] : headers) {
    CheckField(name, value);
    res.insert(name, value);
  }
}

// A whole response's status line and header, in `out` (cleared first; its
// capacity is kept, so a connection renders its answers without allocating).
// Written by hand rather than with Beast's serializer, which keeps a node per
// header field and walks a buffer sequence of them for every write: a whole
// response is the server's hottest path (the deployments' front answers
// every forwarded request with one). Beast's rules kept: the Server field,
// Content-Type when given, the handler's fields in order, Connection: close
// when the connection ends, Content-Length unless HasNoBody. Fields that are
// the server's to compute (Content-Length, Transfer-Encoding, Connection) are
// not taken from the handler. Throws as CheckField does; the caller answers 500.
void RenderHead(const ServerOptions& options, const HttpResponse& r, bool keep, std::string& out) {
  const unsigned code = SafeStatus(r.status);
  auto field = [&](std::string_view name, std::string_view value) {
    CheckField(name, value);
    out.append(name).append(": ").append(value).append("\r\n");
  };
  out.clear();
  out.append("HTTP/1.1 ").append(std::to_string(code)).append(" ");
  out.append(ToStd(http::obsolete_reason(http::int_to_status(code)))).append("\r\n");
  field("Server", options.server_name);
  if (!r.content_type.empty()) field("Content-Type", r.content_type);
  for (const auto& [name, value] : r.headers) {
    if (EqualsIgnoreCase(name, "content-length") || EqualsIgnoreCase(name, "transfer-encoding") ||
        EqualsIgnoreCase(name, "connection")) {
      continue;
    }
    field(name, value);
  }
  if (!keep) out.append("Connection: close\r\n");
  if (!HasNoBody(code)) {
    out.append("Content-Length: ").append(std::to_string(r.body.size())).append("\r\n");
  }
  out.append("\r\n");
}

// Splits the target and copies the parsed message into the public type.
HttpRequest ToHttpRequest(http::request<http::string_body>&& msg) {
  HttpRequest req;
  req.method = std::string(msg.method_string());
  req.target = std::string(msg.target());
  std::string_view target = req.target;
  size_t q = target.find('?');
  req.path = PercentDecode(target.substr(0, q), false);
  if (q != std::string_view::npos) req.query = std::string(target.substr(q + 1));
  for (const auto& field : msg) {
    req.headers.emplace_back(std::string(field.name_string()), std::string(field.value()));
  }
  req.body = std::move(msg.body());
  return req;
}

// ---------------------------------------------------------------------------
// Session: one connection. Every method below runs on the session's strand.
//
// States (the allowed moves):
//   kIdle (waiting for a request's first byte) → kReadingHeader → kReadingBody
//   → kHandling (the handler owns the Responder) → kWriting | kStreaming
//   → kIdle (keep-alive) | kClosing (lingering after an error) → kClosed;
//   kHandling → kTunnelHead (writing a tunnel's head) → kTunnel (copying)
//   → kTunnelEnding (waiting for cancelled operations) → kClosed.
//   Any state → kClosed on an I/O error, a timeout or Stop.
//
// `Stream` is the connection: a TCP or unix socket, or TLS over TCP (which
// starts with the handshake, under first_request_timeout_ms).
template <typename Stream>
class Session final : public SessionBase, public std::enable_shared_from_this<Session<Stream>> {
 public:
  // `reject`: empty to serve, else the 503 body its one request gets.
  using Ex = typename Stream::executor_type;  // Strand or LoopEx
  using Timer = TimerOf<Ex>;
  using UpstreamSocket = UpstreamSocketOf<Ex>;

  Session(std::shared_ptr<Core> core, Stream conn, Ex executor, std::string remote, Client client,
          std::string_view reject)
      : core_(std::move(core)),
        options_(core_->options),
        strand_(std::move(executor)),
        conn_(std::move(conn)),
        timer_(strand_),
        remote_(std::move(remote)),
        client_(std::move(client)),
        reject_(reject) {}

  void Start() {
    asio::post(strand_, [self = Self()] {
      if constexpr (kIsTls<Stream>) {
        self->Handshake();
      } else {
        self->ReadRequest();
      }
    });
  }

  bool RunningHere() const override { return strand_.running_in_this_thread(); }
  IoLoop* Loop() override { return &loop_; }

  void RespondHere(uint64_t seq, HttpResponse response) override {
    OnResponse(seq, std::move(response));
  }

  void PostResponse(uint64_t seq, HttpResponse response) override {
    asio::post(strand_, [self = Self(), seq, r = std::move(response)]() mutable {
      self->OnResponse(seq, std::move(r));
    });
  }

  void PostStreamStart(uint64_t seq, std::shared_ptr<StreamState> st, int status,
                       std::string content_type, Headers headers) override {
    asio::post(strand_, [self = Self(), seq, st = std::move(st), status,
                         ct = std::move(content_type), h = std::move(headers)]() mutable {
      self->OnStreamStart(seq, std::move(st), status, ct, h);
    });
  }

  void PostChunk(std::shared_ptr<StreamState> st, std::string data, uint64_t ticket,
                 bool last) override {
    asio::post(strand_, [self = Self(), st = std::move(st), d = std::move(data), ticket,
                         last]() mutable { self->EnqueueChunk(st, std::move(d), ticket, last); });
  }

  void PostTunnel(uint64_t seq, HttpResponse head, os::Fd upstream, std::string leftover,
                  TunnelOptions options) override {
    asio::post(strand_, [self = Self(), seq, h = std::move(head), up = std::move(upstream),
                         left = std::move(leftover), options]() mutable {
      self->OnTunnelStart(seq, std::move(h), std::move(up), std::move(left), options);
    });
  }

  void PostDrain() override {
    asio::post(strand_, [self = Self()] { self->OnDrain(); });
  }

  void PostClose() override {
    asio::post(strand_, [self = Self()] { self->Close(); });
  }

  void CloseNow() override { Close(); }

 private:
  enum class State {
    kIdle,
    kReadingHeader,
    kReadingBody,
    kHandling,
    kWriting,
    kStreaming,
    kTunnelHead,
    kTunnel,
    kTunnelEnding,
    kClosing,
    kClosed
  };
  struct Chunk {
    std::string data;
    uint64_t ticket = 0;  // 0: written from an I/O thread, nobody waits
    bool last = false;
  };

  std::shared_ptr<Session> Self() { return this->shared_from_this(); }

  // --- deadlines -----------------------------------------------------------
  // One timer per session, re-armed lazily: moving the deadline later only
  // stores it; the timer notices when it fires. Keeps the per-request cost to a
  // clock read.

  // The coarse clock (os/clock.h): a deadline may fall a few ms early, and
  // a request sets three.
  void SetDeadline(int ms) {
    deadline_ = Clock::time_point(std::chrono::nanoseconds(os::CoarseMonotonicNs())) +
                std::chrono::milliseconds(ms);
    timed_out_ = false;
    if (!timer_armed_ || timer_.expiry() > deadline_) ArmTimer(deadline_);
  }

  void ClearDeadline() { deadline_ = Clock::time_point::max(); }

  void ArmTimer(Clock::time_point at) {
    timer_.expires_at(at);
    timer_armed_ = true;
    uint64_t gen = ++timer_gen_;
    timer_.async_wait([self = Self(), gen](error_code ec) { self->OnTimer(gen, ec); });
  }

  void OnTimer(uint64_t gen, error_code ec) {
    if (gen != timer_gen_) return;  // superseded by a later ArmTimer
    timer_armed_ = false;
    if (ec || state_ == State::kClosed || deadline_ == Clock::time_point::max()) return;
    if (Clock::now() < deadline_) return ArmTimer(deadline_);
    if (state_ == State::kTunnel) return EndTunnel();
    // Cancel rather than close, so the read handler can still answer 408.
    timed_out_ = true;
    error_code ignored;
    Lowest(conn_).cancel(ignored);
  }

  // --- TLS -----------------------------------------------------------------

  void Handshake() {
    if constexpr (kIsTls<Stream>) {
      SetDeadline(options_.first_request_timeout_ms);
      conn_.async_handshake(asio::ssl::stream_base::server, [self = Self()](error_code ec) {
        if (ec) {
          spdlog::debug("http {}: TLS handshake: {}", self->remote_, ec.message());
          return self->Close();
        }
        self->ReadRequest();
      });
    }
  }

  // --- reading a request ---------------------------------------------------

  void ReadRequest() {
    if (core_->draining) return Close();
    parser_.emplace();
    parser_->header_limit(
        static_cast<uint32_t>(std::min<size_t>(options_.max_header_bytes, UINT32_MAX)));
    parser_->body_limit(options_.max_body_bytes);
    if (buffer_.size() > 0) {  // pipelined: the next request is already here
      SetDeadline(options_.header_timeout_ms);
      return ParseBuffered();
    }
    state_ = State::kIdle;
    SetDeadline(first_request_ ? options_.first_request_timeout_ms : options_.idle_timeout_ms);
    conn_.async_read_some(buffer_.prepare(kReadChunkBytes),
                          [self = Self()](error_code ec, size_t n) { self->OnIdleRead(ec, n); });
  }

  void OnIdleRead(error_code ec, size_t n) {
    // A read that finished just as the timer fired still counts as too late.
    if (!ec && timed_out_) ec = asio::error::timed_out;
    if (ec) return OnReadError(ec);
    buffer_.commit(n);
    if (!first_request_) SetDeadline(options_.header_timeout_ms);
    ParseBuffered();
  }

  // A small request usually arrives whole in one read. Beast's read operations
  // complete through the I/O loop (a post each) when the bytes are already
  // buffered, so the header is parsed here; a partial one goes on through them.
  // The parser takes a header only whole (it answers need_more and takes
  // nothing until the blank line is in), so the bytes it took when the
  // header is done are exactly the header's: they are checked for obs-fold.
  void ParseBuffered() {
    state_ = State::kReadingHeader;
    error_code ec;
    obs_fold_ = false;
    while (!ec && !parser_->is_header_done() && buffer_.size() > 0) {
      const auto in = buffer_.data();
      const size_t used = parser_->put(in, ec);
      if (!ec && parser_->is_header_done()) {
        obs_fold_ = HasObsFold({static_cast<const char*>(in.data()), used});
      }
      buffer_.consume(used);
    }
    if (ec == http::error::need_more || (!ec && !parser_->is_header_done())) return ReadHeader();
    OnHeader(ec);
  }

  // More of a header that is not whole yet: read, then parse what is buffered.
  void ReadHeader() {
    state_ = State::kReadingHeader;
    conn_.async_read_some(buffer_.prepare(kReadChunkBytes),
                          [self = Self()](error_code ec, size_t n) {
                            if (!ec && self->timed_out_) ec = asio::error::timed_out;
                            if (ec) return self->OnReadError(ec);
                            self->buffer_.commit(n);
                            self->ParseBuffered();
                          });
  }

  void OnHeader(error_code ec) {
    if (ec) return OnReadError(ec);
    first_request_ = false;
    const auto& msg = parser_->get();
    if (obs_fold_) return SendError(400);
    if (int status = FramingError(msg); status != 0) return SendError(status);
    auto expect = msg.find(http::field::expect);
    if (expect != msg.end() && !parser_->is_done() &&
        EqualsIgnoreCase(ToStd(expect->value()), "100-continue")) {
      return asio::async_write(conn_, asio::buffer(kContinue.data(), kContinue.size()),
                               [self = Self()](error_code ec, size_t) {
                                 if (ec) return self->Close();
                                 self->ReadBody();
                               });
    }
    ReadBody();
  }

  void ReadBody() {
    error_code ec;  // the body, or what of it is buffered (see ParseBuffered)
    while (!ec && !parser_->is_done() && buffer_.size() > 0) {
      buffer_.consume(parser_->put(buffer_.data(), ec));
    }
    if (ec && ec != http::error::need_more) return OnReadError(ec);
    if (parser_->is_done()) return OnRequest();
    state_ = State::kReadingBody;
    SetDeadline(options_.body_timeout_ms);
    http::async_read(conn_, buffer_, *parser_, [self = Self()](error_code ec, size_t) {
      if (ec) return self->OnReadError(ec);
      self->OnRequest();
    });
  }

  void OnReadError(error_code ec) {
    if (state_ == State::kClosed) return;
    if (timed_out_) return state_ == State::kReadingHeader ? SendError(408) : Close();
    if (ec == http::error::body_limit) return SendError(413);
    if (ec == http::error::header_limit) return SendError(431);
    if (IsParseError(ec) && !IsQuietReadError(ec)) return SendError(400);
    if (!IsQuietReadError(ec)) spdlog::debug("http {}: read: {}", remote_, ec.message());
    Close();
  }

  // --- handling ------------------------------------------------------------

  void OnRequest() {
    ClearDeadline();
    state_ = State::kHandling;
    ++seq_;
    keep_alive_ = parser_->get().keep_alive();
    HttpRequest req = ToHttpRequest(parser_->release());
    req.peer = client_.peer;
    req.remote = remote_;
    req.loopback = client_.loopback;
    req.loopback_uid = client_.loopback_uid;
    if (!reject_.empty()) return SendError(503, reject_);
    auto responder = std::make_unique<ResponderImpl>(core_, this->weak_from_this(), seq_);
    try {
      core_->handler(std::move(req), std::move(responder));
    } catch (const std::exception& e) {
      spdlog::error("http {}: handler threw: {}", remote_, e.what());
    } catch (...) {
      spdlog::error("http {}: handler threw", remote_);
    }
  }

  void SendError(int status, std::string_view body = {}) {
    keep_alive_ = false;
    linger_ = true;
    state_ = State::kHandling;
    WriteResponse(ErrorResponse(status, body.empty() ? ErrorBody(status) : body));
  }

  // --- whole responses -----------------------------------------------------

  void OnResponse(uint64_t seq, HttpResponse r) {
    if (seq != seq_ || state_ != State::kHandling) return;
    WriteResponse(std::move(r));
  }

  void WriteResponse(HttpResponse r) {
    state_ = State::kWriting;
    write_keep_ = keep_alive_ && !core_->draining;
    try {
      RenderHead(options_, r, write_keep_, head_);
      body_ = HasNoBody(SafeStatus(r.status)) ? std::string() : std::move(r.body);
    } catch (const std::exception& e) {
      spdlog::error("http {}: unsendable response: {}", remote_, e.what());
      HttpResponse error = ErrorResponse(500, R"({"error":"unsendable response"})");
      RenderHead(options_, error, write_keep_, head_);
      body_ = std::move(error.body);
    }
    SetDeadline(options_.write_timeout_ms);
    std::array<asio::const_buffer, 2> out{asio::buffer(head_), asio::buffer(body_)};
    asio::async_write(conn_, out, [self = Self()](error_code ec, size_t) { self->OnWritten(ec); });
  }

  void OnWritten(error_code ec) {
    ClearDeadline();
    body_ = std::string();
    if (ec) return Close();
    if (linger_) return Linger();
    if (!write_keep_) return GracefulClose();
    ReadRequest();
  }

  // --- streamed responses --------------------------------------------------

  void OnStreamStart(uint64_t seq, std::shared_ptr<StreamState> st, int status,
                     const std::string& content_type, const Headers& headers) {
    if (seq != seq_ || state_ != State::kHandling) return st->MarkGone();
    state_ = State::kStreaming;
    stream_ = std::move(st);
    last_queued_ = false;
    stream_res_.emplace();
    try {
      FillHeader(options_, status, content_type, headers, *stream_res_);
    } catch (const std::exception& e) {
      spdlog::error("http {}: unsendable stream header: {}", remote_, e.what());
      stream_res_.emplace();
      FillHeader(options_, 500, "text/plain", {}, *stream_res_);
    }
    stream_res_->keep_alive(keep_alive_ && !core_->draining);
    stream_res_->chunked(true);
    stream_sr_.emplace(*stream_res_);
    header_pending_ = true;
    if (stream_->gone) queue_.push_back(Chunk{{}, 0, true}), last_queued_ = true;
    Pump();
    WatchPeer();
  }

  void EnqueueChunk(const std::shared_ptr<StreamState>& st, std::string data, uint64_t ticket,
                    bool last) {
    if (st != stream_ || last_queued_ || (!last && st->gone)) {
      if (!last) st->MarkGone();
      return;
    }
    last_queued_ = last;
    queue_.push_back(Chunk{std::move(data), ticket, last});
    Pump();
  }

  // Writes the header, then queued chunks, one at a time.
  void Pump() {
    if (writing_ || state_ != State::kStreaming) return;
    if (header_pending_) {
      header_pending_ = false;
      return StartStreamWrite([this](auto handler) {
        http::async_write_header(conn_, *stream_sr_, std::move(handler));
      });
    }
    if (queue_.empty()) return ClearDeadline();
    const Chunk& c = queue_.front();
    if (c.last) {
      return StartStreamWrite([this](auto handler) {
        asio::async_write(conn_, http::make_chunk_last(), std::move(handler));
      });
    }
    StartStreamWrite([this, &c](auto handler) {
      asio::async_write(conn_, http::make_chunk(asio::buffer(c.data)), std::move(handler));
    });
  }

  template <typename Initiate>
  void StartStreamWrite(Initiate initiate) {
    writing_ = true;
    SetDeadline(options_.write_timeout_ms);
    initiate([self = Self()](error_code ec, size_t) { self->OnStreamWritten(ec); });
  }

  void OnStreamWritten(error_code ec) {
    writing_ = false;
    if (ec || state_ != State::kStreaming) return StreamFailed();
    if (!header_written_) {  // the first write of a stream is its header
      header_written_ = true;
      return Pump();
    }
    Chunk c = std::move(queue_.front());
    queue_.pop_front();
    if (c.ticket != 0) stream_->MarkWritten(c.ticket);
    if (c.last) return EndStream();
    Pump();
  }

  void EndStream() {
    ClearDeadline();
    bool keep = stream_res_->keep_alive();
    stream_.reset();  // chunks posted after the end now fail their Write
    stream_sr_.reset();
    stream_res_.reset();
    header_written_ = false;
    if (!keep) return GracefulClose();
    ReadRequest();
  }

  void StreamFailed() {
    if (stream_) stream_->MarkGone();
    Close();
  }

  // Notices a client that hangs up mid-stream without waiting for a write to
  // fail: readable + a zero-byte peek means EOF. Data (a pipelined request) is
  // left in the kernel for ReadRequest; write errors then catch a hang-up.
  void WatchPeer() {
    if (watching_) return;
    watching_ = true;
    Lowest(conn_).async_wait(asio::socket_base::wait_read, [self = Self()](error_code ec) {
      self->watching_ = false;
      if (ec || self->state_ != State::kStreaming) return;
      self->PeekPeer();
    });
  }

  void PeekPeer() {
    char c;
    ssize_t r = ::recv(Lowest(conn_).native_handle(), &c, 1, MSG_PEEK | MSG_DONTWAIT);
    if (r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
      return StreamFailed();
    }
    if (r < 0) WatchPeer();
  }

  // --- tunnels ---------------------------------------------------------------
  // Two copy loops, each one read then one write at a time: client → upstream
  // and upstream → client. A loop that reads EOF shuts down the other side's
  // sending half and ends the tunnel: what is still pending on either side is
  // cancelled, and once every operation has returned the connection closes.
  // So bytes read before an EOF always reach the other side first.

  void OnTunnelStart(uint64_t seq, HttpResponse head, os::Fd upstream, std::string leftover,
                     TunnelOptions to) {
    if (seq != seq_ || state_ != State::kHandling) return;  // `upstream` closes with it
    if (!core_->AcquireTunnel()) return SendError(503, kTooManyTunnels);
    tunnel_slot_ = true;
    if (!AdoptUpstream(std::move(upstream))) return SendError(502, kBadUpstream);
    state_ = State::kTunnelHead;
    tunnel_idle_ms_ = to.idle_timeout_ms > 0 ? to.idle_timeout_ms : TunnelOptions{}.idle_timeout_ms;
    on_client_bytes_ = std::move(to.on_client_bytes);
    to_client_ = std::move(leftover);
    stream_res_.emplace();
    try {
      FillHeader(options_, head.status, head.status >= 200 ? head.content_type : std::string(),
                 head.headers, *stream_res_);
    } catch (const std::exception& e) {
      spdlog::error("http {}: unsendable tunnel head: {}", remote_, e.what());
      stream_res_.reset();
      state_ = State::kHandling;
      return SendError(500, R"({"error":"unsendable tunnel head"})");
    }
    SetDeadline(options_.write_timeout_ms);
    http::async_write(conn_, *stream_res_,
                      [self = Self()](error_code ec, size_t) { self->OnTunnelHead(ec); });
  }

  // The upstream socket's family decides the protocol asio is told of.
  bool AdoptUpstream(os::Fd fd) {
    sockaddr_storage addr{};
    socklen_t len = sizeof(addr);
    if (!fd.valid() || ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      spdlog::error("http {}: tunnel upstream fd {} is not a socket", remote_, fd.get());
      return false;
    }
    error_code ec;
    upstream_.emplace(strand_);
    upstream_->assign(asio::generic::stream_protocol(addr.ss_family, 0), fd.get(), ec);
    if (ec) {
      spdlog::error("http {}: tunnel upstream: {}", remote_, ec.message());
      upstream_.reset();
      return false;
    }
    (void)fd.release();  // the asio socket owns it now
    return true;
  }

  void OnTunnelHead(error_code ec) {
    stream_res_.reset();
    if (ec || state_ != State::kTunnelHead || core_->draining) return Close();
    state_ = State::kTunnel;
    TunnelActivity();
    // Bytes the client sent after its request head sit in the read buffer.
    to_upstream_ = beast::buffers_to_string(buffer_.data());
    buffer_.clear();
    if (on_client_bytes_ && !to_upstream_.empty()) on_client_bytes_(to_upstream_);
    to_upstream_.empty() ? ReadClient() : WriteUpstream();
    to_client_.empty() ? ReadUpstream() : WriteClient();
  }

  void TunnelActivity() { SetDeadline(tunnel_idle_ms_); }

  // False while the tunnel runs; once it is ending, the last operation to
  // return closes the connection.
  bool TunnelOver() {
    if (state_ == State::kTunnel) return false;
    if (state_ == State::kTunnelEnding && client_ops_ == 0 && upstream_ops_ == 0) GracefulClose();
    return true;
  }

  void ReadClient() {
    to_upstream_.resize(kTunnelChunkBytes);
    ++client_ops_;
    conn_.async_read_some(asio::buffer(to_upstream_), [self = Self()](error_code ec, size_t n) {
      --self->client_ops_;
      if (self->TunnelOver()) return;
      if (n == 0) return self->OnTunnelEof(ec, /*client=*/true);
      self->to_upstream_.resize(n);
      if (self->on_client_bytes_) self->on_client_bytes_(self->to_upstream_);
      self->TunnelActivity();
      self->WriteUpstream();
    });
  }

  void WriteUpstream() {
    ++upstream_ops_;
    asio::async_write(*upstream_, asio::buffer(to_upstream_),
                      [self = Self()](error_code ec, size_t) {
                        --self->upstream_ops_;
                        if (self->TunnelOver()) return;
                        if (ec) return self->EndTunnel();
                        self->TunnelActivity();
                        self->ReadClient();
                      });
  }

  void ReadUpstream() {
    to_client_.resize(kTunnelChunkBytes);
    ++upstream_ops_;
    upstream_->async_read_some(asio::buffer(to_client_), [self = Self()](error_code ec, size_t n) {
      --self->upstream_ops_;
      if (self->TunnelOver()) return;
      if (n == 0) return self->OnTunnelEof(ec, /*client=*/false);
      self->to_client_.resize(n);
      self->TunnelActivity();
      self->WriteClient();
    });
  }

  void WriteClient() {
    ++client_ops_;
    asio::async_write(conn_, asio::buffer(to_client_), [self = Self()](error_code ec, size_t) {
      --self->client_ops_;
      if (self->TunnelOver()) return;
      if (ec) return self->EndTunnel();
      self->TunnelActivity();
      self->ReadUpstream();
    });
  }

  // One side stopped sending (or failed): the other side's sending half is
  // shut down (the client's by GracefulClose once the tunnel has ended).
  void OnTunnelEof(error_code ec, bool client) {
    if (ec && !IsQuietReadError(ec))
      spdlog::debug("http {}: tunnel read: {}", remote_, ec.message());
    if (client) {
      error_code ignored;
      upstream_->shutdown(asio::socket_base::shutdown_send, ignored);
    }
    EndTunnel();
  }

  void EndTunnel() {
    if (state_ != State::kTunnel) return;
    state_ = State::kTunnelEnding;
    ClearDeadline();
    error_code ignored;
    upstream_->close(ignored);  // its pending operations return operation_aborted
    if (client_ops_ > 0) Lowest(conn_).cancel(ignored);
    TunnelOver();
  }

  // --- shutdown --------------------------------------------------------------

  void OnDrain() {
    if (state_ == State::kIdle) return Close();
    if (state_ == State::kTunnel) return EndTunnel();
    if (state_ == State::kStreaming && !last_queued_) {
      last_queued_ = true;
      queue_.push_back(Chunk{{}, 0, true});
      stream_res_->keep_alive(false);
      Pump();
    }
  }

  // Half-closes and discards what the client still sends, so the kernel does
  // not answer its unread bytes with a reset that would destroy our error reply.
  void Linger() {
    state_ = State::kClosing;
    error_code ignored;
    Lowest(conn_).shutdown(asio::socket_base::shutdown_send, ignored);
    SetDeadline(kLingerMs);
    buffer_.clear();
    LingerRead();
  }

  void LingerRead() {
    Lowest(conn_).async_read_some(buffer_.prepare(kReadChunkBytes),
                                  [self = Self()](error_code ec, size_t n) {
                                    self->lingered_ += n;
                                    if (ec || self->lingered_ > kLingerMaxBytes)
                                      return self->Close();
                                    self->LingerRead();
                                  });
  }

  // The end of a connection whose last answer is out: the client reads EOF
  // after every byte (over TLS after a close_notify; the client's is awaited
  // for kLingerMs at most).
  void GracefulClose() {
    if constexpr (kIsTls<Stream>) {
      state_ = State::kClosing;
      SetDeadline(kLingerMs);
      return conn_.async_shutdown([self = Self()](error_code) { self->Close(); });
    }
    error_code ignored;
    Lowest(conn_).shutdown(asio::socket_base::shutdown_send, ignored);
    Close();
  }

  void Close() {
    if (state_ == State::kClosed) return;
    state_ = State::kClosed;
    ClearDeadline();
    CancelTimer(timer_);
    error_code ignored;
    Lowest(conn_).close(ignored);
    if (stream_) stream_->MarkGone();
    queue_.clear();
    if (upstream_) upstream_->close(ignored);
    if (tunnel_slot_) {
      tunnel_slot_ = false;
      core_->ReleaseTunnel();
    }
    core_->Unregister(this, reject_.empty(), client_.count);
  }

  // Constant after construction.
  const std::shared_ptr<Core> core_;
  const ServerOptions& options_;
  const Ex strand_;       // the connection's strand, or its loop (see Strand above)
  IoLoop loop_{strand_};  // for Responder::loop
  Stream conn_;
  Timer timer_;
  const std::string remote_;
  const Client client_;            // counted under client_.count until closed
  const std::string_view reject_;  // non-empty: its one request gets this 503 body

  // Strand-only state.
  State state_ = State::kIdle;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  // The whole response being written (WriteResponse): its head, rendered
  // into a buffer the connection keeps, and its body.
  std::string head_;
  std::string body_;
  bool write_keep_ = false;  // the connection serves on after it
  uint64_t seq_ = 0;         // request number; a Responder answers only its own
  bool first_request_ = true;
  bool obs_fold_ = false;  // the header being read folds a field (HasObsFold)
  bool keep_alive_ = true;
  bool linger_ = false;
  size_t lingered_ = 0;
  Clock::time_point deadline_ = Clock::time_point::max();
  bool timer_armed_ = false;
  uint64_t timer_gen_ = 0;
  bool timed_out_ = false;
  // Streaming.
  std::shared_ptr<StreamState> stream_;
  std::optional<http::response<http::empty_body>> stream_res_;
  std::optional<http::response_serializer<http::empty_body>> stream_sr_;
  std::deque<Chunk> queue_;
  bool header_pending_ = false;
  bool header_written_ = false;
  bool last_queued_ = false;
  bool writing_ = false;
  bool watching_ = false;
  // Tunnel: one buffer per direction, each holding what is being written.
  std::optional<UpstreamSocket> upstream_;
  bool tunnel_slot_ = false;  // counted in Core's tunnels
  int tunnel_idle_ms_ = 0;
  std::function<void(std::string_view)> on_client_bytes_;  // TunnelOptions'; may be empty
  int client_ops_ = 0;    // reads/writes pending on conn_ while tunnelling
  int upstream_ops_ = 0;  // ... on upstream_
  std::string to_upstream_;
  std::string to_client_;
};

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
        return Launch(std::make_shared<Session<TlsStreamOf<Ex>>>(
            core_, TlsStreamOf<Ex>(std::move(socket), *tls_), std::move(executor),
            std::move(remote), std::move(client), reject));
      }
    }
    Launch(std::make_shared<Session<Socket>>(core_, std::move(socket), std::move(executor),
                                             std::move(remote), std::move(client), reject));
  }

  template <typename S>
  void Launch(std::shared_ptr<Session<S>> session) {
    core_->Register(session);
    session->Start();
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
// TLS: the server's certificate and key, read once when a listener opens.

// asio takes OpenSSL's error off its queue into `ec`.
std::string OpenSslError(const error_code& ec) {
  ERR_clear_error();
  if (ec.value() == 0) return "not valid PEM";
  return ec.message();
}

Result<std::string> ReadPem(const std::string& path, const char* setting) {
  auto text = os::ReadFileUpTo(path, kMaxPemBytes);
  if (!text.ok()) {
    return Status::Msg(Code::kInvalidArgument, "tls.unreadable",
                       {{"setting", setting}, {"file", path}, {"error", text.status().message()}});
  }
  return text;
}

// TLS 1.2 and later, OpenSSL's default ciphers for them; no client certificates.
Result<std::unique_ptr<asio::ssl::context>> MakeTlsContext(const TlsFiles& files) {
  ASSIGN_OR_RETURN(std::string cert, ReadPem(files.cert_file, "tls.cert"));
  ASSIGN_OR_RETURN(std::string key, ReadPem(files.key_file, "tls.key"));
  auto bad = [](const char* setting, const std::string& file, const std::string& error) {
    return Status::Msg(Code::kInvalidArgument, "tls.bad_file",
                       {{"setting", setting}, {"file", file}, {"error", error}});
  };
  try {
    auto ctx = std::make_unique<asio::ssl::context>(asio::ssl::context::tls_server);
    ctx->set_options(asio::ssl::context::default_workarounds | asio::ssl::context::no_compression |
                     asio::ssl::context::single_dh_use);
    SSL_CTX_set_min_proto_version(ctx->native_handle(), TLS1_2_VERSION);
    ERR_clear_error();
    error_code ec;
    ctx->use_certificate_chain(asio::buffer(cert), ec);
    if (ec) return bad("tls.cert", files.cert_file, OpenSslError(ec));
    ctx->use_private_key(asio::buffer(key), asio::ssl::context::pem, ec);
    bool mismatch = ec && ERR_GET_REASON(static_cast<unsigned long>(ec.value())) ==  // NOLINT
                              X509_R_KEY_VALUES_MISMATCH;
    if (ec && !mismatch) return bad("tls.key", files.key_file, OpenSslError(ec));
    if (mismatch || SSL_CTX_check_private_key(ctx->native_handle()) != 1) {
      ERR_clear_error();
      return Status::Msg(Code::kInvalidArgument, "tls.key_mismatch",
                         {{"cert", files.cert_file}, {"key", files.key_file}});
    }
    return ctx;
  } catch (const std::exception& e) {  // context creation
    return Status::Internal(std::string("TLS context: ") + e.what());
  }
}

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

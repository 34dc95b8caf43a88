// One connection of HttpServer (http_server.h): reading its requests,
// handing them to the handler, writing the answers — whole, streamed, or a
// tunnel's head (tunnel.h copies the tunnel's bytes) — with the server's
// limits and timeouts. http_server.cc accepts connections and hands each to
// LaunchSession (server_asio.h), instantiated here for every kind of stream.
//
// This is the one translation unit of the net module with Beast's HTTP
// parser and serializer: a Beast translation unit costs ~30 s to compile.
#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <boost/asio/buffer.hpp>
#include <boost/asio/post.hpp>
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
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

#include <spdlog/spdlog.h>

#include "lathe/net/io_loop.h"
#include "lathe/net/server_asio.h"
#include "lathe/net/server_core.h"
#include "lathe/net/tunnel.h"
#include "lathe/os/clock.h"
#include "lathe/os/fd.h"

namespace lathe::net::detail {
namespace {

namespace http = beast::http;

constexpr size_t kReadChunkBytes = 16 << 10;  // one idle read into the buffer
constexpr size_t kLingerMaxBytes = 1 << 20;   // discarded after an error response
constexpr int kLingerMs = 2000;               // ... for at most this long
constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
constexpr std::string_view kTooManyTunnels = R"({"error":"too many tunnels"})";
constexpr std::string_view kBadUpstream =
    R"({"error":"tunnel upstream is not a connected socket"})";

// ---------------------------------------------------------------------------
// Helpers free of session state.

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
// starts with the handshake, under first_request_timeout_ms). Created by
// LaunchSession (server_asio.h).
template <typename Stream>
class Session final : public SessionBase,
                      public TunnelOwner,
                      public std::enable_shared_from_this<Session<Stream>> {
 public:
  // `reject`: empty to serve, else the 503 body its one request gets.
  using Ex = typename Stream::executor_type;  // Strand or LoopEx
  using Timer = TimerOf<Ex>;

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
    std::unique_ptr<Responder> responder = NewResponder(core_, this->weak_from_this(), seq_);
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

  // --- tunnels (tunnel.h) ---------------------------------------------------

  void OnTunnelStart(uint64_t seq, HttpResponse head, os::Fd upstream, std::string leftover,
                     TunnelOptions to) {
    if (seq != seq_ || state_ != State::kHandling) return;  // `upstream` closes with it
    if (!core_->AcquireTunnel()) return SendError(503, kTooManyTunnels);
    tunnel_slot_ = true;
    if (!tunnel_.Adopt(std::move(upstream), strand_)) return SendError(502, kBadUpstream);
    state_ = State::kTunnelHead;
    tunnel_idle_ms_ = to.idle_timeout_ms > 0 ? to.idle_timeout_ms : TunnelOptions{}.idle_timeout_ms;
    on_client_bytes_ = std::move(to.on_client_bytes);
    on_open_ = std::move(to.on_open);
    upstream_leftover_ = std::move(leftover);
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

  void OnTunnelHead(error_code ec) {
    stream_res_.reset();
    if (ec || state_ != State::kTunnelHead || core_->draining) return Close();
    state_ = State::kTunnel;
    TunnelActivity();
    // Bytes the client sent after its request head sit in the read buffer.
    std::string to_upstream = beast::buffers_to_string(buffer_.data());
    buffer_.clear();
    tunnel_.Start(Self(), std::move(to_upstream), std::move(upstream_leftover_),
                  std::move(on_client_bytes_));
    if (on_open_) std::exchange(on_open_, {})(std::make_shared<Control>(Self(), strand_));
  }

  // Ends the tunnel on the session's strand, if the session is still there.
  class Control final : public TunnelControl {
   public:
    Control(const std::shared_ptr<Session>& s, Ex strand)
        : session_(s), strand_(std::move(strand)) {}
    void End() override {
      asio::post(strand_, [w = session_] {
        if (auto s = w.lock()) s->EndTunnel();
      });
    }
    bool Open() const override { return !session_.expired(); }

   private:
    std::weak_ptr<Session> session_;
    Ex strand_;
  };

  void TunnelActivity() override { SetDeadline(tunnel_idle_ms_); }

  bool TunnelOver() override {
    if (state_ == State::kTunnel) return false;
    if (state_ == State::kTunnelEnding && tunnel_.Idle()) GracefulClose();
    return true;
  }

  void EndTunnel() override {
    if (state_ != State::kTunnel) return;
    state_ = State::kTunnelEnding;
    ClearDeadline();
    tunnel_.Cancel();
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
    tunnel_.Close();
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
  // Tunnel.
  Tunnel<Stream> tunnel_{conn_, remote_};
  bool tunnel_slot_ = false;  // counted in Core's tunnels
  int tunnel_idle_ms_ = 0;
  // TunnelOptions' (may be empty) and the upstream's leftover bytes, from
  // the handler's Tunnel until the head is out and the tunnel starts.
  std::function<void(std::string_view)> on_client_bytes_;
  std::function<void(std::shared_ptr<TunnelControl>)> on_open_;
  std::string upstream_leftover_;
};

}  // namespace

template <typename Stream>
void LaunchSession(std::shared_ptr<Core> core, Stream conn, typename Stream::executor_type executor,
                   std::string remote, Client client, std::string_view reject) {
  auto session = std::make_shared<Session<Stream>>(core, std::move(conn), std::move(executor),
                                                   std::move(remote), std::move(client), reject);
  core->Register(session);
  session->Start();
}

#define LATHE_LAUNCH_SESSION(Stream)                                                        \
  template void LaunchSession<Stream>(std::shared_ptr<Core>, Stream, Stream::executor_type, \
                                      std::string, Client, std::string_view)
LATHE_LAUNCH_SESSION(TcpSocketOf<Strand>);
LATHE_LAUNCH_SESSION(TcpSocketOf<LoopEx>);
LATHE_LAUNCH_SESSION(UnixSocketOf<Strand>);
LATHE_LAUNCH_SESSION(UnixSocketOf<LoopEx>);
LATHE_LAUNCH_SESSION(TlsStreamOf<Strand>);
LATHE_LAUNCH_SESSION(TlsStreamOf<LoopEx>);
#undef LATHE_LAUNCH_SESSION

}  // namespace lathe::net::detail

// ReverseProxy's event-driven path (proxy.h, "Threads"): a request that may
// ride a kept-alive upstream connection and finds one idle is forwarded on
// the I/O loop of its own client connection. The request is sent with
// send(MSG_DONTWAIT), waiting for the socket's readiness (asio's reactor:
// epoll) only when it is full; the answer is read with the reactor's own
// reads, which leave the socket non-blocking (a worker that gets it later
// copes: proxy.cc). The answer is sent from the same strand, which writes it
// at once (http_server.cc).
//
// The path keeps to the small case, which is where the cost of a proxy is:
// whatever needs more is handed to a worker with what is known so far —
//   - the kept connection had been closed by the upstream (no byte of an
//     answer came back): the worker connects anew (Job::fresh), exactly as
//     the blocking path does after a failed reuse;
//   - the answer is large or unsized: once its header came, the worker gets
//     the connection and every byte read and streams the rest (Job::cont_*).
//
// A connection that served a request here goes back registered with the
// loop's reactor (KeptOnLoop, a service of the loop's io_context, so it is
// freed with the loop): the next request on the same loop sends on it at
// once, without registering it again. Only when a loop has none does it take
// one from the workers' pool (proxy.cc) and register it.
#include <sys/socket.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <deque>
#include <limits>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include <boost/asio/bind_executor.hpp>
#include <boost/asio/execution_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/post.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>

#include "lathe/net/io_loop.h"
#include "lathe/net/proxy.h"
#include "lathe/net/proxy_parser.h"

namespace lathe::net {

namespace asio = boost::asio;
namespace bhttp = boost::beast::http;
using boost::system::error_code;
using Wait = asio::posix::descriptor_base::wait_type;
using Descriptor = asio::posix::basic_stream_descriptor<asio::io_context::executor_type>;

namespace {

using proxy_detail::SteadyMs;

// An answer's bytes are read into its buffer this many at a time: a small
// first read (most answers fit), larger ones after it. The first stays under
// 1 KiB: a larger allocation makes glibc's malloc consolidate its free lists.
constexpr size_t kFirstReadBytes = 960;
constexpr size_t kReadBytes = 16384;

// An upstream connection registered with one loop's reactor.
struct KeptConn {
  // Built in place: Boost 1.74's move of a descriptor with an executor of
  // its own does not compile.
  KeptConn(std::string k, const asio::io_context::executor_type& loop)
      : key(std::move(k)), sd(loop) {}
  std::string key;  // UpstreamKey
  Descriptor sd;
  int64_t since_ms = 0;  // idle since (steady clock)
};

// The kept connections of one loop, newest last. A service of the loop's
// io_context: created with the first, destroyed with the loop, before its
// reactor (services shut down newest first).
class KeptOnLoop final : public asio::execution_context::service {
 public:
  static asio::execution_context::id id;
  explicit KeptOnLoop(asio::execution_context& ctx) : service(ctx) {}

  std::unique_ptr<KeptConn> Take(const std::string& key, int64_t now, int64_t max_idle_ms) {
    std::lock_guard<std::mutex> lock(mu_);
    for (size_t i = idle_.size(); i-- > 0;) {
      if (idle_[i]->key != key) continue;
      std::unique_ptr<KeptConn> c = std::move(idle_[i]);
      idle_.erase(idle_.begin() + static_cast<std::ptrdiff_t>(i));
      if (now - c->since_ms > max_idle_ms) continue;  // too old: closed as it goes
      return c;
    }
    return nullptr;
  }

  void Put(std::unique_ptr<KeptConn> c, size_t cap) {
    std::lock_guard<std::mutex> lock(mu_);
    while (!idle_.empty() && idle_.size() >= cap) idle_.pop_front();
    if (cap > 0) idle_.push_back(std::move(c));
  }

 private:
  void shutdown() override {
    std::lock_guard<std::mutex> lock(mu_);
    idle_.clear();
  }

  std::mutex mu_;
  std::deque<std::unique_ptr<KeptConn>> idle_;
};

asio::execution_context::id KeptOnLoop::id;

}  // namespace

class ReverseProxy::EventExchange : public std::enable_shared_from_this<EventExchange> {
 public:
  EventExchange(ReverseProxy& proxy, Job job, const IoLoop& loop, std::unique_ptr<KeptConn> conn,
                size_t shard)
      : shard_(shard),
        proxy_(proxy),
        job_(std::move(job)),
        strand_(loop.strand()),
        loop_(loop.loop()),
        kept_(KeptOf(loop)),
        conn_(std::move(conn)) {}

  static KeptOnLoop& KeptOf(const IoLoop& loop) {
    return asio::use_service<KeptOnLoop>(loop.loop().context());
  }

  // On the connection's strand.
  void Start() {
    out_ = UpstreamRequestHead(job_.req, job_.up->up, /*upgrade=*/false,
                               proxy_.opts_.strip_cookie_prefixes, /*keep_alive=*/true);
    out_ += job_.req.body;
    proxy_detail::PrepareParser(parser_, proxy_.opts_.max_response_header_bytes,
                                job_.req.method == "HEAD");
    Arm(proxy_.opts_.response_timeout_ms);
    Write();
  }

  // Runs `fn` on the connection's strand, or its loop (any thread).
  template <typename Fn>
  void Post(Fn&& fn) const {
    if (strand_) return asio::post(*strand_, std::forward<Fn>(fn));
    asio::post(loop_, std::forward<Fn>(fn));
  }

  // The watchdog's: whether the current deadline has passed (any thread).
  bool Late(int64_t now_ms) const {
    const int64_t d = deadline_ms_.load(std::memory_order_relaxed);
    return d != 0 && now_ms >= d;
  }

  // On the strand, when Late: the wait in progress is cancelled and the
  // request answered as out of time.
  void Expire() {
    if (over_ || !conn_ || !Late(SteadyMs())) return;
    timed_out_ = true;
    error_code ec;
    conn_->sd.cancel(ec);
  }

  // Stop: gives up at the next wait (on the strand).
  void Cancel() {
    cancelled_ = true;
    error_code ec;
    if (conn_) conn_->sd.cancel(ec);
  }

 private:
  // The deadline of the current phase: the whole answer's header, then each
  // read of its body. The proxy's watchdog (Watch) looks at it a few times a
  // second — a timer of the loop's per request would cost more than the
  // forwarding itself.
  void Arm(int timeout_ms) {
    deadline_ms_.store(SteadyMs() + timeout_ms, std::memory_order_relaxed);
  }
  void Disarm() { deadline_ms_.store(0, std::memory_order_relaxed); }

  // After a wait: true when the exchange ran out of time or is to stop,
  // and has been finished for it.
  bool GaveUp() {
    if (timed_out_) {
      Finish(Attempt{Status::Msg(Code::kDeadlineExceeded, "proxy.timeout")});
      return true;
    }
    if (cancelled_ || proxy_.stopping_) {
      Finish(Attempt{Status::Msg(Code::kUnavailable, "proxy.stopping")});
      return true;
    }
    return false;
  }

  // Starts an operation whose completion `h` runs with the connection's:
  // on its strand when its loop is shared by threads; on a loop of one
  // thread, the descriptor's own completion runs there already.
  template <typename Initiate, typename Handler>
  void OnConnection(Initiate initiate, Handler h) {
    if (strand_) return initiate(asio::bind_executor(*strand_, std::move(h)));
    initiate(std::move(h));
  }

  void WaitFor(Wait what, void (EventExchange::*next)()) {
    OnConnection([&](auto h) { conn_->sd.async_wait(what, std::move(h)); },
                 [self = shared_from_this(), next](error_code ec) {
                   if (self->GaveUp()) return;
                   if (ec) return self->Finish(self->Failed("proxy.upstream_failed", ec.message()));
                   (self.get()->*next)();
                 });
  }

  void Write() {
    while (sent_ < out_.size()) {
      ssize_t n = ::send(conn_->sd.native_handle(), out_.data() + sent_, out_.size() - sent_,
                         MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n > 0) {
        sent_ += static_cast<size_t>(n);
      } else if (n < 0 && errno == EINTR) {
        continue;
      } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        return WaitFor(Wait::wait_write, &EventExchange::Write);
      } else {
        return Reconnect();  // EPIPE, ECONNRESET: the upstream closed it while it was idle
      }
    }
    ReadMore();
  }

  // Reads what the upstream sent next. With async_read_some, not a wait for
  // readiness and a recv of our own: Boost 1.74's reactor re-arms a descriptor
  // with epoll_ctl for every wait, one system call more per request, while a
  // read whose last one emptied the socket is queued without any.
  void ReadMore() {
    const size_t at = bytes_.size();
    const size_t chunk = at < kFirstReadBytes ? kFirstReadBytes : kReadBytes;
    bytes_.resize(at + chunk);
    OnConnection(
        [&](auto h) {
          conn_->sd.async_read_some(asio::buffer(bytes_.data() + at, chunk), std::move(h));
        },
        [self = shared_from_this(), at](error_code ec, size_t n) {
          self->bytes_.resize(at + n);
          self->OnRead(ec, n);
        });
  }

  void OnRead(error_code ec, size_t n) {
    if (GaveUp()) return;
    if (ec == asio::error::eof) {
      eof_ = true;
    } else if (ec == asio::error::operation_aborted) {
      return Finish(Failed("proxy.upstream_failed", ec.message()));
    } else if (ec) {
      if (bytes_.empty()) return Reconnect();  // reset before any byte of an answer
      return Finish(Failed("proxy.upstream_failed", ec.message()));
    } else if (n == 0) {
      return ReadMore();
    }
    if (bytes_.empty() && eof_) return Reconnect();  // closed before any byte
    const bool had_header = parser_.is_header_done();
    Status err = Feed();
    if (!err.ok()) return Finish(Attempt{err, false, had_header, StatusOf(parser_)});
    if (!parser_.is_header_done()) {
      if (eof_) {
        return Finish(Failed("proxy.upstream_failed", "closed before its answer"));
      }
      return ReadMore();
    }
    if (!had_header) {
      const auto& len = parser_.content_length();
      const bool small = len && *len <= proxy_.opts_.max_buffered_body_bytes;
      if (!parser_.is_done() && !small) return HandOver();
    }
    if (parser_.is_done()) return Answer();
    if (eof_) {
      return Finish(Attempt{Status::Msg(Code::kUnavailable, "proxy.upstream_failed",
                                        {{"reason", "closed before the end of its answer"}}),
                            false, true, StatusOf(parser_)});
    }
    Arm(proxy_.opts_.idle_timeout_ms);
    ReadMore();
  }

  // Feeds the bytes the parser has not seen; an error for a bad answer.
  Status Feed() {
    size_t used = 0;
    Status s =
        proxy_detail::FeedParser(parser_, std::string_view(bytes_).substr(used_), eof_, &used);
    used_ += used;
    return s;
  }

  static int StatusOf(const proxy_detail::AnswerParser& p) {
    return p.is_header_done() ? p.status() : 0;
  }

  Attempt Failed(const char* id, const std::string& reason) {
    return Attempt{Status::Msg(Code::kUnavailable, id, {{"reason", reason}})};
  }

  // The whole answer is here: the connection goes back to the pool (when the
  // upstream keeps it and sent nothing more), the client gets the answer.
  void Answer() {
    const int status = parser_.status();
    std::string content_type(FindHeader(parser_.headers(), "Content-Type"));
    Headers down =
        DownstreamHeaders(std::move(parser_.headers()), status, proxy_.opts_.strip_cookie_prefixes);
    AddResponseHeaders(down, job_.up->up.add_response_headers);
    if (parser_.keep_alive() && used_ == bytes_.size() && !eof_ && !proxy_.stopping_) {
      conn_->since_ms = SteadyMs();
      kept_.Put(std::move(conn_), proxy_.opts_.max_idle_upstreams);
    }
    std::unique_ptr<Responder> r = std::move(job_.res);
    r->Send(
        HttpResponse{status, std::move(content_type), std::move(down), std::move(parser_.body())});
    Finish(Attempt{Status::OK(), false, true, status});
  }

  // The kept connection was closed before any byte of an answer: a worker
  // sends the request again on a new connection.
  void Reconnect() {
    Close();
    job_.fresh = true;
    Leave();
  }

  // A large or unsized answer: a worker streams it, from its first byte.
  void HandOver() {
    int fd = conn_->sd.release();  // leaves the reactor; the fd stays open
    if (fd < 0) return Finish(Failed("proxy.upstream_failed", "no connection"));
    job_.cont_fd = os::Fd(fd);
    job_.cont_bytes = std::move(bytes_);
    job_.cont_eof = eof_;
    job_.cont_key = std::move(conn_->key);
    conn_.reset();
    Leave();
  }

  // The rest of the request is a worker's.
  void Leave() {
    over_ = true;
    Disarm();
    ReverseProxy& proxy = proxy_;
    Job job = std::move(job_);
    proxy.EventEnded(this, shard_);
    proxy.Enqueue(std::move(job));
  }

  void Close() { conn_.reset(); }

  // The request is over: its error page if nothing was answered, the done hook.
  void Finish(const Attempt& a) {
    over_ = true;
    Disarm();
    Close();
    ForwardResult r;
    r.error = a.error;
    r.answered = a.answered;
    r.status = a.status;
    if (job_.res) {
      HttpResponse page = proxy_.error_page_(a.error);
      r.status = page.status;
      std::unique_ptr<Responder> res = std::move(job_.res);
      res->Send(std::move(page));
    }
    if (job_.hooks.done) job_.hooks.done(r);
    proxy_.EventEnded(this, shard_);
  }

  const size_t shard_;  // where the proxy keeps it (EventShard)
  ReverseProxy& proxy_;
  Job job_;
  const std::optional<IoLoop::Strand> strand_;  // none: the loop has one thread
  const IoLoop::Loop loop_;
  KeptOnLoop& kept_;
  std::unique_ptr<KeptConn> conn_;  // null once given back or closed
  // Apart from the exchange, which would otherwise pass 1 KiB: glibc's malloc
  // consolidates its free lists for every allocation that large.
  std::unique_ptr<proxy_detail::AnswerParser> parser_holder_ =
      std::make_unique<proxy_detail::AnswerParser>();
  proxy_detail::AnswerParser& parser_ = *parser_holder_;
  std::string out_;    // the request as sent upstream
  size_t sent_ = 0;    // of out_
  std::string bytes_;  // every byte of the answer read
  size_t used_ = 0;    // of bytes_, by the parser
  bool eof_ = false;
  std::atomic<int64_t> deadline_ms_{0};  // steady clock; 0: none (Arm)
  bool timed_out_ = false;
  bool cancelled_ = false;
  bool over_ = false;
};

bool ReverseProxy::ForwardOnLoop(Job& job) {
  if (stopping_ || opts_.max_idle_upstreams == 0 || !job.res) return false;
  const HttpRequest& req = job.req;
  const bool idempotent = job.hooks.repeatable || req.method == "GET" || req.method == "HEAD" ||
                          req.method == "OPTIONS";
  if (!idempotent || IsWebSocketUpgrade(req)) return false;
  IoLoop* loop = job.res->loop();
  if (loop == nullptr) return false;
  const std::string& key = job.up->key;
  KeptOnLoop& kept = EventExchange::KeptOf(*loop);
  std::unique_ptr<KeptConn> conn = kept.Take(key, SteadyMs(), opts_.upstream_idle_ms);
  if (!conn) {  // one of the workers' pool, registered with this loop from now on
    os::Fd fd = TakeIdle(key);
    if (!fd.valid()) return false;
    conn = std::make_unique<KeptConn>(key, loop->loop());
    error_code ec;
    conn->sd.assign(fd.get(), ec);  // registers it with the loop's reactor
    if (ec) return false;           // `fd` is closed; a worker connects anew
    fd.release();
  }
  if (!watchdog_started_.load(std::memory_order_acquire)) {
    std::lock_guard<std::mutex> lock(events_mu_);
    if (stopping_) return false;
    if (!watchdog_.joinable()) watchdog_ = std::thread([this] { Watch(); });
    watchdog_started_.store(true, std::memory_order_release);
  }
  std::shared_ptr<EventExchange> ex;
  const size_t shard = ThisThreadsShard();
  {
    // Under the shard's lock, which StopEvents takes after stopping_ is set:
    // an exchange either starts before Stop looks, or not at all.
    EventShard& s = shards_[shard];
    std::lock_guard<std::mutex> lock(s.mu);
    if (stopping_) return false;  // the kept connection is closed with `conn`
    ex = std::make_shared<EventExchange>(*this, std::move(job), *loop, std::move(conn), shard);
    s.live.emplace(ex.get(), ex);
    live_events_.fetch_add(1);
  }
  ex->Start();  // already on the connection's strand (Responder::loop)
  return true;
}

size_t ReverseProxy::ThisThreadsShard() {
  static std::atomic<size_t> next{0};
  thread_local const size_t mine = next.fetch_add(1) % kEventShards;
  return mine;
}

void ReverseProxy::EventEnded(const EventExchange* ex, size_t shard) {
  {
    EventShard& s = shards_[shard];
    std::lock_guard<std::mutex> lock(s.mu);
    s.live.erase(ex);
  }
  // The last one while Stop waits: wake it (under its lock, so that the
  // wake cannot fall between its look and its wait).
  if (live_events_.fetch_sub(1) == 1 && stopping_) {
    std::lock_guard<std::mutex> lock(events_mu_);
    events_done_.notify_all();
  }
}

void ReverseProxy::Watch() {
  constexpr auto kPeriod = std::chrono::milliseconds(200);
  std::unique_lock<std::mutex> lock(events_mu_);
  while (!stopping_) {
    watchdog_wake_.wait_for(lock, kPeriod, [this] { return stopping_.load(); });
    lock.unlock();
    std::vector<std::shared_ptr<EventExchange>> late;
    const int64_t now = SteadyMs();
    for (EventShard& s : shards_) {
      std::lock_guard<std::mutex> shard_lock(s.mu);
      for (auto& [raw, weak] : s.live) {
        // Through the weak pointer: an exchange freed with a loop that
        // stopped running never said it ended.
        if (auto ex = weak.lock(); ex && ex->Late(now)) late.push_back(std::move(ex));
      }
    }
    for (auto& ex : late) ex->Post([ex] { ex->Expire(); });
    late.clear();
    lock.lock();
  }
}

void ReverseProxy::StopEvents() {
  std::vector<std::shared_ptr<EventExchange>> live;
  for (EventShard& s : shards_) {
    std::lock_guard<std::mutex> lock(s.mu);
    for (auto& [raw, weak] : s.live) {
      if (auto ex = weak.lock()) live.push_back(std::move(ex));
    }
  }
  for (auto& ex : live) {
    ex->Post([ex] { ex->Cancel(); });
  }
  live.clear();
  // The exchanges end on their loops; a loop that no longer runs (its server
  // stopped first) leaves its exchanges to be freed with it.
  std::unique_lock<std::mutex> lock(events_mu_);
  events_done_.wait_for(lock, std::chrono::seconds(2), [this] { return live_events_ == 0; });
  lock.unlock();
  watchdog_wake_.notify_all();
  if (watchdog_.joinable()) watchdog_.join();
}

}  // namespace lathe::net

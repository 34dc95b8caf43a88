#include "lathe/net/server_core.h"

#include <algorithm>
#include <utility>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

namespace lathe::net::detail {

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

HttpResponse ErrorResponse(int status, std::string_view body) {
  return HttpResponse{status, std::string(kJson), {}, std::string(body)};
}

// ---------------------------------------------------------------------------
// Core.

Core::Core(ServerOptions options, Handler handler)
    : options(std::move(options)),
      handler(std::move(handler)),
      limits_(ConnLimitOptions{this->options.max_connections, this->options.max_tcp_connections,
                               this->options.newcomer_connections,
                               this->options.reserved_connections}) {}

void Core::TrackStreamLocked(const std::shared_ptr<StreamState>& st) {
  if (draining) st->gone = true;
  if (streams_.size() >= streams_cap_) {
    std::erase_if(streams_, [](const auto& w) { return w.expired(); });
    streams_cap_ = std::max<size_t>(16, streams_.size() * 2);
  }
  streams_.push_back(st);
}

void Core::NoteRefusal(const ConnClient& c, Admission why) {
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

void Core::Register(std::shared_ptr<SessionBase> s) {
  std::lock_guard<std::mutex> l(mu_);
  SessionBase* key = s.get();
  sessions_.emplace(key, std::move(s));
}

void Core::Unregister(SessionBase* s, bool served, const ConnClient& client) {
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

std::vector<std::shared_ptr<SessionBase>> Core::Sessions() const {
  std::lock_guard<std::mutex> l(mu_);
  std::vector<std::shared_ptr<SessionBase>> out;
  out.reserve(sessions_.size());
  for (const auto& [key, s] : sessions_) out.push_back(s);
  return out;
}

bool Core::WaitNoSessions(Clock::time_point deadline) {
  std::unique_lock<std::mutex> l(mu_);
  return empty_cv_.wait_until(l, deadline, [&] { return sessions_.empty(); });
}

void Core::MarkDrainingAndEndStreams() {
  std::lock_guard<std::mutex> l(mu_);
  draining = true;
  for (const auto& w : streams_) {
    if (auto st = w.lock()) st->MarkGone();
  }
}

void Core::MarkStopped() {
  std::lock_guard<std::mutex> l(mu_);
  stopped_ = true;
  for (const auto& w : streams_) {
    if (auto st = w.lock()) st->MarkGone();
  }
  streams_.clear();
}

bool Core::AcquireTunnel() {
  std::lock_guard<std::mutex> l(mu_);
  if (tunnels_ >= options.max_tunnels) return false;
  ++tunnels_;
  return true;
}

void Core::ReleaseTunnel() {
  std::lock_guard<std::mutex> l(mu_);
  --tunnels_;
}

// ---------------------------------------------------------------------------
// Responder and ResponseStream: thin handles that post onto the session.

namespace {

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

}  // namespace

std::unique_ptr<Responder> NewResponder(std::shared_ptr<Core> core,
                                        std::weak_ptr<SessionBase> session, uint64_t seq) {
  return std::make_unique<ResponderImpl>(std::move(core), std::move(session), seq);
}

}  // namespace lathe::net::detail

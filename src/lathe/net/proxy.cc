#include "lathe/net/proxy.h"

#include <sys/socket.h>

#include <chrono>
#include <cstdint>
#include <iterator>
#include <limits>
#include <thread>

#include <fmt/format.h>
#include <boost/asio/buffer.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>

#include <spdlog/spdlog.h>
#include "lathe/net/proxy_parser.h"
#include "lathe/os/fd.h"
#include "lathe/os/netns.h"
#include "lathe/os/stream_socket.h"

namespace lathe::net {

namespace bhttp = boost::beast::http;
using boost::system::error_code;

namespace {

// Hop-by-hop headers (RFC 9110 7.6.1) and the ones the proxy sets itself.
// The names as string_views made at compile time: a list of char pointers
// would be measured (strlen) at every call, for every header of every request
// and answer.
constexpr std::string_view kHopByHop[] = {"connection",
                                          "keep-alive",
                                          "proxy-connection",
                                          "te",
                                          "trailer",
                                          "transfer-encoding",
                                          "upgrade",
                                          "proxy-authorization",
                                          "proxy-authenticate",
                                          "content-length"};
bool IsHopByHop(std::string_view name) {
  for (std::string_view h : kHopByHop) {
    if (EqualsIgnoreCase(name, h)) return true;
  }
  return false;
}

bool StartsWithIgnoreCase(std::string_view s, std::string_view prefix) {
  return s.size() >= prefix.size() && EqualsIgnoreCase(s.substr(0, prefix.size()), prefix);
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

bool HasPrefix(std::string_view name, const std::vector<std::string>& prefixes) {
  for (const auto& p : prefixes) {
    if (StartsWithIgnoreCase(name, p)) return true;
  }
  return false;
}

// Set-Cookie without its Domain attribute, or "" when the cookie's name has a
// stripped prefix (an upstream must not set Lathe's cookies).
std::string SanitizeSetCookie(std::string_view v, const std::vector<std::string>& prefixes) {
  std::string out;
  size_t start = 0;
  bool first = true;
  while (start <= v.size()) {
    size_t end = v.find(';', start);
    if (end == std::string_view::npos) end = v.size();
    std::string_view part = Trim(v.substr(start, end - start));
    if (first) {
      std::string_view name = Trim(part.substr(0, part.find('=')));
      if (name.empty() || HasPrefix(name, prefixes)) return "";
      out = std::string(part);
      first = false;
    } else if (!part.empty() && !StartsWithIgnoreCase(part, "domain")) {
      out += "; ";
      out += part;
    }
    start = end + 1;
  }
  return out;
}

std::string OriginOf(std::string_view host) { return "http://" + std::string(host); }

}  // namespace

bool IsWebSocketUpgrade(const HttpRequest& req) {
  if (req.method != "GET" || !EqualsIgnoreCase(Trim(req.Header("Upgrade")), "websocket")) {
    return false;
  }
  std::string_view conn = req.Header("Connection");
  size_t start = 0;
  while (start <= conn.size()) {
    size_t end = conn.find(',', start);
    if (end == std::string_view::npos) end = conn.size();
    if (EqualsIgnoreCase(Trim(conn.substr(start, end - start)), "upgrade")) return true;
    start = end + 1;
  }
  return false;
}

std::string StripCookies(std::string_view cookie, const std::vector<std::string>& prefixes) {
  std::string out;
  size_t start = 0;
  while (start <= cookie.size()) {
    size_t end = cookie.find(';', start);
    if (end == std::string_view::npos) end = cookie.size();
    std::string_view pair = Trim(cookie.substr(start, end - start));
    std::string_view name = Trim(pair.substr(0, pair.find('=')));
    if (!pair.empty() && !HasPrefix(name, prefixes)) {
      if (!out.empty()) out += "; ";
      out += pair;
    }
    start = end + 1;
  }
  return out;
}

// Built by hand, not with fmt: it is made for every forwarded request.
std::string UpstreamKey(const Upstream& up) {
  std::string key = up.kind == Upstream::Kind::kUnix ? "unix|" : "tcp|";
  key.reserve(key.size() + up.socket.size() + 48);
  key += up.socket;
  for (uint64_t n : {static_cast<uint64_t>(up.port), static_cast<uint64_t>(up.netns_pid),
                     up.netns_start, static_cast<uint64_t>(up.owner_uid)}) {
    key += '|';
    key += std::to_string(n);
  }
  key += '|';
  if (up.also_owner_uid) key += std::to_string(*up.also_owner_uid);
  return key;
}

std::shared_ptr<const PreparedUpstream> Prepare(Upstream up) {
  auto p = std::make_shared<PreparedUpstream>();
  p->key = UpstreamKey(up);
  p->up = std::move(up);
  return p;
}

std::string UpstreamRequestHead(const HttpRequest& req, const Upstream& up, bool upgrade,
                                const std::vector<std::string>& strip_cookie_prefixes,
                                bool keep_alive) {
  // Appended in place, not formatted (fmt parses its format string on every
  // call) nor with a string per header: it is made for every forwarded request.
  std::string h;
  h.reserve(256 + req.target.size() + 64 * req.headers.size());
  auto field = [&h](std::string_view name, std::string_view value) {
    h.append(name).append(": ").append(value).append("\r\n");
  };
  h.append(req.method).append(" ").append(req.target).append(" HTTP/1.1\r\n");
  field("Host", up.host);
  for (const auto& [name, value] : req.headers) {
    if (IsHopByHop(name) || EqualsIgnoreCase(name, "host") ||
        EqualsIgnoreCase(name, "authorization") || StartsWithIgnoreCase(name, "x-forwarded-") ||
        EqualsIgnoreCase(name, "forwarded") || StartsWithIgnoreCase(name, "x-lathe-")) {
      continue;
    }
    if (EqualsIgnoreCase(name, "cookie")) {
      std::string kept = StripCookies(value, strip_cookie_prefixes);
      if (!kept.empty()) field("Cookie", kept);
      continue;
    }
    if (EqualsIgnoreCase(name, "origin")) {
      field("Origin", OriginOf(up.host));
      continue;
    }
    if (!FindHeader(up.add_headers, name).empty()) continue;  // the proxy's own value wins
    field(name, value);
  }
  for (const auto& [name, value] : up.add_headers) field(name, value);
  std::string_view client = req.remote;
  if (auto colon = client.rfind(':'); colon != std::string_view::npos && client != "unix") {
    client = client.substr(0, colon);
  }
  field("X-Forwarded-For", client);
  field("X-Forwarded-Host", req.Header("Host"));
  h += "X-Forwarded-Proto: http\r\n";
  if (upgrade) {
    h += "Connection: Upgrade\r\nUpgrade: websocket\r\n";
  } else {
    if (!keep_alive) h += "Connection: close\r\n";  // HTTP/1.1 keeps it alive otherwise
    if (!req.body.empty() || req.method == "POST" || req.method == "PUT" || req.method == "PATCH") {
      field("Content-Length", std::to_string(req.body.size()));
    }
  }
  h += "\r\n";
  return h;
}

Headers DownstreamHeaders(Headers upstream, int status,
                          const std::vector<std::string>& strip_cookie_prefixes) {
  // Filtered in place (the kept fields move down over the dropped ones), so
  // that the list allocates nothing more.
  size_t kept = 0;
  for (size_t i = 0; i < upstream.size(); ++i) {
    auto& [name, value] = upstream[i];
    const bool upgrade_header =
        EqualsIgnoreCase(name, "upgrade") || EqualsIgnoreCase(name, "connection");
    bool keep = true;
    if (status == 101 && upgrade_header) {
      keep = true;
    } else if (IsHopByHop(name) || EqualsIgnoreCase(name, "content-type") ||
               EqualsIgnoreCase(name, "server")) {
      keep = false;  // Content-Type moves to the answer's own field; the server adds Server.
    } else if (EqualsIgnoreCase(name, "set-cookie")) {
      value = SanitizeSetCookie(value, strip_cookie_prefixes);
      keep = !value.empty();
    }
    if (!keep) continue;
    if (kept != i) upstream[kept] = std::move(upstream[i]);
    ++kept;
  }
  upstream.resize(kept);
  return upstream;
}

void AddResponseHeaders(Headers& down, const Headers& add) {
  if (add.empty()) return;
  std::erase_if(down, [&](const auto& h) { return !FindHeader(add, h.first).empty(); });
  down.insert(down.end(), add.begin(), add.end());
}

// ---- the proxy ------------------------------------------------------------------

ReverseProxy::ReverseProxy(ProxyOptions options, ProxyErrorPage error_page)
    : opts_(std::move(options)), error_page_(std::move(error_page)) {}

ReverseProxy::~ReverseProxy() { Stop(); }

void ReverseProxy::Stop() {
  stopping_ = true;
  StopEvents();
  std::vector<std::thread> workers;
  std::deque<Job> left;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    workers.swap(workers_);
    left.swap(queue_);
  }
  wake_.notify_all();
  for (auto& j : left) Refuse(j, Status::Msg(Code::kUnavailable, "proxy.stopping"));
  for (auto& t : workers) t.join();
}

void ReverseProxy::Refuse(Job& job, const Status& why) {
  HttpResponse page = error_page_(why);
  ForwardResult r;
  r.status = page.status;
  r.error = why;
  r.attempts = 0;
  job.res->Send(std::move(page));
  if (job.hooks.done) job.hooks.done(r);
}

void ReverseProxy::Forward(HttpRequest req, Upstream up, std::unique_ptr<Responder> res,
                           ForwardHooks hooks) {
  Forward(std::move(req), Prepare(std::move(up)), std::move(res), std::move(hooks));
}

void ReverseProxy::Forward(HttpRequest req, std::shared_ptr<const PreparedUpstream> up,
                           std::unique_ptr<Responder> res, ForwardHooks hooks) {
  Job job;
  job.req = std::move(req);
  job.up = std::move(up);
  job.res = std::move(res);
  job.hooks = std::move(hooks);
  if (!ForwardOnLoop(job)) Enqueue(std::move(job));
}

void ReverseProxy::Enqueue(Job job) {
  std::unique_lock<std::mutex> lock(mu_);
  if (stopping_ || queue_.size() >= opts_.max_queued) {
    lock.unlock();
    Refuse(job, Status::Msg(Code::kUnavailable, "proxy.busy",
                            {{"max", std::to_string(opts_.max_workers + opts_.max_queued)}}));
    return;
  }
  queue_.push_back(std::move(job));
  if (idle_workers_ < queue_.size() && workers_.size() < opts_.max_workers) {
    workers_.emplace_back([this] { Work(); });
  }
  lock.unlock();
  wake_.notify_one();
}

void ReverseProxy::Work() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    ++idle_workers_;
    wake_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    --idle_workers_;
    if (stopping_) return;
    Job job = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    Serve(job);
    lock.lock();
  }
}

namespace {

// One exchange with the upstream over a blocking socket: waits are polls in
// slices of a second, so that Stop is noticed.
class UpstreamConn {
 public:
  UpstreamConn(os::Fd fd, const std::atomic<bool>& stopping)
      : fd_(std::move(fd)), stop_(stopping) {}

  // Reads more bytes into `pending`; DeadlineExceeded after `timeout_ms`
  // without any, Unavailable on stop or error. `*eof` at the upstream's end.
  Status ReadMore(std::string& pending, int timeout_ms, bool* eof) {
    *eof = false;
    for (int waited = 0; !os::WaitReadable(fd_.get(), 1000);) {
      if (stop_) return Status::Msg(Code::kUnavailable, "proxy.stopping");
      waited += 1000;
      if (waited >= timeout_ms) return Status::Msg(Code::kDeadlineExceeded, "proxy.timeout");
    }
    char buf[16384];
    ssize_t n = ::recv(fd_.get(), buf, sizeof(buf), 0);
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) return Status::OK();
      return Status::Msg(Code::kUnavailable, "proxy.upstream_failed",
                         {{"reason", std::strerror(errno)}});
    }
    if (n == 0) *eof = true;
    pending.append(buf, static_cast<size_t>(n));
    if (n > 0) received_any_ = true;
    return Status::OK();
  }

  // True once any byte came from the upstream.
  bool received_any() const { return received_any_; }
  int fd() const { return fd_.get(); }
  int Release() { return fd_.release(); }

 private:
  os::Fd fd_;
  const std::atomic<bool>& stop_;
  bool received_any_ = false;
};

// Connects to the upstream and tells whose listener accepted: `owner` gets
// the uid, or why it is unknown.
Result<os::Fd> ConnectAndIdentify(const Upstream& up, int timeout_ms, Result<uid_t>& owner) {
  if (up.kind == Upstream::Kind::kUnix) {
    auto fd = os::ConnectUnix(up.socket, timeout_ms);
    if (fd.ok()) owner = os::UnixPeerUid(fd->get());
    return fd;
  }
  if (up.netns_pid <= 0) {
    auto fd = os::ConnectLoopback(up.port, timeout_ms);
    if (fd.ok()) owner = os::LoopbackPeerUid(fd->get());
    return fd;
  }
  // An isolated run's port: the socket is made, connected and looked up in
  // the run's namespace, on a thread of its own (setns changes one thread).
  ASSIGN_OR_RETURN(os::Fd ns, os::OpenNetworkNamespace(up.netns_pid, up.netns_start));
  Result<os::Fd> fd = Status(Code::kInternal, "not connected");
  RETURN_IF_ERROR(os::RunInNetworkNamespace(ns.get(), [&] {
    fd = os::ConnectLoopback(up.port, timeout_ms);
    if (fd.ok()) owner = os::LoopbackPeerUid(fd->get());
  }));
  return fd;
}

Result<os::Fd> ConnectUpstream(const Upstream& up, int timeout_ms) {
  const bool unix_socket = up.kind == Upstream::Kind::kUnix;
  const std::string where = unix_socket ? up.socket : fmt::format("127.0.0.1:{}", up.port);
  Result<uid_t> uid = Status(Code::kInternal, "not connected");
  auto fd = ConnectAndIdentify(up, timeout_ms, uid);
  if (!fd.ok()) {
    return Status::Msg(Code::kUnavailable, "proxy.unreachable",
                       {{"where", where}, {"reason", fd.status().message()}});
  }
  if (!uid.ok() || (*uid != up.owner_uid && *uid != up.also_owner_uid)) {
    spdlog::warn("proxy: refused {}: its listener belongs to uid {}, not the run's user {}", where,
                 uid.ok() ? std::to_string(*uid) : uid.status().message(), up.owner_uid);
    return Status::Msg(Code::kPermissionDenied, "proxy.wrong_owner", {{"where", where}});
  }
  return fd;
}

}  // namespace

os::Fd ReverseProxy::TakeIdle(const std::string& key) {
  std::lock_guard<std::mutex> lock(pool_mu_);
  const int64_t now = proxy_detail::SteadyMs();
  for (auto it = idle_.end(); it != idle_.begin();) {  // the newest first
    --it;
    if (it->key != key) continue;
    IdleConn c = std::move(*it);
    it = idle_.erase(it);  // erase invalidates every iterator of a deque: go on from its answer
    // Readable while idle: the upstream closed it (or sent what nobody asked for).
    if (now - c.since_ms > opts_.upstream_idle_ms || os::WaitReadable(c.fd.get(), 0)) continue;
    return std::move(c.fd);
  }
  return os::Fd();
}

void ReverseProxy::PutIdle(const std::string& key, os::Fd fd) {
  if (opts_.max_idle_upstreams == 0 || stopping_) return;
  std::lock_guard<std::mutex> lock(pool_mu_);
  while (idle_.size() >= opts_.max_idle_upstreams) idle_.pop_front();
  idle_.push_back(IdleConn{key, std::move(fd), proxy_detail::SteadyMs()});
}

void ReverseProxy::Serve(Job& job) {
  ForwardResult result;
  std::shared_ptr<const PreparedUpstream> up = std::move(job.up);
  Attempt a;
  if (job.cont_fd.valid()) {  // the answer's header came on the event-driven path
    a = Exchange(job.req, up->up, job.res, std::move(job.cont_fd), std::move(job.cont_bytes),
                 job.cont_eof, job.cont_key);
  } else {
    for (bool reuse = !job.fresh;; reuse = true) {
      a = Try(job.req, *up, job.res, job.hooks.repeatable, reuse);
      if (!a.unanswered || !job.hooks.retry || stopping_) break;
      std::optional<Upstream> next = job.hooks.retry(a.error, up->up);
      if (!next) break;
      up = Prepare(std::move(*next));
      ++result.attempts;
    }
  }
  result.error = a.error;
  result.answered = a.answered;
  result.status = a.status;
  if (job.res) {  // an error before any answer: the error page tells it
    HttpResponse page = error_page_(a.error);
    result.status = page.status;
    job.res->Send(std::move(page));
  }
  if (job.hooks.done) job.hooks.done(result);
}

ReverseProxy::Attempt ReverseProxy::Try(const HttpRequest& req, const PreparedUpstream& prepared,
                                        std::unique_ptr<Responder>& res, bool repeatable,
                                        bool reuse) {
  const Upstream& up = prepared.up;
  const bool upgrade = IsWebSocketUpgrade(req);
  const bool keep_alive = !upgrade && opts_.max_idle_upstreams > 0;
  const std::string key = keep_alive ? prepared.key : std::string();
  // Only a request that may be repeated goes over a kept-alive connection:
  // one the upstream closed meanwhile is then retried on a new one.
  const bool idempotent =
      repeatable || req.method == "GET" || req.method == "HEAD" || req.method == "OPTIONS";
  std::string out = UpstreamRequestHead(req, up, upgrade, opts_.strip_cookie_prefixes, keep_alive);
  out += req.body;
  os::Fd reused = reuse && keep_alive && idempotent ? TakeIdle(key) : os::Fd();
  const bool was_reused = reused.valid();
  // A kept connection may have served the event-driven path, which leaves it
  // non-blocking: SendAllWithin works either way.
  if (was_reused && !os::SendAllWithin(reused.get(), out, opts_.idle_timeout_ms).ok()) {
    reused = os::Fd();
  }
  std::string pending;
  bool eof = false;
  if (was_reused && reused.valid()) {
    // The first bytes of the answer, or the end of a connection closed meanwhile.
    UpstreamConn probe(std::move(reused), stopping_);
    Status read = probe.ReadMore(pending, opts_.response_timeout_ms, &eof);
    if (read.ok() && !(eof && pending.empty())) {
      return Exchange(req, up, res, os::Fd(probe.Release()), std::move(pending), eof, key);
    }
    if (!read.ok() && read.msg_id() != "proxy.upstream_failed") return Attempt{read};
    pending.clear();
    eof = false;
  }
  auto fd = ConnectUpstream(up, opts_.connect_timeout_ms);
  if (!fd.ok()) {
    const bool explain = up.explain_unreachable && fd.status().msg_id() == "proxy.unreachable";
    return Attempt{explain ? up.explain_unreachable(fd.status()) : fd.status(),
                   /*unanswered=*/true};
  }
  (void)os::SetSocketTimeouts(fd->get(), opts_.idle_timeout_ms);  // bounds each send
  if (Status s = os::SendFull(fd->get(), out, "upstream"); !s.ok()) {
    return Attempt{
        Status::Msg(Code::kUnavailable, "proxy.upstream_failed", {{"reason", s.message()}}),
        /*unanswered=*/true};
  }
  return Exchange(req, up, res, std::move(*fd), "", false, key);
}

// The answer to a request already sent on `conn` (with `pending` bytes of
// it read); the connection goes back to the pool under `key` when the
// answer was complete and the upstream keeps it alive.
ReverseProxy::Attempt ReverseProxy::Exchange(const HttpRequest& req, const Upstream& up,
                                             std::unique_ptr<Responder>& res, os::Fd fd,
                                             std::string pending, bool eof,
                                             const std::string& key) {
  UpstreamConn conn(std::move(fd), stopping_);
  const bool got_first = !pending.empty();
  // An error before the response header: "unanswered" when not one byte of
  // it came (the upstream closed or reset the connection first).
  auto fail = [&](const Status& s) {
    const bool nothing =
        !got_first && !conn.received_any() && s.msg_id() == "proxy.upstream_failed";
    return Attempt{s, nothing};
  };
  const bool upgrade = IsWebSocketUpgrade(req);

  proxy_detail::ResponseParser p;
  proxy_detail::PrepareParser(p, opts_.max_response_header_bytes, req.method == "HEAD");
  // Feeds what is pending; an error for an answer that cannot be parsed.
  auto feed = [&](Status* err) {
    size_t used = 0;
    *err = proxy_detail::FeedParser(p, pending, eof, &used);
    pending.erase(0, used);
    return err->ok();
  };
  Status err;
  if (!pending.empty() || eof) {
    if (!feed(&err)) return fail(err);
  }
  while (!p.is_header_done()) {
    if (Status s = conn.ReadMore(pending, opts_.response_timeout_ms, &eof); !s.ok()) {
      return fail(s);
    }
    if (eof && !p.is_header_done() && pending.empty()) {
      return fail(Status::Msg(Code::kUnavailable, "proxy.upstream_failed",
                              {{"reason", "closed before its answer"}}));
    }
    if (!feed(&err)) return fail(err);
  }
  const auto& msg = p.get();
  const int status = static_cast<int>(msg.result_int());
  Headers headers = proxy_detail::HeadersOf(p);
  Headers down = DownstreamHeaders(headers, status, opts_.strip_cookie_prefixes);
  Attempt answered{Status::OK(), false, true, status};
  if (status == 101 && upgrade) {
    HttpResponse head{101, "", std::move(down), ""};
    std::unique_ptr<Responder> r = std::move(res);
    r->Tunnel(std::move(head), conn.Release(), std::move(pending),
              TunnelOptions{opts_.tunnel_idle_timeout_ms, up.on_client_bytes, up.on_tunnel_open});
    return answered;
  }
  AddResponseHeaders(down, up.add_response_headers);
  std::string content_type(FindHeader(headers, "Content-Type"));
  const bool small = p.content_length() && *p.content_length() <= opts_.max_buffered_body_bytes;
  if (p.is_done() || small) {
    while (!p.is_done()) {
      if (Status s = conn.ReadMore(pending, opts_.idle_timeout_ms, &eof); !s.ok()) {
        return Attempt{s, false, true, status};
      }
      if (!feed(&err)) return Attempt{err, false, true, status};
    }
    // Nothing read beyond this answer, and the upstream keeps the connection.
    if (!key.empty() && p.keep_alive() && pending.empty() && !eof) {
      PutIdle(key, os::Fd(conn.Release()));
    }
    std::unique_ptr<Responder> r = std::move(res);
    r->Send(HttpResponse{status, content_type, std::move(down), std::move(p.get().body())});
    return answered;
  }
  // Large or unsized: streamed as it comes (the body string is emptied after
  // each piece; the parser appends at its current end).
  std::unique_ptr<Responder> r = std::move(res);
  auto stream = r->StartStream(status, content_type, std::move(down));
  while (true) {
    auto& body = p.get().body();
    if (!body.empty()) {
      if (!stream->Write(body)) {  // the client is gone
        return Attempt{Status(Code::kCancelled, "the client went away"), false, true, status};
      }
      body.clear();
    }
    if (p.is_done()) break;
    if (Status s = conn.ReadMore(pending, opts_.idle_timeout_ms, &eof); !s.ok()) {
      spdlog::info("proxy: response from upstream cut: {}", s.message());
      return Attempt{s, false, true, status};  // the stream's end tells the client
    }
    if (!feed(&err)) return Attempt{err, false, true, status};
  }
  if (!key.empty() && p.keep_alive() && pending.empty() && !eof) {
    PutIdle(key, os::Fd(conn.Release()));
  }
  stream->Close();
  return answered;
}

}  // namespace lathe::net

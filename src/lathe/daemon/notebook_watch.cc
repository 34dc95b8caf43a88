#include "lathe/daemon/notebook_watch.h"

#include <algorithm>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "lathe/os/fd.h"
#include "lathe/os/stream_socket.h"

namespace lathe::daemon {

Json ActivityToJson(const NotebookActivity& a, int64_t now_ms) {
  Json j = {{"ready", a.ready},
            {"open_kernels", a.kernels},
            {"busy_kernels", a.busy_kernels},
            {"idle_limit_ms", a.idle_limit_ms}};
  if (a.last_active_ms > 0) {
    j["last_active_ms"] = a.last_active_ms;
    j["last_active_by"] = a.last_active_by;
    j["idle_for_ms"] = std::max<int64_t>(0, now_ms - a.last_active_ms);
  }
  return j;
}

bool IsClientActivity(std::string_view method, std::string_view path) {
  const bool read = method == "GET" || method == "HEAD";
  return !(read && (path == "/api" || path.starts_with("/api/")));
}

size_t WsDataFrames::Feed(std::string_view bytes) {
  size_t frames = 0;
  while (!bytes.empty()) {
    if (payload_left_ > 0) {
      uint64_t skip = std::min<uint64_t>(payload_left_, bytes.size());
      payload_left_ -= skip;
      bytes.remove_prefix(skip);
      continue;
    }
    header_ += bytes[0];
    bytes.remove_prefix(1);
    if (header_.size() < 2) continue;
    const auto b1 = static_cast<unsigned char>(header_[1]);
    const size_t len7 = b1 & 0x7f;
    const size_t ext = len7 == 126 ? 2 : len7 == 127 ? 8 : 0;
    const size_t need = 2 + ext + ((b1 & 0x80) ? 4 : 0);
    if (header_.size() < need) continue;
    uint64_t len = len7;
    if (ext > 0) {
      len = 0;
      for (size_t i = 0; i < ext; ++i)
        len = (len << 8) | static_cast<unsigned char>(header_[2 + i]);
    }
    const unsigned opcode = static_cast<unsigned char>(header_[0]) & 0x0f;
    if (opcode <= 2) ++frames;  // continuation, text, binary
    payload_left_ = len;
    header_.clear();
  }
  return frames;
}

NotebookWatch::NotebookWatch(NotebookWatchOptions options, os::Clock& clock, Hooks hooks)
    : opts_(options), clock_(clock), hooks_(std::move(hooks)) {}

NotebookWatch::~NotebookWatch() { Stop(); }

void NotebookWatch::Start() {
  thread_ = std::thread([this] {
    std::unique_lock<std::mutex> lock(mu_);
    while (!stop_) {
      lock.unlock();
      Pass();
      lock.lock();
      cv_.wait_for(lock, std::chrono::milliseconds(opts_.ready_poll_ms), [&] { return stop_; });
    }
  });
}

void NotebookWatch::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void NotebookWatch::NoteClient(const std::string& run_id) {
  std::lock_guard<std::mutex> lock(mu_);
  client_ms_[run_id] = clock_.NowMs();
}

std::optional<NotebookActivity> NotebookWatch::Activity(const std::string& run_id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = seen_.find(run_id);
  if (it == seen_.end()) return std::nullopt;
  const Seen& s = it->second;
  NotebookActivity a;
  a.ready = s.ready;
  a.kernels = s.kernels;
  a.busy_kernels = s.busy;
  a.last_active_ms = s.last_active_ms;
  a.last_active_by = s.last_active_by;
  a.idle_limit_ms = s.limit;
  return a;
}

int64_t NotebookWatch::IdleLimit(const NotebookTarget& t) const {
  return t.idle_ms >= 0 ? t.idle_ms : opts_.default_idle_ms;
}

// Jupyter's socket is in a directory of the user's: the listener must be
// theirs (SO_PEERCRED of this very connection), never something the path
// was turned into. HTTP/1.0, so the answer ends with the connection.
Result<std::pair<int, std::string>> NotebookWatch::Ask(const NotebookTarget& t,
                                                       const std::string& path) const {
  ASSIGN_OR_RETURN(os::Fd fd, os::ConnectUnix(t.socket, opts_.request_timeout_ms));
  if (!t.any_owner) {
    ASSIGN_OR_RETURN(uid_t peer, os::UnixPeerUid(fd.get()));
    if (peer != t.uid) {
      return Status::PermissionDenied(
          fmt::format("{} is served by uid {}, not the run's user", t.socket, peer));
    }
  }
  RETURN_IF_ERROR(os::SetSocketTimeouts(fd.get(), opts_.request_timeout_ms));
  const std::string req = fmt::format(
      "GET {} HTTP/1.0\r\nHost: localhost\r\nAuthorization: token {}\r\n\r\n", path, t.token);
  RETURN_IF_ERROR(os::WriteFull(fd.get(), req, "notebook socket"));
  std::string answer;
  char buf[16384];
  constexpr size_t kMaxAnswer = 4 << 20;
  while (answer.size() < kMaxAnswer) {
    ASSIGN_OR_RETURN(size_t n, os::ReadUpTo(fd.get(), buf, sizeof buf, "notebook socket"));
    if (n == 0) break;
    answer.append(buf, n);
  }
  // "HTTP/1.1 200 OK\r\n...\r\n\r\nbody"
  size_t sp = answer.find(' ');
  size_t body = answer.find("\r\n\r\n");
  if (!answer.starts_with("HTTP/") || sp == std::string::npos || body == std::string::npos) {
    return Status::Unavailable("not an HTTP answer from " + t.socket);
  }
  return std::make_pair(std::atoi(answer.c_str() + sp + 1), answer.substr(body + 4));
}

void NotebookWatch::Look(const NotebookTarget& t, Seen& s, int64_t now_ms) {
  if (!s.ready) {
    auto status = Ask(t, "/api/status");
    if (status.ok() && status->first == 200) {
      s.ready = true;
      s.last_active_ms = std::max(s.last_active_ms, now_ms);
      s.last_active_by = "start";
    }
    return;
  }
  auto kernels = Ask(t, "/api/kernels");
  Json list =
      kernels.ok() && kernels->first == 200 ? ParseJson(kernels->second).value_or(Json()) : Json();
  if (!list.is_array()) {  // cannot see: not idle
    s.last_active_ms = now_ms;
    s.last_active_by = "unknown";
    return;
  }
  std::map<std::string, std::string> activity;
  int busy = 0;
  bool moved = false;
  for (const auto& k : list) {
    if (!k.is_object()) continue;
    std::string id = k.value("id", ""), state = k.value("execution_state", "");
    std::string last = k.value("last_activity", "");
    if (state == "busy" || state == "starting") ++busy;
    auto before = s.kernel_activity.find(id);
    if (before == s.kernel_activity.end() || before->second != last) moved = true;
    activity[id] = last;
  }
  s.kernels = static_cast<int>(activity.size());
  s.busy = busy;
  s.kernel_activity = std::move(activity);
  if (busy > 0 || moved) {
    s.last_active_ms = now_ms;
    s.last_active_by = "kernel";
  }
}

void NotebookWatch::Pass() {
  std::vector<NotebookTarget> targets;
  if (hooks_.targets) targets = hooks_.targets();
  std::map<int, int> util;
  bool asked_gpus = false;
  const int64_t mono = clock_.MonotonicMs();
  std::vector<std::pair<NotebookTarget, Json>> idle;
  std::vector<NotebookTarget> ready;
  std::map<std::string, Seen> kept;
  for (const auto& t : targets) {
    Seen s;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = seen_.find(t.run_id);
      if (it != seen_.end() && it->second.attempt == t.attempt) s = it->second;
    }
    if (s.attempt != t.attempt) {  // first seen: a start, or the daemon's restart
      s = Seen{};
      s.attempt = t.attempt;
      s.last_active_ms = clock_.NowMs();
      s.last_active_by = "start";
    }
    if (mono >= s.next_look_mono) {
      const bool was_ready = s.ready;
      Look(t, s, clock_.NowMs());
      s.next_look_mono = mono + (s.ready ? opts_.poll_ms : opts_.ready_poll_ms);
      if (s.ready && !was_ready) ready.push_back(t);
      if (s.ready && !t.gpus.empty()) {
        if (!asked_gpus && hooks_.gpu_utilization) util = hooks_.gpu_utilization();
        asked_gpus = true;
        for (int g : t.gpus) {
          auto u = util.find(g);
          if (u != util.end()) s.gpu_reported = true;  // its GPUs count toward idleness
          if (u != util.end() && u->second >= opts_.gpu_busy_pct) {
            s.last_active_ms = clock_.NowMs();
            s.last_active_by = "gpu";
          }
        }
      }
    }
    std::lock_guard<std::mutex> lock(mu_);
    if (auto c = client_ms_.find(t.run_id); c != client_ms_.end() && c->second > s.last_active_ms) {
      s.last_active_ms = c->second;
      s.last_active_by = "client";
    }
    const int64_t limit = IdleLimit(t);
    s.limit = limit;
    if (s.ready && limit > 0 && !s.idle_told && clock_.NowMs() - s.last_active_ms >= limit) {
      s.idle_told = true;
      Json why = {{"idle_ms", limit},
                  {"last_active_ms", s.last_active_ms},
                  {"last_active_by", s.last_active_by}};
      if (s.gpu_reported) why["gpu_busy_pct"] = opts_.gpu_busy_pct;
      idle.emplace_back(t, std::move(why));
    }
    kept[t.run_id] = s;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    seen_ = std::move(kept);  // notebooks that ended are forgotten
    for (auto it = client_ms_.begin(); it != client_ms_.end();) {
      it = seen_.count(it->first) ? std::next(it) : client_ms_.erase(it);
    }
  }
  for (const auto& t : ready) {
    if (hooks_.on_ready) hooks_.on_ready(t);
  }
  for (const auto& [t, why] : idle) {
    if (hooks_.on_idle) hooks_.on_idle(t, why);
  }
}

}  // namespace lathe::daemon

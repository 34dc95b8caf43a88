#include "lathe/snap/watcher.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>

#include <spdlog/spdlog.h>

#include "lathe/os/files.h"

namespace lathe::snap {
namespace {

// The longest the thread sleeps in one poll(2) while something is pending.
// It bounds how late a burst is reported after its quiet period, and lets a
// test's fake clock take effect.
constexpr int64_t kMaxSliceMs = 100;
// IN_MOVED_FROM: a temp file renamed away (the atomic save) is no longer a change.
constexpr uint32_t kWatchMask =
    IN_CLOSE_WRITE | IN_MOVED_TO | IN_MOVED_FROM | IN_CREATE | IN_ONLYDIR | IN_EXCL_UNLINK;

int64_t MtimeNs(const struct stat& st) {
  return static_cast<int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec;
}

}  // namespace

std::string_view WatchModeName(WatchMode m) {
  return m == WatchMode::kInotify ? "inotify" : "polling";
}

Result<std::unique_ptr<Watcher>> Watcher::Start(const std::string& dir, WatcherOptions opts,
                                                Callback cb) {
  char real[PATH_MAX];
  struct stat st;
  RETURN_IF_ERROR(os::WithAccess(opts.access_as, [&] {
    if (::realpath(dir.c_str(), real) == nullptr || ::stat(real, &st) != 0)
      return ErrnoStatus(dir, errno);
    return Status::OK();
  }));
  if (!S_ISDIR(st.st_mode)) return Status::InvalidArgument(dir + " is not a directory");
  std::unique_ptr<Watcher> w(new Watcher());
  w->root_ = real;
  w->opts_ = opts;
  w->cb_ = std::move(cb);
  w->clock_ = opts.clock ? opts.clock : &os::RealClock();
  int efd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (efd < 0) return ErrnoStatus("eventfd", errno);
  w->stop_fd_ = os::Fd(efd);
  // Watches are in place before Start returns, so no write after it is missed.
  Status st_init = opts.force_polling
                       ? Status::Unavailable("polling requested")
                       : os::WithAccess(opts.access_as, [&] { return w->InitInotify(); });
  // Polling would not read what inotify may not either.
  if (st_init.IsPermissionDenied()) return st_init;
  if (!st_init.ok()) {
    w->Fallback(st_init.message());
    w->ScanAs(/*report=*/false);
  }
  w->thread_ = std::thread([p = w.get()] { p->Loop(); });
  return w;
}

Watcher::~Watcher() { Stop(); }

void Watcher::Stop(bool flush) {
  if (flush) flush_on_stop_.store(true);
  if (!stopped_.exchange(true)) {
    uint64_t one = 1;
    if (!os::WriteFull(stop_fd_.get(), &one, sizeof one, "eventfd").ok())
      spdlog::debug("watcher: wake-up write failed");
  }
  if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
}

std::string Watcher::fallback_reason() const {
  std::lock_guard<std::mutex> l(mu_);
  return fallback_reason_;
}

Status Watcher::InitInotify() {
  int fd = ::inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  if (fd < 0) return ErrnoStatus("inotify_init1", errno);
  inotify_fd_ = os::Fd(fd);
  return AddTree("", false);
}

// Watches `rel` and every directory below it. With `report_files`, the files
// already there count as changed: they may have been written before the
// watch existed (a directory created and filled at once).
Status Watcher::AddTree(const std::string& rel, bool report_files) {
  int wd = ::inotify_add_watch(inotify_fd_.get(), Abs(rel).c_str(), kWatchMask);
  if (wd < 0) {
    if (errno == ENOENT || errno == ENOTDIR) return Status::OK();  // gone again
    if (errno == ENOSPC)
      return Status::ResourceExhausted(
          "the inotify watch limit (fs.inotify.max_user_watches) is reached");
    return ErrnoStatus("inotify_add_watch " + Abs(rel), errno);
  }
  bool fresh = dirs_.count(wd) == 0;
  dirs_[wd] = rel;  // a renamed directory keeps its descriptor: update its path
  if (fresh && opts_.max_watches > 0 && dirs_.size() > opts_.max_watches) {
    return Status::ResourceExhausted("the watch limit of " + std::to_string(opts_.max_watches) +
                                     " directories is reached");
  }
  auto names = os::ListDir(Abs(rel));
  if (!names.ok()) return Status::OK();
  for (const auto& name : *names) {
    std::string child = rel.empty() ? name : rel + "/" + name;
    struct stat st;
    if (::lstat(Abs(child).c_str(), &st) != 0) continue;
    if (S_ISDIR(st.st_mode)) {
      RETURN_IF_ERROR(AddTree(child, report_files));
    } else if (report_files && S_ISREG(st.st_mode)) {
      Changed(child);
    }
  }
  return Status::OK();
}

void Watcher::Loop() {
  while (!stopped_.load()) {
    int64_t now = clock_->MonotonicMs();
    bool polling = mode_.load() == WatchMode::kPolling;
    int64_t wait = pending_.empty() && !polling ? -1 : kMaxSliceMs;
    if (polling) wait = std::clamp<int64_t>(next_scan_ms_ - now, 0, kMaxSliceMs);
    if (!polling && !pending_.empty()) {
      wait = std::clamp<int64_t>(last_change_ms_ + Quiet() - now, 1,
                                 kMaxSliceMs);  // wake when it settles
    }
    struct pollfd fds[2] = {{stop_fd_.get(), POLLIN, 0}, {inotify_fd_.get(), POLLIN, 0}};
    int n = ::poll(fds, polling ? 1 : 2, static_cast<int>(wait));
    if (n < 0 && errno != EINTR) {
      spdlog::warn("watcher {}: poll: {}", root_, std::strerror(errno));
      break;
    }
    if (stopped_.load() || (fds[0].revents & POLLIN)) break;
    if (mode_.load() == WatchMode::kInotify) {
      DrainEventsAs();
    } else if (clock_->MonotonicMs() >= next_scan_ms_) {
      ScanAs(/*report=*/true);
    }
    MaybeFire();
  }
  if (flush_on_stop_.load()) FlushPending();
}

void Watcher::FlushPending() {
  if (mode_.load() == WatchMode::kInotify) {
    DrainEventsAs();
  } else {
    ScanAs(/*report=*/true);
  }
  if (pending_.empty()) return;
  WatchBatch b{std::vector<std::string>(pending_.begin(), pending_.end()), mode_.load()};
  pending_.clear();
  written_.clear();
  cb_(b);
}

void Watcher::DrainEvents() {
  alignas(struct inotify_event) char buf[64 * 1024];
  while (mode_.load() == WatchMode::kInotify) {
    ssize_t n = ::read(inotify_fd_.get(), buf, sizeof buf);
    if (n <= 0) return;  // EAGAIN: drained
    for (char* p = buf; p < buf + n;) {
      auto* e = reinterpret_cast<struct inotify_event*>(p);
      p += sizeof(struct inotify_event) + e->len;
      if (e->mask & IN_Q_OVERFLOW) {
        // Events were lost: look at everything again.
        Status st = AddTree("", true);
        if (!st.ok()) Fallback(st.message());
        continue;
      }
      HandleEvent(e->wd, e->mask, e->len > 0 ? std::string(e->name) : std::string());
    }
  }
}

void Watcher::HandleEvent(int wd, uint32_t mask, const std::string& name) {
  if (mask & IN_IGNORED) {
    dirs_.erase(wd);  // the directory was removed
    return;
  }
  auto it = dirs_.find(wd);
  if (it == dirs_.end() || name.empty()) return;
  std::string rel = it->second.empty() ? name : it->second + "/" + name;
  if (mask & IN_ISDIR) {
    if (!(mask & (IN_CREATE | IN_MOVED_TO))) return;
    Status st = AddTree(rel, true);
    if (!st.ok()) return Fallback(st.message());
    if (mask & IN_MOVED_TO) Changed(rel);  // a directory checkpoint renamed into place
    return;
  }
  if (mask & IN_MOVED_FROM) {
    // torch.save(ckpt.pt.tmp) + os.replace: the temp file's close belongs to
    // the file renamed in, which is complete.
    pending_.erase(rel);
    written_.erase(rel);
    return;
  }
  if (mask & (IN_CLOSE_WRITE | IN_MOVED_TO)) Changed(rel, (mask & IN_MOVED_TO) != 0);
}

void Watcher::DrainEventsAs() {
  // Best effort: the body only looks: what it finds is in the variables it sets.
  (void)os::WithAccess(opts_.access_as, [this] {
    DrainEvents();
    return Status::OK();
  });
}

void Watcher::ScanAs(bool report) {
  // Best effort: the body only looks: what it finds is in the variables it sets.
  (void)os::WithAccess(opts_.access_as, [&] {
    Scan(report);
    return Status::OK();
  });
}

// Polling: compares every regular file's (size, inode, mtime) with the last scan.
void Watcher::Scan(bool report) {
  std::map<std::string, FileSig> now;
  std::vector<std::string> stack = {""};
  while (!stack.empty()) {
    std::string rel = stack.back();
    stack.pop_back();
    auto names = os::ListDir(Abs(rel));
    if (!names.ok()) continue;
    for (const auto& name : *names) {
      std::string child = rel.empty() ? name : rel + "/" + name;
      struct stat st;
      if (::lstat(Abs(child).c_str(), &st) != 0) continue;
      if (S_ISDIR(st.st_mode)) stack.push_back(child);
      if (S_ISREG(st.st_mode))
        now[child] = {static_cast<uint64_t>(st.st_size), st.st_ino, MtimeNs(st)};
    }
  }
  for (const auto& [path, sig] : now) {
    auto old = seen_.find(path);
    if (report && (old == seen_.end() || !(old->second == sig))) Changed(path);
  }
  seen_ = std::move(now);
  next_scan_ms_ = clock_->MonotonicMs() + opts_.poll_interval_ms;
}

void Watcher::Fallback(const std::string& why) {
  if (mode_.load() == WatchMode::kPolling) return;
  spdlog::warn("watcher {}: polling every {} ms: {}", root_, opts_.poll_interval_ms, why);
  {
    std::lock_guard<std::mutex> l(mu_);
    fallback_reason_ = why;
  }
  mode_ = WatchMode::kPolling;
  inotify_fd_ = os::Fd();
  dirs_.clear();
  // Events may have been missed on the way: the first scan reports every
  // file (when running), so the caller takes a snapshot to be safe.
  next_scan_ms_ = 0;
}

void Watcher::Changed(const std::string& rel, bool renamed) {
  if (!renamed) written_.insert(rel);
  pending_.insert(rel);
  last_change_ms_ = clock_->MonotonicMs();
}

// How long the pending burst must stay quiet. Polling must see one unchanged
// scan after the last change before it can call the files settled.
int64_t Watcher::Quiet() const {
  if (mode_.load() == WatchMode::kPolling) return std::max(opts_.quiet_ms, opts_.poll_interval_ms);
  return written_.empty() ? std::min(opts_.quiet_ms, opts_.rename_quiet_ms) : opts_.quiet_ms;
}

void Watcher::MaybeFire() {
  if (pending_.empty()) return;
  int64_t quiet = Quiet();
  if (clock_->MonotonicMs() - last_change_ms_ < quiet) return;
  if (mode_.load() == WatchMode::kInotify) {
    // Whatever the kernel queued before this moment belongs to the burst.
    DrainEventsAs();
    if (pending_.empty() || clock_->MonotonicMs() - last_change_ms_ < Quiet()) return;
  }
  WatchBatch b{std::vector<std::string>(pending_.begin(), pending_.end()), mode_.load()};
  pending_.clear();
  written_.clear();
  cb_(b);
}

Result<std::function<void()>> WatchUntilStopped(
    const std::string& dir, std::function<void(const std::vector<std::string>& paths)> cb) {
  ASSIGN_OR_RETURN(std::unique_ptr<Watcher> w,
                   Watcher::Start(dir, WatcherOptions{},
                                  [cb = std::move(cb)](const WatchBatch& b) { cb(b.paths); }));
  std::shared_ptr<Watcher> shared(std::move(w));
  return std::function<void()>([shared] { shared->Stop(/*flush=*/true); });
}

}  // namespace lathe::snap

#include "lathe/daemon/run_checkpoints.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "lathe/common/units.h"
#include "lathe/os/files.h"
#include "lathe/os/identity.h"
#include "lathe/os/users.h"
#include "lathe/snap/checkpoints.h"
#include "lathe/snap/store.h"
#include "lathe/snap/watcher.h"

namespace lathe::daemon {
namespace {

std::string Short(const std::string& id) { return id.substr(0, 12); }

// True when every entry of `m` is in `dir` as captured (type, size, mtime;
// link text). Files that are in `dir` but not in `m` do not matter.
bool DirMatches(const snap::Manifest& m, const std::string& dir) {
  for (const auto& e : m.files) {
    std::string p = dir + "/" + e.path;
    auto st = os::LstatFile(p);
    if (!st.ok()) return false;
    switch (e.type) {
      case snap::EntryType::kDir:
        if (!S_ISDIR(st->mode)) return false;
        break;
      case snap::EntryType::kSymlink: {
        auto target = os::ReadLink(p);
        if (!S_ISLNK(st->mode) || !target.ok() || *target != e.target) return false;
        break;
      }
      case snap::EntryType::kFile: {
        if (!S_ISREG(st->mode) || st->size_bytes != e.size || st->mtime_ns != e.mtime_ns) {
          return false;
        }
        break;
      }
    }
  }
  return true;
}

// The newest snapshot of `run` that holds a complete checkpoint.
struct Found {
  snap::SnapshotId id;
  snap::Manifest manifest;
  snap::Checkpoint checkpoint;
};

Result<std::optional<Found>> NewestResumable(snap::Store& store, const std::string& run) {
  ASSIGN_OR_RETURN(auto snaps, store.List());  // newest first
  for (const auto& s : snaps) {
    auto tag = s.tags.find("run");
    if (tag == s.tags.end() || tag->second != run) continue;
    auto m = store.Load(s.id);
    if (!m.ok()) {
      spdlog::warn("run {}: snapshot {} unreadable: {}", run, Short(s.id), m.status().ToString());
      continue;
    }
    if (auto c = snap::ChooseResume(*m))
      return std::optional<Found>(Found{s.id, std::move(*m), *c});
  }
  return std::optional<Found>();
}

}  // namespace

RunCheckpoints::RunCheckpoints(std::string store_dir, os::Clock& clock)
    : store_dir_(std::move(store_dir)), clock_(clock) {}

RunCheckpoints::~RunCheckpoints() {
  std::map<std::string, std::unique_ptr<snap::Watcher>> watchers;
  std::multimap<std::string, Capture> captures;
  {
    std::lock_guard<std::mutex> l(mu_);
    watchers.swap(watchers_);
    captures.swap(captures_);
  }
  for (auto& [id, w] : watchers) w->Stop();
  for (auto& [id, c] : captures) c.thread.join();
}

void RunCheckpoints::StartCapture(const std::string& run_id, std::function<void()> fn) {
  auto done = std::make_shared<std::atomic<bool>>(false);
  std::thread t([fn = std::move(fn), done] {
    fn();
    done->store(true);
  });
  captures_.emplace(run_id, Capture{std::move(t), std::move(done)});
}

Result<snap::Store*> RunCheckpoints::store() {
  std::lock_guard<std::mutex> l(mu_);
  if (!store_) {
    snap::StoreOptions o;
    o.clock = &clock_;
    ASSIGN_OR_RETURN(store_, snap::Store::Create(store_dir_, o));
  }
  return store_.get();
}

void RunCheckpoints::AddEvent(const std::string& run_id, const std::string& type,
                              const std::string& msg, Json data) {
  std::lock_guard<std::mutex> l(mu_);
  events_.push_back({run_id, type, msg, std::move(data)});
}

std::vector<CheckpointEvent> RunCheckpoints::TakeEvents() {
  std::vector<CheckpointEvent> out;
  std::vector<std::thread> finished;  // joined here, so ended captures do not pile up
  {
    std::lock_guard<std::mutex> l(mu_);
    out.swap(events_);
    for (auto it = captures_.begin(); it != captures_.end();) {
      if (it->second.done->load()) {
        finished.push_back(std::move(it->second.thread));
        it = captures_.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (auto& t : finished) t.join();
  return out;
}

bool RunCheckpoints::Watching(const std::string& run_id) {
  std::lock_guard<std::mutex> l(mu_);
  return watchers_.count(run_id) > 0;
}

// Runs on a watcher's thread or a capture thread, never under mu_.
void RunCheckpoints::Snapshot(const std::string& run_id, int attempt, const std::string& dir,
                              DirOwner owner, int keep, const std::string& why) {
  auto store = this->store();
  if (!store.ok()) {
    AddEvent(run_id, "warning", "checkpoint not captured: " + store.status().message());
    return;
  }
  snap::SnapshotOptions o;
  o.tags = {
      {"run", run_id}, {"attempt", std::to_string(attempt)}, {"uid", std::to_string(owner.uid)}};
  o.read_as = ActingAs(owner.uid, owner.gid);
  auto r = (*store)->Snapshot(dir, o);
  if (!r.ok()) {
    Json data = {{"reason", r.status().message()}, {"msg_id", r.status().msg_id()}};
    AddEvent(run_id, "warning", "checkpoint snapshot skipped: " + r.status().message(), data);
    return;
  }
  const snap::Manifest& m = r->manifest;
  auto resume = snap::ChooseResume(m);
  std::string msg = fmt::format("snapshot {} ({}): {} files, {} new", Short(r->id), why,
                                m.stats.files, FormatBytes(m.stats.new_bytes));
  Json data = {{"snapshot", r->id},
               {"trigger", why},
               {"files", m.stats.files},
               {"new_bytes", m.stats.new_bytes},
               {"complete", m.complete()}};
  if (resume) {
    msg += "; resume point " + resume->path;
    data["resume_point"] = resume->path;
    if (resume->step) data["step"] = *resume->step;
  }
  for (const auto& c : m.checkpoints) {
    if (!c.complete) msg += fmt::format("; {} is incomplete ({})", c.path, c.reason);
  }
  AddEvent(run_id, "checkpoint", msg, data);
  if (keep > 0) {
    snap::PrunePolicy p;
    p.keep_last = static_cast<size_t>(keep);
    p.run = run_id;
    if (auto pr = (*store)->Prune(p); !pr.ok()) {
      AddEvent(run_id, "warning", "pruning old snapshots failed: " + pr.status().message());
    }
  }
}

// Creates a run's checkpoint directory, with the user's identity: the kernel
// checks each step, so a path component the user swaps for a symlink cannot
// make root create a directory elsewhere, and a directory the user could not
// have made is refused with their EACCES.
Status MakeCheckpointDir(const std::string& dir, const os::AccessAs& as) {
  return os::WithAccess(as, [&] {
    RETURN_IF_ERROR(os::MakeDirs(dir, 0755));
    if (int err = os::AccessError(dir, R_OK | W_OK | X_OK); err != 0) return ErrnoStatus(dir, err);
    return Status::OK();
  });
}

Status RunCheckpoints::Watch(const std::string& run_id, int attempt, const std::string& dir,
                             DirOwner owner, int keep, bool capture_now) {
  os::AccessAs as = ActingAs(owner.uid, owner.gid);
  RETURN_IF_ERROR(MakeCheckpointDir(dir, as));
  snap::WatcherOptions o;
  o.clock = &clock_;
  o.access_as = as;
  auto w = snap::Watcher::Start(dir, o, [=, this](const snap::WatchBatch&) {
    Snapshot(run_id, attempt, dir, owner, keep, "written");
  });
  if (!w.ok()) return w.status();
  if ((*w)->mode() == snap::WatchMode::kPolling) {
    AddEvent(run_id, "warning",
             "checkpoint directory polled, not watched: " + (*w)->fallback_reason());
  }
  std::unique_ptr<snap::Watcher> old;
  {
    std::lock_guard<std::mutex> l(mu_);
    old = std::move(watchers_[run_id]);
    watchers_[run_id] = std::move(*w);
  }
  if (old) old->Stop();
  if (capture_now) {
    std::lock_guard<std::mutex> l(mu_);
    StartCapture(run_id, [=, this] {
      Snapshot(run_id, attempt, dir, owner, keep, "after a daemon restart");
    });
  }
  return Status::OK();
}

void RunCheckpoints::Unwatch(const std::string& run_id, int attempt, const std::string& dir,
                             DirOwner owner, int keep, bool capture_if_unwatched) {
  std::lock_guard<std::mutex> l(mu_);
  std::unique_ptr<snap::Watcher> w;
  if (auto it = watchers_.find(run_id); it != watchers_.end()) {
    w = std::move(it->second);
    watchers_.erase(it);
  }
  if (!w && !capture_if_unwatched) return;
  // The flush's callback snapshots on the watcher's thread; Stop waits for it.
  std::shared_ptr<snap::Watcher> shared(std::move(w));
  StartCapture(run_id, [=, this] {
    if (shared) {
      shared->Stop(/*flush=*/true);
    } else {
      Snapshot(run_id, attempt, dir, owner, keep, "after the run ended unwatched");
    }
  });
}

bool RunCheckpoints::CaptureRecorded(const std::string& run_id, int attempt, const std::string& dir,
                                     DirOwner owner, int keep, int64_t recorded) {
  std::lock_guard<std::mutex> l(mu_);
  auto [b, e] = captures_.equal_range(run_id);
  for (auto it = b; it != e; ++it) {
    if (!it->second.done->load()) return false;
  }
  StartCapture(run_id, [=, this] {
    Snapshot(run_id, attempt, dir, owner, keep,
             fmt::format("checkpoint {} recorded on its node", recorded));
  });
  return true;
}

void RunCheckpoints::WaitCaptures(const std::string& run_id) {
  std::vector<std::thread> threads;
  {
    std::lock_guard<std::mutex> l(mu_);
    auto [b, e] = captures_.equal_range(run_id);
    for (auto it = b; it != e; ++it) threads.push_back(std::move(it->second.thread));
    captures_.erase(b, e);
  }
  for (auto& t : threads) t.join();
}

os::AccessAs ActingAs(uid_t uid, gid_t gid) {
  if (!os::IsRoot() || uid == 0) return {};
  return os::AccessAsUser(os::IdentityOf(uid, gid));
}

Result<ResumePoint> RunCheckpoints::Prepare(const std::string& run_id,
                                            const std::string& resume_run, const std::string& dir,
                                            DirOwner owner) {
  WaitCaptures(run_id);
  const os::AccessAs as = ActingAs(owner.uid, owner.gid);
  RETURN_IF_ERROR(MakeCheckpointDir(dir, as));
  ASSIGN_OR_RETURN(snap::Store * store, this->store());
  ASSIGN_OR_RETURN(auto found, NewestResumable(*store, run_id));
  if (!found && !resume_run.empty()) {
    WaitCaptures(resume_run);
    ASSIGN_OR_RETURN(found, NewestResumable(*store, resume_run));
  }
  ResumePoint p;
  if (!found) return p;
  p.snapshot = found->id;
  p.resume_from = dir + "/" + found->checkpoint.path;
  bool matches = false;
  // Best effort: the body only looks: what it finds is in the variables it sets.
  (void)os::WithAccess(as, [&] {
    matches = DirMatches(found->manifest, dir);
    return Status::OK();
  });
  if (matches) {
    AddEvent(run_id, "checkpoint",
             fmt::format("{} matches snapshot {}; resuming from {}", dir, Short(found->id),
                         found->checkpoint.path),
             {{"snapshot", found->id}, {"dir", dir}, {"resume_from", p.resume_from}});
    return p;
  }
  snap::RestoreOptions ro;
  ro.force = true;  // what is there now differs from the checkpoint: replace it
  // Written with the user's identity: what they could not write or delete
  // in the directory (another user's file in a sticky one) stays as it is.
  ro.write_as = as;
  ASSIGN_OR_RETURN(auto restored, store->Restore(found->id, dir, ro));
  p.restored = true;
  AddEvent(
      run_id, "checkpoint",
      fmt::format("restored snapshot {} into {} ({} files, {}); resuming from {}", Short(found->id),
                  dir, restored.files, FormatBytes(restored.bytes), found->checkpoint.path),
      {{"snapshot", found->id},
       {"dir", dir},
       {"files", restored.files},
       {"bytes", restored.bytes},
       {"resume_from", p.resume_from}});
  return p;
}

}  // namespace lathe::daemon

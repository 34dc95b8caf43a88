// Watches a checkpoint directory and says when a burst of writes has
// settled, so the caller can take one snapshot per burst.
//
// inotify, recursive: every directory under the root is watched, and new
// sub-directories (created, or renamed in as Hugging Face's Trainer does with
// tmp-checkpoint-N -> checkpoint-N) are added as they appear. A file counts
// as changed on IN_CLOSE_WRITE (closed after writing) or IN_MOVED_TO
// (renamed in: the atomic save-to-temp + os.replace pattern); opening,
// partial writes and deletions do not. After the last change, `quiet_ms`
// without another one ends the burst and the callback gets every path that
// changed in it.
//
// Polling is the fallback, only where inotify cannot be used: inotify_init
// fails, or the watch limit (fs.inotify.max_user_watches, or `max_watches`)
// is reached. The watcher then compares (size, mtime, inode) of every file
// every `poll_interval_ms` and says why in fallback_reason(), for the run's
// events.
//
// States: kWatching -> (change) kSettling -> (quiet) callback -> kWatching;
// Stop() from any state -> kStopped. Time comes from the injected clock, so a
// test with os::FakeClock decides when a burst is quiet.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "lathe/common/status.h"
#include "lathe/os/clock.h"
#include "lathe/os/fd.h"
#include "lathe/os/users.h"

namespace lathe::snap {

enum class WatchMode { kInotify, kPolling };
std::string_view WatchModeName(WatchMode m);  // "inotify" | "polling"

struct WatcherOptions {
  // A burst ends after this long without a change: long enough to join the
  // files of one save written back to back, short enough for capture in < 1 s.
  int64_t quiet_ms = 200;
  // A burst made only of files renamed into place (the atomic save:
  // write to a temp name, fsync, os.replace) holds complete files already:
  // it ends after this shorter quiet period (inotify only).
  int64_t rename_quiet_ms = 50;
  int64_t poll_interval_ms = 2000;  // polling fallback: time between scans
  size_t max_watches = 0;           // 0: as many as the kernel allows
  bool force_polling = false;       // use polling even where inotify works
  os::Clock* clock = nullptr;       // null: os::RealClock(); not owned
  // Runs every access to the watched tree (resolving it, adding watches,
  // listing, lstat): e.g. os::AccessAsUser, so a root daemon watches a
  // user's directory with the user's permissions. The callback runs outside
  // it. Empty: as the process.
  os::AccessAs access_as;
};

struct WatchBatch {
  std::vector<std::string> paths;  // changed files and directories, relative to the root, sorted
  WatchMode mode = WatchMode::kInotify;
};

class Watcher {
 public:
  // Runs on the watcher's thread, one call at a time; must not call Stop().
  using Callback = std::function<void(const WatchBatch&)>;

  // Starts watching `dir` (an existing directory) on a new thread.
  static Result<std::unique_ptr<Watcher>> Start(const std::string& dir, WatcherOptions opts,
                                                Callback cb);
  ~Watcher();  // Stop()

  // Stops the thread and waits for it; no callback runs after Stop returns.
  // A burst that has not settled yet is dropped, unless `flush`: then the
  // changes seen so far (including events still queued in the kernel, or a
  // last scan when polling) go to one final callback before Stop returns —
  // what a job's last checkpoint needs when its process has just ended.
  // Idempotent.
  void Stop(bool flush = false);

  WatchMode mode() const { return mode_.load(); }
  // Why the watcher polls ("" while it uses inotify).
  std::string fallback_reason() const;

 private:
  Watcher() = default;
  struct FileSig {
    uint64_t size, ino;
    int64_t mtime_ns;
    bool operator==(const FileSig&) const = default;
  };

  void Loop();
  Status InitInotify();
  Status AddTree(const std::string& rel, bool report_files);
  void DrainEvents();
  void DrainEventsAs();  // DrainEvents through opts_.access_as
  void HandleEvent(int wd, uint32_t mask, const std::string& name);
  void Scan(bool report);
  void ScanAs(bool report);  // Scan through opts_.access_as
  void Fallback(const std::string& why);
  void Changed(const std::string& rel, bool renamed = false);
  void MaybeFire();
  int64_t Quiet() const;
  void FlushPending();
  std::string Abs(const std::string& rel) const { return rel.empty() ? root_ : root_ + "/" + rel; }

  // Constant after Start.
  std::string root_;
  WatcherOptions opts_;
  Callback cb_;
  os::Clock* clock_ = nullptr;
  os::Fd stop_fd_;  // eventfd: Stop() writes it to wake the thread

  std::atomic<WatchMode> mode_{WatchMode::kInotify};
  mutable std::mutex mu_;
  std::string fallback_reason_;  // guarded by mu_

  // Owned by the watcher thread.
  os::Fd inotify_fd_;
  std::map<int, std::string> dirs_;      // watch descriptor -> directory, relative
  std::map<std::string, FileSig> seen_;  // polling: the last scan
  std::set<std::string> pending_;
  int64_t last_change_ms_ = 0;
  std::set<std::string> written_;  // pending paths closed after writing (not renamed in)
  int64_t next_scan_ms_ = 0;

  std::thread thread_;
  std::atomic<bool> stopped_{false};
  std::atomic<bool> flush_on_stop_{false};
};

// A Watcher on `dir` with the default options, as a function that stops it
// with a flush: the shape `lathe __monitor` takes on a cluster's node to
// record finished checkpoints (exec::DirWatchStart).
Result<std::function<void()>> WatchUntilStopped(
    const std::string& dir, std::function<void(const std::vector<std::string>& paths)> cb);

}  // namespace lathe::snap

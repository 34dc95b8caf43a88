// Checkpoint capture and hand-back for runs that name a checkpoint directory
// (spec `checkpoints: {dir, keep}`): the daemon's side of snap/.
//
// While an attempt runs, a snap::Watcher watches its checkpoint directory and
// every settled burst of writes becomes one snapshot in the daemon's store,
// tagged run=<id>, attempt=<n>, uid=<owner>. When the attempt ends, the
// watcher is stopped with a flush, so a checkpoint written just before the
// process died is still captured; that capture runs on a background thread.
// Before the next attempt starts (retry, requeue after preemption, or a new
// run with `resume_from`), Prepare() waits for that capture, picks the
// newest snapshot holding a complete checkpoint, restores it into the
// directory when the directory's contents are missing or differ, and says
// which file to resume from (LATHE_RESUME_FROM).
//
// Threads: watcher callbacks and captures never take the daemon's lock;
// events they produce are queued here and drained by the daemon (TakeEvents)
// under its own lock. Every public method is thread-safe.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "lathe/common/json.h"
#include "lathe/common/status.h"
#include "lathe/os/clock.h"
#include "lathe/os/users.h"

namespace lathe::snap {
class Store;
class Watcher;
}  // namespace lathe::snap

namespace lathe::daemon {

// How the daemon acts on a checkpoint directory (or any path) of `uid`'s:
// with their file-system identity when the daemon is root and they are not
// (os::AccessAsUser; `gid` is used when `uid` has no passwd entry), as
// itself otherwise (empty).
os::AccessAs ActingAs(uid_t uid, gid_t gid);

// One event for a run's history, produced off the daemon's lock.
struct CheckpointEvent {
  std::string run_id;
  std::string type;  // "checkpoint" | "warning"
  std::string message;
  Json data;
};

// Whose checkpoint directory it is: every access to it — creating, watching,
// reading for a snapshot, restoring into — is made with their identity.
struct DirOwner {
  uid_t uid = 0;
  gid_t gid = 0;
};

// What Prepare did for an attempt.
struct ResumePoint {
  std::string snapshot;     // the snapshot resumed from ("" when none)
  std::string resume_from;  // absolute path of the checkpoint, "" when none
  bool restored = false;    // files were written back (else the dir was intact)
};

class RunCheckpoints {
 public:
  // `store_dir` is opened (created) on first use.
  RunCheckpoints(std::string store_dir, os::Clock& clock);
  ~RunCheckpoints();  // stops watchers, waits for captures

  // Before attempt `attempt` of `run_id` starts: waits for the capture of
  // the previous attempt, then restores the newest complete checkpoint of
  // `run_id` (or, when it has none yet, of `resume_run`, which may be "")
  // into `dir`. Creates `dir` when missing.
  Result<ResumePoint> Prepare(const std::string& run_id, const std::string& resume_run,
                              const std::string& dir, DirOwner owner);

  // Starts watching `dir` for `run_id`'s attempt `attempt`, keeping the
  // run's newest `keep` snapshots (0: all). `capture_now` also takes one
  // snapshot at once, for writes made while nothing watched (a daemon
  // restart under a live run).
  Status Watch(const std::string& run_id, int attempt, const std::string& dir, DirOwner owner,
               int keep, bool capture_now = false);

  // The attempt ended: stop watching and capture what is left, in the
  // background. With no watcher (the daemon was down while the attempt
  // ended) and `capture_if_unwatched`, takes one snapshot of `dir` instead.
  // Never blocks on I/O.
  void Unwatch(const std::string& run_id, int attempt, const std::string& dir, DirOwner owner,
               int keep, bool capture_if_unwatched);

  // A pool attempt's node recorded its `recorded`-th finished checkpoint
  // (exec/checkpoint_records.h): one snapshot of `dir`, in the background.
  // False (nothing started) while the previous capture of `run_id` still
  // runs: the caller asks again later.
  bool CaptureRecorded(const std::string& run_id, int attempt, const std::string& dir,
                       DirOwner owner, int keep, int64_t recorded);

  bool Watching(const std::string& run_id);
  // Waits for the captures of `run_id` still running in the background (the
  // last one of an attempt that ended). After it, a finished run gets no
  // more snapshots.
  void Settle(const std::string& run_id) { WaitCaptures(run_id); }
  std::vector<CheckpointEvent> TakeEvents();

  // The store, opened on first use (nullptr with the error when it cannot be).
  Result<snap::Store*> store();

 private:
  struct Capture {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> done;
  };
  void StartCapture(const std::string& run_id, std::function<void()> fn);  // mu_ held
  void Snapshot(const std::string& run_id, int attempt, const std::string& dir, DirOwner owner,
                int keep, const std::string& why);
  void WaitCaptures(const std::string& run_id);
  void AddEvent(const std::string& run_id, const std::string& type, const std::string& msg,
                Json data = Json::object());

  const std::string store_dir_;
  os::Clock& clock_;

  std::mutex mu_;  // guards everything below
  std::unique_ptr<snap::Store> store_;
  std::map<std::string, std::unique_ptr<snap::Watcher>> watchers_;  // run id -> watcher
  std::multimap<std::string, Capture> captures_;  // run id -> capture in the background
  std::vector<CheckpointEvent> events_;
};

}  // namespace lathe::daemon

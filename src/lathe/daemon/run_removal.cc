// Removing a finished run: `DELETE /api/v1/runs/{run}` (the doctor removes
// its test run this way), and each run that retention selects
// (retention.cc). The record goes with its events and idempotency keys; its
// run directory (logs, attempt directories, launch files) and, when asked,
// its snapshots go too.
#include <string_view>

#include <spdlog/spdlog.h>

#include "lathe/daemon/daemon.h"
#include "lathe/daemon/disk_shares.h"
#include "lathe/daemon/notebooks.h"
#include "lathe/daemon/secret_files.h"
#include "lathe/daemon/workspaces.h"
#include "lathe/os/files.h"
#include "lathe/snap/store.h"

namespace lathe::daemon {
namespace {

// The run's snapshots in `snaps` (the store's list): those tagged run=<id>,
// but those a model version pins (snap/pins.h), which stay however their run
// goes.
Result<size_t> ForgetSnapshotsOf(snap::Store& store, const std::vector<snap::SnapshotInfo>& snaps,
                                 const std::string& run_id) {
  size_t n = 0;
  for (const auto& s : snaps) {
    auto run = s.tags.find("run");
    if (run == s.tags.end() || run->second != run_id) continue;
    ASSIGN_OR_RETURN(auto pins, store.Pins(s.id));
    if (!pins.empty()) continue;
    Status gone = store.Forget(s.id);
    if (gone.msg_id() == "snap.pinned") continue;       // pinned meanwhile
    if (!gone.ok() && !gone.IsNotFound()) return gone;  // NotFound: removed meanwhile
    ++n;
  }
  return n;
}

// A run directory is one the daemon made under its runs/ directory.
bool UnderRuns(const std::string& dir, const std::string& runs) {
  return !runs.empty() && dir.size() > runs.size() + 1 && dir.starts_with(runs + "/") &&
         dir.find("/..") == std::string::npos;
}

}  // namespace

Result<size_t> Daemon::RemoveFinished(const std::string& id, const std::string& ref, bool snapshots,
                                      const std::vector<snap::SnapshotInfo>* snaps) {
  state::RunRecord r;
  {
    MutexLock lock(&mu_);
    ASSIGN_OR_RETURN(r, store_->Get(id));
    // A finished run stays finished: a retry or a requeue is decided in the
    // same pass that ends the attempt, under mu_.
    if (!run::IsTerminal(r.state)) {
      return Status::Msg(Code::kFailedPrecondition, "run.not_finished",
                         {{"run", ref}, {"state", std::string(run::StateName(r.state))}});
    }
  }
  size_t forgotten = 0;
  if (snapshots && !r.spec.checkpoint_dir.empty()) {
    checkpoints_->Settle(r.id);  // the capture at the attempt's end, if still going
    ASSIGN_OR_RETURN(snap::Store * store, checkpoints_->store());
    if (snaps != nullptr) {
      ASSIGN_OR_RETURN(forgotten, ForgetSnapshotsOf(*store, *snaps, r.id));
    } else {
      ASSIGN_OR_RETURN(auto listed, store->List());
      ASSIGN_OR_RETURN(forgotten, ForgetSnapshotsOf(*store, listed, r.id));
    }
  }
  {
    MutexLock lock(&mu_);
    RETURN_IF_ERROR(store_->Delete(r.id));
    stop_deadline_ms_.erase(r.id);
    waiting_why_.erase(r.id);
    quota_noted_.erase(r.id);
    notebook_tokens_.erase(r.id);
    Notify();
  }
  sharing_->Forget("run", r.id);
  if (telemetry_) {  // its series go with its record (docs/telemetry.md)
    if (Status st = telemetry_->Remove(r.id); !st.ok()) {
      spdlog::warn("run {}: telemetry not removed: {}", r.id, st.ToString());
    }
  }
  const DirOwner owner = OwnerOf(r);
  if (UnderRuns(r.run_dir, paths_.runs) && IsNotebook(r)) {
    // The notebook's directory is the user's: what they made in it goes
    // with their identity, never the daemon's.
    (void)RemoveSecretFiles(NotebookDir(r.run_dir), owner.uid, owner.gid);
  }
  // The workspace's clone is in the user's home: removed as the user.
  if (Status st = RemoveWorkspace(r, owner.uid, owner.gid); !st.ok()) {
    spdlog::warn("run {}: workspace not removed: {}", r.id, st.ToString());
  }
  if (UnderRuns(r.run_dir, paths_.runs)) (void)os::RemoveAll(r.run_dir);  // logs only: best effort
  disk_->Kick();  // its share of the disk is free again
  return forgotten;
}

Result<Json> Daemon::DeleteRun(const Caller& caller, const std::string& ref, bool snapshots) {
  ASSIGN_OR_RETURN(state::RunRecord r, Access(caller, ref, AccessAction::kDelete));
  ASSIGN_OR_RETURN(size_t forgotten, RemoveFinished(r.id, ref, snapshots, nullptr));
  return Json{{"id", r.id}, {"snapshots_deleted", forgotten}};
}

}  // namespace lathe::daemon

// Removing a finished run: `DELETE /api/v1/runs/{run}` (the doctor removes
// its test run this way). The record goes with its events and idempotency
// keys; its run directory (logs, launch files) and, when asked, its
// snapshots go too.
#include <string_view>

#include "lathe/daemon/daemon.h"
#include "lathe/os/files.h"
#include "lathe/snap/store.h"

namespace lathe::daemon {
namespace {

// The run's snapshots in the store: those tagged run=<id>.
Result<size_t> ForgetSnapshotsOf(snap::Store& store, const std::string& run_id) {
  ASSIGN_OR_RETURN(auto snaps, store.List());
  size_t n = 0;
  for (const auto& s : snaps) {
    auto run = s.tags.find("run");
    if (run == s.tags.end() || run->second != run_id) continue;
    Status gone = store.Forget(s.id);
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

Result<Json> Daemon::DeleteRun(const Caller& caller, const std::string& ref, bool snapshots) {
  ASSIGN_OR_RETURN(state::RunRecord r, Access(caller, ref, AccessAction::kDelete));
  {
    std::lock_guard<std::mutex> lock(mu_);
    ASSIGN_OR_RETURN(r, store_->Get(r.id));
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
    ASSIGN_OR_RETURN(forgotten, ForgetSnapshotsOf(*store, r.id));
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    RETURN_IF_ERROR(store_->Delete(r.id));
    stop_deadline_ms_.erase(r.id);
    waiting_why_.erase(r.id);
    Notify();
  }
  if (UnderRuns(r.run_dir, paths_.runs)) (void)os::RemoveAll(r.run_dir);  // logs only: best effort
  return Json{{"id", r.id}, {"snapshots_deleted", forgotten}};
}

}  // namespace lathe::daemon

#include "lathe/daemon/retention.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>

#include "lathe/common/units.h"
#include "lathe/daemon/daemon.h"

namespace lathe::daemon {

using run::RunState;

int64_t EndedAtMs(const state::RunRecord& r) {
  return r.finished_at_ms != 0 ? r.finished_at_ms : r.created_at_ms;
}

std::vector<state::RunRecord> SelectForRemoval(const std::vector<state::RunRecord>& runs,
                                               const PruneRequest& req, int64_t now_ms) {
  const int64_t cutoff_ms = now_ms - req.older_than_ms;
  std::vector<state::RunRecord> out;
  for (const auto& r : runs) {
    if (!run::IsTerminal(r.state) || EndedAtMs(r) > cutoff_ms) continue;
    if (req.uid && r.uid != *req.uid) continue;
    out.push_back(r);
  }
  std::sort(out.begin(), out.end(), [](const state::RunRecord& a, const state::RunRecord& b) {
    int64_t ea = EndedAtMs(a), eb = EndedAtMs(b);
    return ea != eb ? ea < eb : a.id < b.id;
  });
  if (req.limit > 0 && out.size() > req.limit) out.resize(req.limit);
  return out;
}

namespace {

Json RemovedJson(const state::RunRecord& r) {
  return Json{{"id", r.id},
              {"name", r.name},
              {"user", r.user},
              {"state", std::string(run::StateName(r.state))},
              {"ended_at_ms", EndedAtMs(r)}};
}

}  // namespace

Result<Json> Daemon::PruneRuns(const Caller& caller, const PruneRequest& req) {
  if (!caller.admin && (!req.uid || *req.uid != caller.uid)) {
    return Status::Msg(Code::kPermissionDenied, "run.prune_others");
  }
  // 1. Select, under mu_: the store picks the candidates (an index-free
  // scan in SQL, but only the chosen records are read), the rule checks them.
  std::vector<state::RunRecord> selected;
  size_t finished_of_theirs = 0;
  {
    MutexLock lock(&mu_);
    const int64_t now = clock_.NowMs();
    ASSIGN_OR_RETURN(auto candidates,
                     store_->FinishedBefore(now - req.older_than_ms, req.uid, req.limit));
    ASSIGN_OR_RETURN(int64_t count, store_->CountFinished(req.uid));
    finished_of_theirs = static_cast<size_t>(count);
    selected = SelectForRemoval(candidates, req, now);
  }
  Json removed = Json::array();
  if (req.dry_run) {
    for (const auto& r : selected) removed.push_back(RemovedJson(r));
    return Json{
        {"removed", removed}, {"kept", finished_of_theirs - selected.size()}, {"dry_run", true}};
  }
  // 2. The store's snapshot list, once for all of them.
  std::vector<snap::SnapshotInfo> snaps;
  bool any_checkpoints = std::any_of(selected.begin(), selected.end(),
                                     [](const auto& r) { return !r.spec.checkpoint_dir.empty(); });
  if (req.snapshots && any_checkpoints) {
    ASSIGN_OR_RETURN(snap::Store * store, checkpoints_->store());
    ASSIGN_OR_RETURN(snaps, store->List());
  }
  // 3. Remove each as DeleteRun would; one that went or was requeued
  // meanwhile is skipped.
  size_t snapshots_deleted = 0;
  for (const auto& r : selected) {
    auto n = RemoveFinished(r.id, r.id, req.snapshots, &snaps);
    if (!n.ok()) {
      if (n.status().IsNotFound() || n.status().code() == Code::kFailedPrecondition) continue;
      return n.status();
    }
    Json j = RemovedJson(r);
    j["snapshots_deleted"] = *n;
    snapshots_deleted += *n;
    removed.push_back(std::move(j));
  }
  return Json{{"removed", removed},
              {"kept", finished_of_theirs - removed.size()},
              {"snapshots_deleted", snapshots_deleted},
              {"dry_run", false}};
}

Result<Json> Daemon::ApplyRetention() {
  RetentionPolicy p;
  {
    MutexLock lock(&mu_);
    p = live_.retention;  // `lathe reload` may replace it
  }
  if (p.finished_runs_ms <= 0) return Json{{"removed", Json::array()}, {"kept", 0}};
  PruneRequest req;
  req.older_than_ms = p.finished_runs_ms;
  req.snapshots = p.snapshots;
  req.limit = kRetentionBatch;
  ASSIGN_OR_RETURN(Json out, PruneRuns(Caller{uid_, user_, true}, req));
  const Json& removed = out["removed"];
  if (!removed.empty()) {
    constexpr size_t kIdsShown = 20;
    std::string ids;
    for (size_t i = 0; i < removed.size() && i < kIdsShown; ++i)
      ids += (ids.empty() ? "" : " ") + removed[i].value("id", "");
    if (removed.size() > kIdsShown) ids += fmt::format(" (+{} more)", removed.size() - kIdsShown);
    spdlog::info(
        "retention: removed {} finished run(s) that ended more than {} ago, {} snapshot(s) "
        "with them: {}",
        removed.size(), FormatDuration(std::chrono::milliseconds(p.finished_runs_ms)),
        out.value("snapshots_deleted", size_t{0}), ids);
  }
  return out;
}

void Daemon::MaybeApplyRetention() {
  if (live_.retention.finished_runs_ms <= 0 || stopping_) return;
  const int64_t now = clock_.MonotonicMs();
  if (retention_at_ms_ && now - *retention_at_ms_ < kRetentionEveryMs) return;
  // The caller's MutexLock holds mu_: dropped while removing, held again on return.
  mu_.Unlock();
  auto out = ApplyRetention();
  mu_.Lock();
  if (!out.ok()) spdlog::warn("retention: {}", out.status().ToString());
  // A full batch leaves more behind: the next pass comes at the next loop period.
  bool more = out.ok() && (*out)["removed"].size() >= kRetentionBatch;
  retention_at_ms_ = more ? now - kRetentionEveryMs : now;
}

}  // namespace lathe::daemon

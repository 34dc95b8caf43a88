#include "lathe/snap/prune.h"

#include <algorithm>
#include <map>

#include "lathe/os/files.h"
#include "lathe/snap/manifest_files.h"
#include "lathe/snap/pins.h"

namespace lathe::snap {
namespace {

std::string GroupKey(const SnapshotInfo& s) {
  auto run = s.tags.find("run");
  return s.source + '\0' + (run == s.tags.end() ? "" : run->second);
}

void KeepGroup(std::vector<const SnapshotInfo*> g, const PrunePolicy& p,
               std::set<SnapshotId>* keep) {
  std::sort(g.begin(), g.end(), [](const SnapshotInfo* a, const SnapshotInfo* b) {
    return a->time_ms != b->time_ms ? a->time_ms > b->time_ms : a->id < b->id;
  });
  std::set<int64_t> periods;
  bool complete_kept = false;
  for (size_t i = 0; i < g.size(); ++i) {
    const SnapshotInfo& s = *g[i];
    bool keep_it = i < p.keep_last;
    if (p.keep_every_ms > 0 && periods.insert(s.time_ms / p.keep_every_ms).second) keep_it = true;
    if (s.complete && !complete_kept) keep_it = complete_kept = true;
    if (keep_it) keep->insert(s.id);
  }
}

}  // namespace

std::set<SnapshotId> SelectKept(const std::vector<SnapshotInfo>& snaps, const PrunePolicy& p) {
  std::map<std::string, std::vector<const SnapshotInfo*>> groups;
  for (const auto& s : snaps) groups[GroupKey(s)].push_back(&s);
  std::set<SnapshotId> keep;
  for (auto& [k, g] : groups) KeepGroup(std::move(g), p, &keep);
  return keep;
}

Result<PruneResult> PruneSnapshots(const StoreContext& ctx, const PrunePolicy& p) {
  if (p.keep_last == 0 && p.keep_every_ms <= 0) {
    return Status::Msg(Code::kInvalidArgument, "snap.prune_no_policy");
  }
  ASSIGN_OR_RETURN(auto snaps, ctx.index.Snapshots());
  // A lost snapshot (lost.h) is neither kept nor removed: keeping it would
  // count it as the newest complete one of its group.
  std::erase_if(snaps,
                [&](const SnapshotInfo& s) { return !os::Exists(ctx.layout.manifest(s.id)); });
  if (!p.run.empty()) {
    std::erase_if(snaps, [&](const SnapshotInfo& s) {
      auto it = s.tags.find("run");
      return it == s.tags.end() || it->second != p.run;
    });
  }
  std::set<SnapshotId> keep = SelectKept(snaps, p);
  // Held from the pins' check to the marks (pins.h): a pin made meanwhile
  // waits, then finds the manifest gone.
  ASSIGN_OR_RETURN(auto pins_lock, LockPins(ctx.layout));
  PruneResult r;
  for (const auto& s : snaps) {
    if (keep.count(s.id)) {
      r.kept.push_back(s.id);
      continue;
    }
    ASSIGN_OR_RETURN(auto holders, ReadPins(ctx.layout, s.id));
    if (!holders.empty()) {
      r.kept.push_back(s.id);
      r.pinned.push_back(s.id);
    } else {
      r.removed.push_back(s.id);
    }
  }
  if (p.dry_run || r.removed.empty()) return r;
  // The three steps of manifest_files.h, each for the whole batch.
  for (const auto& id : r.removed) RETURN_IF_ERROR(MarkPruned(ctx.layout, id));
  RETURN_IF_ERROR(os::FsyncDir(ctx.layout.snapshots()));
  for (const auto& id : r.removed) RETURN_IF_ERROR(ctx.index.RemoveSnapshot(id));
  for (const auto& id : r.removed) RETURN_IF_ERROR(UnlinkPruned(ctx.layout, id));
  return r;
}

Status ForgetSnapshot(const StoreContext& ctx, const SnapshotId& id) {
  if (!os::Exists(ctx.layout.manifest(id))) {
    return Status::Msg(Code::kNotFound, "snap.not_found", {{"snapshot", id}});
  }
  {
    ASSIGN_OR_RETURN(auto pins_lock, LockPins(ctx.layout));
    ASSIGN_OR_RETURN(auto holders, ReadPins(ctx.layout, id));
    if (!holders.empty()) return PinnedError(id, holders);
    RETURN_IF_ERROR(MarkPruned(ctx.layout, id));
    RETURN_IF_ERROR(os::FsyncDir(ctx.layout.snapshots()));
  }
  RETURN_IF_ERROR(ctx.index.RemoveSnapshot(id));
  return UnlinkPruned(ctx.layout, id);
}

}  // namespace lathe::snap

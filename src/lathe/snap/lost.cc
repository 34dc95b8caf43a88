#include "lathe/snap/lost.h"

#include <set>

#include "lathe/os/files.h"
#include "lathe/snap/manifest_files.h"

namespace lathe::snap {

Result<std::vector<SnapshotInfo>> LostSnapshots(const StoreContext& ctx) {
  // The listing comes before the index: a snapshot being taken is in
  // snapshots/ before it is in the index, so it cannot look lost.
  ASSIGN_OR_RETURN(auto ids, ListManifestIds(ctx.layout));
  std::set<SnapshotId> on_disk(ids.begin(), ids.end());
  ASSIGN_OR_RETURN(auto known, ctx.index.Snapshots());
  std::vector<SnapshotInfo> candidates;
  for (auto& s : known) {
    if (on_disk.count(s.id)) continue;
    // A prune renames the manifest to its marker, then takes the snapshot out
    // of the index, then removes the marker: whatever step it is at, one of
    // the three checks below sees it.
    if (os::Exists(ctx.layout.manifest(s.id)) || os::Exists(ctx.layout.pruned(s.id))) continue;
    candidates.push_back(std::move(s));
  }
  if (candidates.empty()) return candidates;
  ASSIGN_OR_RETURN(auto still, ctx.index.SnapshotIds());
  std::erase_if(candidates, [&](const SnapshotInfo& s) { return still.count(s.id) == 0; });
  return candidates;
}

}  // namespace lathe::snap

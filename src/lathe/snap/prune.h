// Which snapshots to keep (a pure policy) and removing the others. Removing
// a manifest frees nothing by itself: chunks are freed by gc (gc.h), which
// also handles a prune that is killed half-way (fewer manifests, same chunks).
#pragma once

#include <set>
#include <vector>

#include "lathe/snap/store.h"
#include "lathe/snap/store_context.h"

namespace lathe::snap {

// Snapshots are grouped by source directory and "run" tag. In each group,
// newest first, keep: the first `keep_last`; the newest of each
// `keep_every_ms` period (periods counted from the epoch); and always the
// newest complete one, so a job can always resume.
std::set<SnapshotId> SelectKept(const std::vector<SnapshotInfo>& snaps, const PrunePolicy& p);

// The caller holds the store's shared lock. InvalidArgument
// (snap.prune_no_policy) when the policy keeps nothing by count or period.
Result<PruneResult> PruneSnapshots(const StoreContext& ctx, const PrunePolicy& p);

// Removes the one snapshot `id` the way a prune removes one (the three steps
// of manifest_files.h), whatever the policy would keep. The caller holds the
// store's shared lock. NotFound (snap.not_found) when it is not in the store.
Status ForgetSnapshot(const StoreContext& ctx, const SnapshotId& id);

}  // namespace lathe::snap

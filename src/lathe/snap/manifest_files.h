// Manifests on disk: snapshots/<id>.json.zst. Writing one is the commit
// point of a snapshot, so it is durable before it returns (temp file, fsync,
// rename, fsync of the directory).
#pragma once

#include <string>
#include <vector>

#include "lathe/common/status.h"
#include "lathe/snap/layout.h"
#include "lathe/snap/manifest.h"
#include "lathe/snap/space_guard.h"

namespace lathe::snap {

// Writes `m` and returns its id. `guard` (may be null) is asked for the space.
Result<SnapshotId> WriteManifest(const StoreLayout& l, const Manifest& m, SpaceGuard* guard);

// Reads and verifies (the content must hash to `id`). NotFound (snap.not_found)
// when absent; IoError (snap.manifest_damaged) when it does not verify.
Result<Manifest> ReadManifest(const StoreLayout& l, const SnapshotId& id);

// Ids of the manifests in snapshots/, sorted. Temp files are ignored.
Result<std::vector<SnapshotId>> ListManifestIds(const StoreLayout& l);

// Unlinks the manifest (the caller fsyncs the directory once after a batch).
Status RemoveManifest(const StoreLayout& l, const SnapshotId& id);

// Prune removes a snapshot in three steps, so that no other process can take
// a snapshot that is going away for one whose manifest was lost:
//   1. MarkPruned renames the manifest to snapshots/<id>.pruned;
//   2. the snapshot leaves the index;
//   3. UnlinkPruned removes the marker.
// A marker left by a killed prune finishes the removal at the next
// reconcile (Store::Reconcile).
Status MarkPruned(const StoreLayout& l, const SnapshotId& id);
Status UnlinkPruned(const StoreLayout& l, const SnapshotId& id);
// Ids of the markers in snapshots/.
Result<std::vector<SnapshotId>> ListPrunedIds(const StoreLayout& l);

bool IsSnapshotId(std::string_view s);  // 64 lower-case hex digits

}  // namespace lathe::snap

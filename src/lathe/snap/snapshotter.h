// Taking one snapshot (the algorithm behind Store::Snapshot). Internal.
//
//  1. Walk the source (lstat, never following symlinks; sockets, fifos and
//     devices are left out, and so is the store itself when it lies inside).
//  2. For each regular file: reuse the parent's entry when size, mtime and
//     inode match; otherwise check its format (format_check.h), cut it into
//     chunks at content-defined points and tensor starts, hash each chunk,
//     and add the chunks the store lacks to a pack.
//  3. Commit: wait for the packs to be fsynced, rename them into packs/,
//     fsync packs/, write the manifest durably, then update the index.
// Any failure before the manifest is written removes the temporary packs; a
// failure for lack of space also leaves a skip record.
#pragma once

#include <string>

#include "lathe/common/status.h"
#include "lathe/snap/store.h"
#include "lathe/snap/store_context.h"

namespace lathe::snap {

// `parent` may be null; `parent_id` is its id (or ""). The caller holds the
// store's shared lock.
Result<SnapshotResult> TakeSnapshot(const StoreContext& ctx, const std::string& dir,
                                    const SnapshotOptions& opts, const Manifest* parent,
                                    const SnapshotId& parent_id);

// Writes a skip record for a snapshot of `source` that `why` prevented
// (best effort: the disk may be full).
void RecordSkip(const StoreContext& ctx, const std::string& source, const SnapshotOptions& opts,
                const Status& why);

}  // namespace lathe::snap

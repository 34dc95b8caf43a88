// Restoring a snapshot (the algorithm behind Store::Restore). Internal.
//
//  1. Check every path of the manifest (paths.h); check the target (a
//     symlink to a directory is followed: the link stays, its directory is
//     replaced).
//  2. Build the tree in a temporary directory beside the target (same
//     filesystem, so the final rename cannot fail with EXDEV).
//  3. Look up every chunk, then read, verify and write them in parallel.
//  4. Set modes and mtimes, flush the filesystem (syncfs), and rename the
//     tree into place; with force, exchange it with the old target and
//     remove the old contents only then.
// Any failure removes the temporary directory and leaves the target as it was.
#pragma once

#include <string>

#include "lathe/snap/store.h"
#include "lathe/snap/store_context.h"

namespace lathe::snap {

// The caller holds the store's shared lock.
Result<RestoreResult> RestoreSnapshot(const StoreContext& ctx, const SnapshotId& id,
                                      const Manifest& m, const std::string& target,
                                      const RestoreOptions& opts);

}  // namespace lathe::snap

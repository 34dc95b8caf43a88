// Lost snapshots: ones the index lists whose manifest is gone from
// snapshots/. Prune never leaves one behind (manifest_files.h: the marker
// keeps the removal apart from a loss), so a lost snapshot was deleted by
// hand or by damage. Its chunks cannot be marked: fsck reports it, gc
// refuses to run while there is one, and the index keeps listing it
// (Store::Reconcile) until its manifest is put back or RebuildIndex, which
// rebuilds from the files alone, forgets it.
#pragma once

#include <vector>

#include "lathe/snap/manifest.h"
#include "lathe/snap/store_context.h"

namespace lathe::snap {

// The caller holds the store's lock. Under the shared lock a prune or a
// snapshot may run meanwhile: each candidate is checked again in an order
// that neither can fool (manifest, then the prune marker, then the index).
Result<std::vector<SnapshotInfo>> LostSnapshots(const StoreContext& ctx);

}  // namespace lathe::snap

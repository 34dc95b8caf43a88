// Garbage collection: mark every chunk that a manifest references, sweep
// the rest. Crash-safe by ordering, at every step:
//   - a pack leaves the index before it leaves the disk, so the index never
//     names a chunk that is gone (snapshots dedup against the index);
//   - a rewritten pack is durable and indexed before the old one is removed;
//   - a damaged or unreadable manifest stops gc before anything is swept
//     (its chunks cannot be marked), and so does a lost one (lost.h: the
//     index lists a snapshot whose manifest is gone).
// Concurrent snapshots cannot be hurt: gc runs under the store's exclusive
// lock, snapshots under its shared lock; temporary packs found under the
// exclusive lock therefore belong to killed snapshots and are removed.
#pragma once

#include "lathe/snap/store.h"
#include "lathe/snap/store_context.h"

namespace lathe::snap {

// A pack whose dead bytes exceed this fraction is rewritten with its live chunks.
inline constexpr double kRepackDeadFraction = 0.3;

// The caller holds the store's exclusive lock.
Result<GcResult> CollectGarbage(const StoreContext& ctx);

}  // namespace lathe::snap

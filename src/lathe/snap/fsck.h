// The store checker: reads every pack, checks its header and verifies every
// chunk against its SHA-256, reads and verifies every manifest, and reports
// each damaged or missing chunk by snapshot and file, and each snapshot the
// index lists whose manifest is gone (lost.h). It changes nothing.
#pragma once

#include "lathe/snap/store.h"
#include "lathe/snap/store_context.h"

namespace lathe::snap {

// The caller holds the store's shared lock.
Result<FsckReport> CheckStore(const StoreContext& ctx);

}  // namespace lathe::snap

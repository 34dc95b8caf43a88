// The store checker: reads every pack and verifies every chunk against its
// SHA-256, reads and verifies every manifest, and reports each damaged or
// missing chunk by snapshot and file. It changes nothing.
#pragma once

#include "lathe/snap/store.h"
#include "lathe/snap/store_context.h"

namespace lathe::snap {

// The caller holds the store's shared lock.
Result<FsckReport> CheckStore(const StoreContext& ctx);

}  // namespace lathe::snap

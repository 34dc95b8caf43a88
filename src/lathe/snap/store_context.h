// What the store's operations (snapshotter, restorer, gc, fsck) share.
// Internal to snap/: the public API is store.h.
#pragma once

#include "lathe/os/clock.h"
#include "lathe/snap/index.h"
#include "lathe/snap/layout.h"

namespace lathe::snap {

struct StoreContext {
  const StoreLayout& layout;
  const StoreConfig& config;
  Index& index;
  os::Clock& clock;
  uint64_t reserve_bytes;
  unsigned threads;
};

}  // namespace lathe::snap

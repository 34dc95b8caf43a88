// A small parallel loop for restore and fsck.
#pragma once

#include <cstddef>
#include <functional>

#include "lathe/common/status.h"

namespace lathe::snap {

// Runs fn(i) for i in [0, n) on `threads` threads. After the first failure no
// new item starts and that failure is returned. `tick` (may be empty) is
// called on the calling thread about every 100 ms while items run, and once
// after every item has ended (so its last call sees all of their work). fn
// must be thread-safe; exceptions must not escape it.
Status ParallelFor(size_t n, unsigned threads, const std::function<Status(size_t)>& fn,
                   const std::function<void()>& tick = {});

// The default thread count: the CPUs, at least 2, at most 8.
unsigned DefaultThreads();

}  // namespace lathe::snap

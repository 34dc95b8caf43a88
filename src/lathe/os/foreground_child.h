// A child run in the foreground of a wrapper that has something left to do
// once it ends (`lathe __torchrun` removes its hostfile).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "lathe/common/status.h"
#include "lathe/os/process.h"

namespace lathe::os {

// Starts `argv` as SpawnChild does (argv[0] searched on PATH, this process's
// environment, process group and descriptors; SIGTERM and SIGINT at their
// defaults) and waits for it to end. Meanwhile SIGTERM and SIGINT do not end
// this process: one sent by anyone but its parent is passed on to the child;
// the parent (a run's monitor) signals the whole tree itself, the child
// included, so its own are not passed on twice. `after` (may be empty) runs
// once the child is reaped, while those signals are still held, so that a
// late one cannot cut it short; then this thread's signal mask is restored
// (a signal held until then is delivered as usual). Single-threaded callers
// only (it waits for the child by pid and sets the thread's mask). Errors:
// exec's (NotFound, PermissionDenied...) when the child could not start,
// `after` not run.
Result<ExitStatus> RunForegroundChild(const std::vector<std::string>& argv,
                                      const std::function<void()>& after);

// Ends this process the way `s` says a child ended: _exit with its code, or
// killed by the same signal (its default action restored and unblocked).
[[noreturn]] void ExitLike(const ExitStatus& s);

}  // namespace lathe::os

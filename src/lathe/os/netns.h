// Network namespaces: a run of its own with nothing but loopback (`network:
// isolated` in the spec, docs/security.md "Run origins"), and the proxy's way
// into it.
//
// A port bound on 127.0.0.1 in the host's namespace is reachable by every
// local user. An isolated run gets a network namespace of its own in which
// only `lo` exists, brought up here: what it binds there is reachable from
// its own processes alone, and the daemon's proxy reaches it by entering the
// namespace on a thread of its own (setns(2) changes only the calling
// thread) to create and connect the socket, which keeps its namespace.
//
// Every call needs CAP_SYS_ADMIN (a daemon running as root).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>

#include "lathe/common/status.h"
#include "lathe/os/fd.h"

namespace lathe::os {

// Moves the calling thread (a single-threaded child before exec) into a new
// network namespace and brings its loopback interface up. The namespace has
// no other interface: no route leaves it.
Status EnterNewNetworkNamespace();

// Brings the loopback interface `lo` of the calling thread's namespace up
// (ioctl SIOCSIFFLAGS; no `ip` binary involved).
Status BringUpLoopback();

// Opens the network namespace of process `pid` (/proc/<pid>/ns/net), held
// open by the returned descriptor. `start_time` is the process's start time
// (ProcessStartTime) when it was recorded: it is checked after opening, so a
// pid reused by another process gives NotFound, never that process's
// namespace. NotFound as well when the process is gone.
Result<Fd> OpenNetworkNamespace(pid_t pid, uint64_t start_time);

// Runs `fn` on a new thread that has entered the network namespace `ns_fd`,
// and waits for it; the calling thread's namespace never changes. A socket
// `fn` creates belongs to that namespace for its whole life, wherever it is
// used afterwards. An error when the thread cannot be made or cannot enter
// the namespace (then `fn` is not run). `fn` must not throw.
Status RunInNetworkNamespace(int ns_fd, const std::function<void()>& fn);

}  // namespace lathe::os

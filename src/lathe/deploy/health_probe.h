// One health probe of a replica: GET <path> over its unix socket, from a
// listener owned by the expected user only (the same SO_PEERCRED check as the
// proxy's, net/proxy.h). Blocking, bounded by a timeout; any thread.
#pragma once

#include <sys/types.h>

#include <string>

#include "lathe/common/status.h"

namespace lathe::deploy {

// The HTTP status the replica answered, read from its status line (the rest
// of the answer is not read; the connection is closed). Unavailable
// (proxy.unreachable) when nothing answers at `socket`; PermissionDenied
// (proxy.wrong_owner) when its listener is not `owner`'s; DeadlineExceeded
// (gateway.probe_timeout) when no status line came within `timeout_ms`;
// Unavailable (gateway.probe_bad_answer) for bytes that are not one.
Result<int> ProbeHealth(const std::string& socket, uid_t owner, const std::string& path,
                        int timeout_ms);

}  // namespace lathe::deploy

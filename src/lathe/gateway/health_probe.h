// One health probe of a replica: GET <path> over its unix socket, from a
// listener owned by the expected user only (the same SO_PEERCRED check as the
// proxy's, net/proxy.h); and the reads of a replica's own figures (its
// /metrics, its model metadata) the same way. Blocking, bounded by a
// timeout; any thread.
#pragma once

#include <sys/types.h>

#include <string>

#include "lathe/common/status.h"

namespace lathe::gateway {

// The HTTP status the replica answered, read from its status line (the rest
// of the answer is not read; the connection is closed). Unavailable
// (proxy.unreachable) when nothing answers at `socket`; PermissionDenied
// (proxy.wrong_owner) when its listener is not `owner`'s; DeadlineExceeded
// (gateway.probe_timeout) when no status line came within `timeout_ms`;
// Unavailable (gateway.probe_bad_answer) for bytes that are not one.
Result<int> ProbeHealth(const std::string& socket, uid_t owner, const std::string& path,
                        int timeout_ms);

struct ReplicaAnswer {
  int status = 0;
  std::string body;  // de-chunked
};

// GET <path> and the whole answer, at most `max_bytes` of it (more:
// Unavailable gateway.probe_bad_answer). The same checks and errors as
// ProbeHealth; the timeout bounds the whole exchange.
Result<ReplicaAnswer> FetchFromReplica(const std::string& socket, uid_t owner,
                                       const std::string& path, int timeout_ms, size_t max_bytes);

}  // namespace lathe::gateway

// The one mapping from a Status to an HTTP status code, for every server of
// Lathe (the daemon's API, `lathe serve`). Each server writes its own error
// body (the API's catalog JSON, KServe's {"error": …}); the codes agree.
#pragma once

#include "lathe/common/status.h"

namespace lathe::net {

// ok 200; invalid_argument 400 (422 for run.idempotency_key_reused: the key
// was used for another request); not_found 404; permission_denied 403 (401 for
// api.unauthenticated); already_exists and failed_precondition 409;
// resource_exhausted 429 (507 Insufficient Storage, RFC 4918, for a full disk:
// state.disk_full, snap.disk_full, snap.reserve); unavailable, cancelled and
// deadline_exceeded 503 (the server could not answer in time or is going away:
// a client may retry); io_error and internal 500.
int HttpStatusFor(const Status& s);

}  // namespace lathe::net

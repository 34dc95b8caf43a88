// Who may call a deployment through the front: anyone when it is public,
// else a client presenting one of its live deployment keys as
// "Authorization: Bearer lathe_dk_<id>_<secret>" (common/deploy_key_format.h).
// The front holds only each key's id and the SHA-256 of its secret
// (routes.json); the Authorization header never reaches a replica (the
// proxy strips it).
#pragma once

#include <cstdint>
#include <string_view>

#include "lathe/common/status.h"
#include "lathe/gateway/front_routes.h"

namespace lathe::gateway {

// OK when `authorization` (the request's header, "" when absent) opens
// `route` at wall time `now_ms`. PermissionDenied otherwise, answered 401:
// deploy_key.malformed (no "Bearer lathe_dk_..." key), deploy_key.invalid
// (no key of this deployment has that id, or its secret differs: one answer
// for both), deploy_key.expired (past its expires_ms).
Status CheckDeployKey(const Route& route, std::string_view authorization, int64_t now_ms);

}  // namespace lathe::gateway

// Who may call a deployment through the front: anyone when it is public,
// else a client presenting one of its live deployment keys as
// "Authorization: Bearer lathe_dk_<id>_<secret>" (common/deploy_key_format.h).
// The front holds only each key's id and the SHA-256 of its secret
// (routes.json); the Authorization header never reaches a replica (the
// proxy strips it).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "lathe/common/status.h"
#include "lathe/gateway/front_routes.h"

namespace lathe::gateway {

// OK when `authorization` (the request's header, "" when absent) opens
// `route` at wall time `now_ms`. PermissionDenied otherwise, answered 401:
// deploy_key.missing (no Authorization header), deploy_key.malformed (a
// header without a "Bearer lathe_dk_..." key; deploy_key.api_token when it
// holds a user's API token), deploy_key.invalid (no key of this deployment
// has that id and secret, or a "lathe_dk_" key cut short or mistyped:
// ExplainKeyRefusal says more), deploy_key.expired
// (past its expires_ms).
Status CheckDeployKey(const Route& route, std::string_view authorization, int64_t now_ms);

// What the front knows besides `route` of a key it refused as
// deploy_key.invalid, said to the key's holder only when the secret matches
// (nobody learns another deployment's name from a key id alone):
// deploy_key.revoked when `gone` (keys `route` had since the front started)
// holds it, deploy_key.wrong_deployment when a key of another deployment of
// `others` (name, keys) is it; the refusal unchanged otherwise.
Status ExplainKeyRefusal(const Status& refusal, const Route& route, std::string_view authorization,
                         const std::vector<RouteKey>& gone,
                         const std::vector<std::pair<std::string, std::vector<RouteKey>>>& others);

}  // namespace lathe::gateway

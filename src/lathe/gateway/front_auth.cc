#include "lathe/gateway/front_auth.h"
#include "lathe/common/units.h"

#include <ctime>
#include <string>

#include "lathe/common/deploy_key_format.h"

namespace lathe::gateway {
namespace {}  // namespace

Status CheckDeployKey(const Route& route, std::string_view authorization, int64_t now_ms) {
  if (route.is_public) return Status::OK();
  constexpr std::string_view kBearer = "Bearer ";
  std::optional<DeployKeyParts> parts;
  if (authorization.substr(0, kBearer.size()) == kBearer) {
    parts = ParseDeployKey(authorization.substr(kBearer.size()));
  }
  if (!parts) return Status::Msg(Code::kPermissionDenied, "deploy_key.malformed");
  for (const RouteKey& k : route.keys) {
    if (k.id != parts->id) continue;
    if (!DeployKeySecretMatches(parts->secret, k.sha256)) break;
    if (k.expires_ms != 0 && now_ms >= k.expires_ms) {
      return Status::Msg(Code::kPermissionDenied, "deploy_key.expired",
                         {{"id", k.id}, {"when", FormatUtc(k.expires_ms)}});
    }
    return Status::OK();
  }
  return Status::Msg(Code::kPermissionDenied, "deploy_key.invalid",
                     {{"id", parts->id}, {"deployment", route.name}});
}

}  // namespace lathe::gateway

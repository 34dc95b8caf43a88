#include "lathe/gateway/front_auth.h"

#include <algorithm>
#include <optional>
#include <string>

#include "lathe/common/deploy_key_format.h"
#include "lathe/common/units.h"

namespace lathe::gateway {
namespace {

constexpr std::string_view kBearer = "Bearer ";
// At most this much of a malformed key's id part is said back.
constexpr size_t kShownIdBytes = 16;

std::optional<DeployKeyParts> KeyOf(std::string_view authorization) {
  if (authorization.substr(0, kBearer.size()) != kBearer) return std::nullopt;
  return ParseDeployKey(authorization.substr(kBearer.size()));
}

// The key among `keys` whose id and secret are `key`'s.
bool Holds(const std::vector<RouteKey>& keys, const DeployKeyParts& key) {
  for (const RouteKey& k : keys) {
    if (k.id == key.id) return DeployKeySecretMatches(key.secret, k.sha256);
  }
  return false;
}

}  // namespace

Status CheckDeployKey(const Route& route, std::string_view authorization, int64_t now_ms) {
  if (route.is_public) return Status::OK();
  if (authorization.empty()) {
    return Status::Msg(Code::kPermissionDenied, "deploy_key.missing", {{"deployment", route.name}});
  }
  std::optional<DeployKeyParts> parts = KeyOf(authorization);
  if (!parts) {
    const bool bearer = authorization.substr(0, kBearer.size()) == kBearer;
    const std::string_view given = bearer ? authorization.substr(kBearer.size()) : "";
    if (given.starts_with(kDeployKeyPrefix)) {
      // The caller meant a key, one cut short or mistyped: said as any
      // wrong key is, naming what stands for its id (never the secret).
      std::string_view id = given.substr(kDeployKeyPrefix.size());
      id = id.substr(0, std::min({id.find('_'), id.size(), kShownIdBytes}));
      return Status::Msg(Code::kPermissionDenied, "deploy_key.invalid",
                         {{"id", id.empty() ? std::string(kDeployKeyPrefix) + "…"
                                            : std::string(kDeployKeyPrefix) + std::string(id)},
                          {"deployment", route.name}});
    }
    // A user's API token (lathe_t_...) opens the API, never a deployment.
    const bool token = given.substr(0, 6) == "lathe_";
    return Status::Msg(Code::kPermissionDenied,
                       token ? "deploy_key.api_token" : "deploy_key.malformed",
                       {{"deployment", route.name}});
  }
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

Status ExplainKeyRefusal(const Status& refusal, const Route& route, std::string_view authorization,
                         const std::vector<RouteKey>& gone,
                         const std::vector<std::pair<std::string, std::vector<RouteKey>>>& others) {
  if (refusal.msg_id() != "deploy_key.invalid") return refusal;
  std::optional<DeployKeyParts> key = KeyOf(authorization);
  if (!key) return refusal;
  if (Holds(gone, *key)) {
    return Status::Msg(Code::kPermissionDenied, "deploy_key.revoked",
                       {{"id", key->id}, {"deployment", route.name}});
  }
  for (const auto& [name, keys] : others) {
    if (name != route.name && Holds(keys, *key)) {
      return Status::Msg(Code::kPermissionDenied, "deploy_key.wrong_deployment",
                         {{"id", key->id}, {"deployment", route.name}, {"other", name}});
    }
  }
  return refusal;
}

}  // namespace lathe::gateway

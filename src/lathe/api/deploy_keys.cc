#include "lathe/api/deploy_keys.h"

#include "lathe/api/tokens.h"
#include "lathe/common/ids.h"
#include "lathe/common/owned_name.h"

namespace lathe::api {
namespace {

using state::CredentialKind;
using Verdict = state::Verified::Verdict;

}  // namespace

Json DeployKeyToJson(const state::CredentialRecord& r, int64_t now_ms) {
  auto opt = [](int64_t v) { return v == 0 ? Json(nullptr) : Json(v); };
  return Json{{"id", r.id},
              {"deployment", r.scope},
              {"name", r.name},
              {"uid", r.uid},
              {"user", r.user},
              {"created_at_ms", r.created_at_ms},
              {"expires_at_ms", opt(r.expires_at_ms)},
              {"last_used_at_ms", opt(r.last_used_at_ms)},
              {"expired", !r.LiveAt(now_ms)},
              {"created_by", r.created_by}};
}

Result<std::unique_ptr<DeployKeyService>> DeployKeyService::Open(const std::string& db_path,
                                                                 os::Clock& clock,
                                                                 Options options) {
  ASSIGN_OR_RETURN(auto store, state::CredentialStore::Open(db_path));
  return std::unique_ptr<DeployKeyService>(new DeployKeyService(std::move(store), clock, options));
}

Result<IssuedDeployKey> DeployKeyService::Issue(const DeployKeyRequest& req) {
  if (!IsValidOwnedName(req.deployment)) {
    return Status::Msg(Code::kInvalidArgument, "deploy_key.bad_deployment",
                       {{"value", Shown(req.deployment)}});
  }
  RETURN_IF_ERROR(CheckCredentialName(req.name));
  ASSIGN_OR_RETURN(int64_t ttl_ms, CredentialTtlMs(req.expires));
  std::lock_guard<std::mutex> lock(mu_);
  const int64_t now = clock_.NowMs();
  ASSIGN_OR_RETURN(int64_t live,
                   store_->Count({CredentialKind::kDeployKey, req.uid, req.deployment, now}));
  if (live >= opts_.max_live_per_deployment) {
    return Status::Msg(Code::kResourceExhausted, "deploy_key.too_many",
                       {{"deployment", req.deployment},
                        {"count", std::to_string(live)},
                        {"max", std::to_string(opts_.max_live_per_deployment)}});
  }
  state::CredentialRecord r;
  r.kind = CredentialKind::kDeployKey;
  r.scope = req.deployment;
  r.uid = req.uid;
  r.user = req.user;
  r.name = req.name;
  r.created_at_ms = now;
  r.expires_at_ms = ttl_ms == 0 ? 0 : now + ttl_ms;
  r.created_by = req.created_by;
  DeployKeyParts parts{NewId("k"), NewSecret()};
  r.id = parts.id;
  r.secret_hash = HashSecret(parts.secret);
  RETURN_IF_ERROR(store_->Insert(r));
  return IssuedDeployKey{r, FormatDeployKey(parts)};
}

Result<state::CredentialRecord> DeployKeyService::Verify(std::string_view key,
                                                         std::string_view deployment) {
  std::optional<DeployKeyParts> parts = ParseDeployKey(key);
  if (!parts) {
    return Status::Msg(Code::kPermissionDenied, "deploy_key.malformed",
                       {{"deployment", Shown(deployment)}});
  }
  std::lock_guard<std::mutex> lock(mu_);
  state::VerifyRules rules{.scope = std::string(deployment),
                           .touch_every_ms = opts_.touch_every_ms};
  ASSIGN_OR_RETURN(state::Verified v, store_->Verify(CredentialKind::kDeployKey, parts->id,
                                                     parts->secret, rules, clock_.NowMs()));
  switch (v.verdict) {
    case Verdict::kOk:
      return std::move(v.record);
    case Verdict::kExpired:
      return Status::Msg(Code::kPermissionDenied, "deploy_key.expired",
                         {{"id", v.record.id}, {"when", FormatUtc(v.record.expires_at_ms)}});
    case Verdict::kInvalid:
      break;
  }
  // One answer for an unknown id, a wrong secret and another deployment's
  // key: the caller learns nothing about which keys exist elsewhere.
  return Status::Msg(Code::kPermissionDenied, "deploy_key.invalid",
                     {{"id", parts->id}, {"deployment", Shown(deployment)}});
}

Result<std::vector<state::CredentialRecord>> DeployKeyService::List(const std::string& deployment,
                                                                    std::optional<uid_t> owner) {
  std::lock_guard<std::mutex> lock(mu_);
  return store_->List({CredentialKind::kDeployKey, owner, deployment});
}

Result<state::CredentialRecord> DeployKeyService::Revoke(const std::string& id,
                                                         std::optional<uid_t> owner) {
  std::lock_guard<std::mutex> lock(mu_);
  ASSIGN_OR_RETURN(std::optional<state::CredentialRecord> r,
                   store_->Revoke(CredentialKind::kDeployKey, id, owner));
  if (!r) return Status::Msg(Code::kNotFound, "deploy_key.not_found", {{"id", Shown(id)}});
  return std::move(*r);
}

Result<int64_t> DeployKeyService::RevokeAll(const std::string& deployment) {
  std::lock_guard<std::mutex> lock(mu_);
  return store_->DeleteScope(CredentialKind::kDeployKey, deployment);
}

}  // namespace lathe::api

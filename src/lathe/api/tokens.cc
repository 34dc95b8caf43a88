#include "lathe/api/tokens.h"

#include <ctime>

#include <fmt/format.h>

#include "lathe/common/ids.h"
#include "lathe/common/units.h"

namespace lathe::api {
namespace {

using state::CredentialKind;
using Verdict = state::Verified::Verdict;

// What a name may be: printable ASCII or any UTF-8 beyond it, no control
// characters (they would garble `lathe token ls`).
bool IsPrintableName(std::string_view name) {
  for (unsigned char c : name)
    if (c < 0x20 || c == 0x7f) return false;
  return true;
}

}  // namespace

std::string Shown(std::string_view s) {
  constexpr size_t kShown = 64;
  std::string out;
  for (char c : s.substr(0, kShown)) out += (c >= 0x20 && c < 0x7f) ? c : '?';
  if (s.size() > kShown) out += "...";
  return out;
}

Result<int64_t> CredentialTtlMs(const std::string& expires) {
  if (expires.empty() || expires == "never") return int64_t{0};
  auto bad = [&] {
    return Status::Msg(Code::kInvalidArgument, "token.bad_expires", {{"value", Shown(expires)}});
  };
  auto d = ParseDuration(expires);
  if (!d.ok()) return bad();
  int64_t ms = d->count();
  if (ms < kMinTokenTtlMs || ms > kMaxTokenTtlMs) return bad();
  return ms;
}

Result<int64_t> RequestedTtlMs(const std::optional<std::string>& expires) {
  if (!expires) return int64_t{0};
  if (expires->empty()) {
    return Status::Msg(Code::kInvalidArgument, "token.bad_expires", {{"value", ""}});
  }
  return CredentialTtlMs(*expires);
}

Status CheckCredentialName(std::string_view name) {
  if (name.size() > kMaxTokenNameBytes || !IsPrintableName(name)) {
    return Status::Msg(Code::kInvalidArgument, "token.bad_name",
                       {{"value", Shown(name)}, {"max", std::to_string(kMaxTokenNameBytes)}});
  }
  return Status::OK();
}

std::optional<TokenParts> ParseToken(std::string_view token) {
  return ParseCredential(token, kTokenPrefix, 't');
}

std::string FormatToken(const TokenParts& parts) { return FormatCredential(kTokenPrefix, parts); }

Json TokenToJson(const state::CredentialRecord& r, int64_t now_ms) {
  auto opt = [](int64_t v) { return v == 0 ? Json(nullptr) : Json(v); };
  return Json{{"id", r.id},
              {"name", r.name},
              {"uid", r.uid},
              {"user", r.user},
              {"created_at_ms", r.created_at_ms},
              {"expires_at_ms", opt(r.expires_at_ms)},
              {"last_used_at_ms", opt(r.last_used_at_ms)},
              {"expired", !r.LiveAt(now_ms)},
              {"created_by", r.created_by}};
}

Result<std::unique_ptr<TokenService>> TokenService::Open(const std::string& db_path,
                                                         os::Clock& clock, Options options) {
  ASSIGN_OR_RETURN(auto store, state::CredentialStore::Open(db_path));
  return std::unique_ptr<TokenService>(new TokenService(std::move(store), clock, options));
}

Result<IssuedToken> TokenService::Issue(const TokenRequest& req) {
  RETURN_IF_ERROR(CheckCredentialName(req.name));
  ASSIGN_OR_RETURN(int64_t ttl_ms, RequestedTtlMs(req.expires));
  std::lock_guard<std::mutex> lock(mu_);
  ASSIGN_OR_RETURN(int64_t held, store_->Count({CredentialKind::kToken, req.uid}));
  if (held >= opts_.max_tokens_per_user) {
    return Status::Msg(Code::kResourceExhausted, "token.too_many",
                       {{"user", req.user},
                        {"count", std::to_string(held)},
                        {"max", std::to_string(opts_.max_tokens_per_user)}});
  }
  const int64_t now = clock_.NowMs();
  state::CredentialRecord r;
  r.kind = CredentialKind::kToken;
  r.uid = req.uid;
  r.user = req.user;
  r.name = req.name;
  r.created_at_ms = now;
  r.expires_at_ms = ttl_ms == 0 ? 0 : now + ttl_ms;
  if (req.not_after_ms != 0 && (r.expires_at_ms == 0 || r.expires_at_ms > req.not_after_ms)) {
    r.expires_at_ms = req.not_after_ms;
  }
  r.created_by = req.created_by;
  TokenParts parts{NewId("t"), NewSecret()};
  r.id = parts.id;
  r.secret_hash = HashSecret(parts.secret);
  RETURN_IF_ERROR(store_->Insert(r));
  return IssuedToken{r, FormatToken(parts)};
}

Result<state::CredentialRecord> TokenService::Verify(std::string_view token) {
  std::optional<TokenParts> parts = ParseToken(token);
  if (!parts) return Status::Msg(Code::kPermissionDenied, "api.unauthenticated");
  std::lock_guard<std::mutex> lock(mu_);
  ASSIGN_OR_RETURN(state::Verified v,
                   store_->Verify(CredentialKind::kToken, parts->id, parts->secret,
                                  {.touch_every_ms = opts_.touch_every_ms}, clock_.NowMs()));
  switch (v.verdict) {
    case Verdict::kOk:
      return std::move(v.record);
    case Verdict::kExpired:
      return Status::Msg(Code::kPermissionDenied, "token.expired",
                         {{"id", v.record.id}, {"when", FormatUtc(v.record.expires_at_ms)}});
    case Verdict::kInvalid:
      break;
  }
  // The same answer for an unknown id and a wrong secret: an id alone (shown
  // by `lathe token ls`) says nothing about whether a guess came close.
  return Status::Msg(Code::kPermissionDenied, "token.invalid", {{"id", parts->id}});
}

bool TokenService::IsLive(const std::string& id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto r = store_->Get(CredentialKind::kToken, id);
  return r.ok() && r->has_value() && (*r)->LiveAt(clock_.NowMs());
}

Result<std::vector<state::CredentialRecord>> TokenService::List(std::optional<uid_t> uid) {
  std::lock_guard<std::mutex> lock(mu_);
  return store_->List({CredentialKind::kToken, uid});
}

Result<state::CredentialRecord> TokenService::Revoke(const std::string& id,
                                                     std::optional<uid_t> owner) {
  std::lock_guard<std::mutex> lock(mu_);
  ASSIGN_OR_RETURN(std::optional<state::CredentialRecord> r,
                   store_->Revoke(CredentialKind::kToken, id, owner));
  if (!r) return Status::Msg(Code::kNotFound, "token.not_found", {{"id", Shown(id)}});
  return std::move(*r);
}

}  // namespace lathe::api

#include "lathe/api/sessions.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <algorithm>

#include "lathe/api/auth.h"
#include "lathe/api/tokens.h"
#include "lathe/common/credential_format.h"
#include "lathe/common/ids.h"

namespace lathe::api {
namespace {

using state::CredentialKind;

constexpr std::string_view kHex = "0123456789abcdef";
constexpr const char* kCsrfKeyName = "csrf";

Status CodeInvalid() { return Status::Msg(Code::kPermissionDenied, "session.code_invalid"); }

}  // namespace

Json SessionToJson(const SessionRecord& r) {
  return Json{{"id", r.id},
              {"uid", r.uid},
              {"user", r.user},
              {"scope", r.scope},
              {"created_at_ms", r.created_ms},
              {"expires_at_ms", r.expires_ms},
              {"last_used_at_ms", r.last_used_ms},
              {"created_by", r.created_by}};
}

Result<std::unique_ptr<SessionService>> SessionService::Open(const std::string& db_path,
                                                             os::Clock& clock, Options o) {
  ASSIGN_OR_RETURN(auto store, state::CredentialStore::Open(db_path));
  ASSIGN_OR_RETURN(std::string key, store->KeyOrInsert(kCsrfKeyName, NewSecret()));
  return std::unique_ptr<SessionService>(
      new SessionService(std::move(store), clock, o, std::move(key)));
}

SessionRecord SessionService::ToRecord(const state::CredentialRecord& r) const {
  SessionRecord s;
  s.id = r.id;
  s.uid = r.uid;
  s.user = r.user;
  s.scope = r.scope;
  s.created_ms = r.created_at_ms;
  s.expires_ms = std::min(r.expires_at_ms, r.last_used_at_ms + opts_.idle_ttl_ms);
  s.last_used_ms = r.last_used_at_ms;
  s.ends_ms = r.expires_at_ms;
  s.created_by = r.created_by;
  return s;
}

bool SessionService::CreatorLive(const std::string& created_by, int64_t now_ms, int depth) {
  constexpr int kMaxChain = 8;  // sessions made by sessions; a longer chain is not live
  constexpr std::string_view kToken = "token ", kSession = "session ";
  if (created_by.starts_with(kToken)) {
    return !token_live_ || token_live_(created_by.substr(kToken.size()));
  }
  if (created_by.starts_with(kSession)) {
    if (depth >= kMaxChain) return false;
    auto parent = store_->Get(CredentialKind::kSession, created_by.substr(kSession.size()));
    return parent.ok() && parent->has_value() && (*parent)->LiveAt(now_ms, opts_.idle_ttl_ms) &&
           CreatorLive((*parent)->created_by, now_ms, depth + 1);
  }
  return true;  // the socket (the kernel vouched) or the daemon's own token
}

void SessionService::DropExpiredCodes(int64_t now_mono_ms) {
  std::erase_if(codes_, [&](const auto& kv) { return kv.second.expires_mono_ms <= now_mono_ms; });
}

Result<std::string> SessionService::IssueCode(uid_t uid, const std::string& user,
                                              const std::string& scope,
                                              const std::string& created_by, int64_t not_after_ms) {
  std::lock_guard<std::mutex> lock(mu_);
  const int64_t now = clock_.MonotonicMs();
  DropExpiredCodes(now);
  size_t mine = 0;
  for (const auto& [hash, c] : codes_) mine += c.uid == uid ? 1 : 0;
  if (mine >= opts_.max_codes_per_user || codes_.size() >= opts_.max_codes) {
    const size_t max =
        mine >= opts_.max_codes_per_user ? opts_.max_codes_per_user : opts_.max_codes;
    return Status::Msg(
        Code::kResourceExhausted, "session.too_many_codes",
        {{"max", std::to_string(max)}, {"seconds", std::to_string(opts_.code_ttl_ms / 1000)}});
  }
  std::string code = NewSecret();
  codes_[HashSecret(code)] =
      PendingCode{uid, user, scope, created_by, now + opts_.code_ttl_ms, not_after_ms};
  return code;
}

Status SessionService::MakeRoom(uid_t uid, const std::string& scope, int64_t now_ms) {
  RETURN_IF_ERROR(
      store_->DeleteExpired(CredentialKind::kSession, now_ms, opts_.idle_ttl_ms).status());
  ASSIGN_OR_RETURN(std::vector<state::CredentialRecord> mine,
                   store_->List({CredentialKind::kSession, uid, scope}));
  if (static_cast<int64_t>(mine.size()) < opts_.max_sessions_per_user) return Status::OK();
  std::sort(mine.begin(), mine.end(),
            [](const auto& a, const auto& b) { return a.last_used_at_ms < b.last_used_at_ms; });
  const size_t extra = mine.size() - static_cast<size_t>(opts_.max_sessions_per_user) + 1;
  for (size_t i = 0; i < extra; ++i) {
    RETURN_IF_ERROR(store_->Delete(CredentialKind::kSession, mine[i].id).status());
  }
  return Status::OK();
}

Result<IssuedSession> SessionService::Redeem(std::string_view code, std::string_view scope) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = codes_.find(HashSecret(code));
  if (it == codes_.end()) return CodeInvalid();
  PendingCode c = std::move(it->second);
  codes_.erase(it);  // single use: a code shown on the wrong origin is spent too
  if (c.expires_mono_ms <= clock_.MonotonicMs() || c.scope != scope) return CodeInvalid();
  const int64_t now = clock_.NowMs();
  // The credential that asked for the code may have ended since.
  if ((c.not_after_ms > 0 && c.not_after_ms <= now) || !CreatorLive(c.created_by, now, 0)) {
    return CodeInvalid();
  }

  RETURN_IF_ERROR(MakeRoom(c.uid, c.scope, now));
  state::CredentialRecord r;
  r.kind = CredentialKind::kSession;
  r.id = NewId("s");
  r.uid = c.uid;
  r.user = c.user;
  r.scope = c.scope;
  const std::string secret = NewSecret();
  r.secret_hash = HashSecret(secret);
  r.created_at_ms = now;
  r.expires_at_ms = now + opts_.absolute_ttl_ms;
  if (c.not_after_ms > 0) r.expires_at_ms = std::min(r.expires_at_ms, c.not_after_ms);
  r.last_used_at_ms = now;
  r.created_by = c.created_by;
  RETURN_IF_ERROR(store_->Insert(r));
  return IssuedSession{ToRecord(r), r.id + "_" + secret};
}

Result<SessionRecord> SessionService::Verify(std::string_view cookie_value,
                                             std::string_view scope) {
  std::optional<CredentialParts> parts = ParseCredential(cookie_value, "", 's');
  if (!parts) return Status::Msg(Code::kPermissionDenied, "session.invalid", {{"id", "-"}});
  std::lock_guard<std::mutex> lock(mu_);
  const int64_t now = clock_.NowMs();
  state::VerifyRules rules{.scope = std::string(scope),
                           .idle_ms = opts_.idle_ttl_ms,
                           .touch_every_ms = opts_.touch_every_ms,
                           .also_live = [&](const state::CredentialRecord& r) {
                             return CreatorLive(r.created_by, now, 0);
                           }};
  ASSIGN_OR_RETURN(state::Verified v,
                   store_->Verify(CredentialKind::kSession, parts->id, parts->secret, rules, now));
  // One answer for every failure, an expired session's too: an id (which
  // listings show) says nothing about whether a guess of the secret came close.
  if (v.verdict != state::Verified::Verdict::kOk) {
    return Status::Msg(Code::kPermissionDenied, "session.invalid", {{"id", parts->id}});
  }
  return ToRecord(v.record);
}

bool SessionService::IsLive(const std::string& id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto r = store_->Get(CredentialKind::kSession, id);
  const int64_t now = clock_.NowMs();
  return r.ok() && r->has_value() && (*r)->LiveAt(now, opts_.idle_ttl_ms) &&
         CreatorLive((*r)->created_by, now, 0);
}

std::string SessionService::CsrfToken(const SessionRecord& s) const {
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  const std::string msg = "csrf:" + s.id;
  HMAC(EVP_sha256(), csrf_key_.data(), static_cast<int>(csrf_key_.size()),
       reinterpret_cast<const unsigned char*>(msg.data()), msg.size(), mac, &len);
  std::string out;
  out.reserve(len * 2);
  for (unsigned int i = 0; i < len; ++i) {
    out += kHex[mac[i] >> 4];
    out += kHex[mac[i] & 15];
  }
  return out;
}

bool SessionService::CheckCsrf(const SessionRecord& s, std::string_view header_value) const {
  return ConstantTimeEquals(CsrfToken(s), std::string(header_value));
}

Result<std::vector<SessionRecord>> SessionService::List(std::optional<uid_t> uid) {
  std::lock_guard<std::mutex> lock(mu_);
  ASSIGN_OR_RETURN(std::vector<state::CredentialRecord> rows,
                   store_->List({CredentialKind::kSession, uid}));
  const int64_t now = clock_.NowMs();
  std::vector<SessionRecord> out;
  for (const auto& r : rows)
    if (r.LiveAt(now, opts_.idle_ttl_ms)) out.push_back(ToRecord(r));
  return out;
}

Result<SessionRecord> SessionService::Revoke(const std::string& id, std::optional<uid_t> owner) {
  std::lock_guard<std::mutex> lock(mu_);
  ASSIGN_OR_RETURN(std::optional<state::CredentialRecord> r,
                   store_->Revoke(CredentialKind::kSession, id, owner));
  if (!r)
    return Status::Msg(Code::kNotFound, "session.not_found", {{"id", Shown(id.substr(0, 64))}});
  return ToRecord(*r);
}

size_t SessionService::codes_outstanding() {
  std::lock_guard<std::mutex> lock(mu_);
  return codes_.size();
}

}  // namespace lathe::api

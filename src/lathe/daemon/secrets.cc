#include "lathe/daemon/secrets.h"

#include "lathe/common/json.h"
#include "lathe/common/secret_box.h"
#include "lathe/os/files.h"
#include "lathe/run/spec.h"

namespace lathe::daemon {
namespace {

constexpr size_t kKeyHexDigits = kSecretKeyBytes * 2;

std::string ToHex(std::string_view bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned char b : bytes) {
    out += kHex[b >> 4];
    out += kHex[b & 15];
  }
  return out;
}

// The key from its file's text: 64 hex digits and a newline.
std::optional<std::string> KeyFromText(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
  if (text.size() != kKeyHexDigits) return std::nullopt;
  std::string key;
  for (size_t i = 0; i < text.size(); i += 2) {
    auto nib = [](char c) {
      return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    };
    int hi = nib(text[i]), lo = nib(text[i + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    key += static_cast<char>(hi << 4 | lo);
  }
  return key;
}

Status CheckName(const std::string& name) {
  if (!run::ValidSecretName(name)) {
    return Status::Msg(Code::kInvalidArgument, "secret.bad_name",
                       {{"value", IsValidUtf8(name) ? name : "?"}});
  }
  return Status::OK();
}

}  // namespace

Status Secrets::OpenStore(bool create) {
  if (store_) return Status::OK();
  if (!os::Exists(paths_.key)) {
    if (!create) return Status::OK();
    std::string key = NewSecretKey();
    if (key.size() != kSecretKeyBytes) return Status::Internal("no random bytes for the key");
    RETURN_IF_ERROR(os::WriteFileAtomic(paths_.key, ToHex(key) + "\n", 0600));
  }
  ASSIGN_OR_RETURN(std::string text, os::ReadFileUpTo(paths_.key, kKeyHexDigits + 2));
  std::optional<std::string> key = KeyFromText(std::move(text));
  if (!key) return Status::Msg(Code::kInternal, "secret.bad_key", {{"path", paths_.key}});
  ASSIGN_OR_RETURN(SecretBox box, SecretBox::FromKey(std::move(*key)));
  ASSIGN_OR_RETURN(store_, state::SecretStore::Open(paths_.db, std::move(box)));
  return Status::OK();
}

Result<bool> Secrets::Set(uid_t uid, const std::string& user, const std::string& name,
                          std::string_view value) {
  RETURN_IF_ERROR(CheckName(name));
  if (value.empty() || value.size() > kMaxSecretValueBytes ||
      value.find('\0') != std::string_view::npos || !IsValidUtf8(value)) {
    return Status::Msg(Code::kInvalidArgument, "secret.bad_value",
                       {{"max", std::to_string(kMaxSecretValueBytes)}});
  }
  std::lock_guard<std::mutex> lock(mu_);
  RETURN_IF_ERROR(OpenStore(/*create=*/true));
  auto old = store_->Value(uid, name);
  const bool exists = !old.ok() || old->has_value();  // one that does not open is replaced
  if (!exists) {
    ASSIGN_OR_RETURN(int64_t count, store_->CountFor(uid));
    if (count >= kMaxSecretsPerUser) {
      return Status::Msg(Code::kResourceExhausted, "secret.too_many",
                         {{"user", user},
                          {"count", std::to_string(count)},
                          {"max", std::to_string(kMaxSecretsPerUser)}});
    }
  }
  return store_->Put(uid, name, value, clock_.NowMs());
}

Result<std::vector<state::SecretRecord>> Secrets::List(uid_t uid) {
  std::lock_guard<std::mutex> lock(mu_);
  RETURN_IF_ERROR(OpenStore(/*create=*/false));
  if (!store_) return std::vector<state::SecretRecord>();
  return store_->List(uid);
}

Status Secrets::Remove(uid_t uid, const std::string& name) {
  RETURN_IF_ERROR(CheckName(name));
  std::lock_guard<std::mutex> lock(mu_);
  RETURN_IF_ERROR(OpenStore(/*create=*/false));
  bool removed = false;
  if (store_) {
    ASSIGN_OR_RETURN(removed, store_->Delete(uid, name));
  }
  if (!removed) return Status::Msg(Code::kNotFound, "secret.not_found", {{"name", name}});
  return Status::OK();
}

Status Secrets::CheckSet(uid_t uid, const std::string& user,
                         const std::vector<std::string>& names) {
  if (names.empty()) return Status::OK();
  std::lock_guard<std::mutex> lock(mu_);
  RETURN_IF_ERROR(OpenStore(/*create=*/false));
  std::vector<state::SecretRecord> mine;
  if (store_) {
    ASSIGN_OR_RETURN(mine, store_->List(uid));
  }
  for (const auto& name : names) {
    bool found = false;
    for (const auto& s : mine) found = found || s.name == name;
    if (!found) {
      return Status::Msg(Code::kNotFound, "secret.missing", {{"name", name}, {"user", user}});
    }
  }
  return Status::OK();
}

Result<std::map<std::string, std::string>> Secrets::SecretEnv(
    uid_t uid, const std::string& user, const std::vector<std::string>& names) {
  std::map<std::string, std::string> env;
  if (names.empty()) return env;
  std::lock_guard<std::mutex> lock(mu_);
  RETURN_IF_ERROR(OpenStore(/*create=*/false));
  for (const auto& name : names) {
    auto gone = [&] {
      return Status::Msg(Code::kFailedPrecondition, "secret.gone",
                         {{"name", name}, {"user", user}});
    };
    if (!store_) return gone();
    auto v = store_->Value(uid, name);
    if (!v.ok()) {
      return Status::Msg(Code::kInternal, "secret.unreadable",
                         {{"name", name}, {"user", user}, {"path", paths_.key}});
    }
    if (!*v) return gone();
    env[name] = std::move(**v);
  }
  return env;
}

std::vector<std::string> Secrets::Values(uid_t uid, const std::vector<std::string>& names) {
  std::vector<std::string> out;
  if (names.empty()) return out;
  std::lock_guard<std::mutex> lock(mu_);
  if (!OpenStore(/*create=*/false).ok() || !store_) return out;
  for (const auto& name : names) {
    auto v = store_->Value(uid, name);
    if (v.ok() && *v) out.push_back(std::move(**v));
  }
  return out;
}

}  // namespace lathe::daemon

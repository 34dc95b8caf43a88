#include "lathe/api/run_origin_cache.h"

#include <openssl/sha.h>

namespace lathe::api {

std::optional<RunOriginAdmission> RunOriginCache::Find(const std::string& key) {
  if (key.empty()) return std::nullopt;
  const int64_t now = clock_.MonotonicMs();
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(key);
  if (it == entries_.end()) return std::nullopt;
  if (now >= it->second.expires_ms) {
    entries_.erase(it);
    return std::nullopt;
  }
  return it->second.admission;
}

void RunOriginCache::Clear() {
  std::lock_guard<std::mutex> lock(mu_);
  entries_.clear();
}

void RunOriginCache::Put(const std::string& key, RunOriginAdmission admission) {
  if (key.empty() || ttl_ms_ <= 0) return;
  const int64_t expires = clock_.MonotonicMs() + ttl_ms_;
  std::lock_guard<std::mutex> lock(mu_);
  if (entries_.size() >= max_entries_) entries_.clear();  // a burst of credentials: start over
  entries_[key] = Entry{std::move(admission), expires};
}

std::string RunOriginCache::Key(std::string_view run_id, std::string_view port_name,
                                std::string_view authorization, std::string_view cookie) {
  if (authorization.empty() && cookie.empty()) return "";
  // The credential's digest, not the credential: the cache holds no secret.
  std::string material;
  material.reserve(authorization.size() + cookie.size() + 1);
  material.append(authorization).append(1, '\0').append(cookie);
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(material.data()), material.size(), digest);
  std::string key(run_id);
  key.append(1, '\0').append(port_name).append(1, '\0');
  key.append(reinterpret_cast<const char*>(digest), sizeof(digest));
  return key;
}

}  // namespace lathe::api

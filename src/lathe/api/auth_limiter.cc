#include "lathe/api/auth_limiter.h"

#include <algorithm>

namespace lathe::api {

std::string AddressOf(const std::string& remote) {
  size_t colon = remote.rfind(':');
  return colon == std::string::npos ? remote : remote.substr(0, colon);
}

void AuthLimiter::Expire(std::deque<int64_t>& failures, int64_t now_ms) const {
  while (!failures.empty() && failures.front() <= now_ms - opts_.window_ms) failures.pop_front();
}

int64_t AuthLimiter::RetryAfterMs(const std::string& address, int64_t now_ms) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = failures_.find(address);
  if (it == failures_.end()) return 0;
  Expire(it->second, now_ms);
  if (it->second.empty()) {
    failures_.erase(it);
    return 0;
  }
  if (static_cast<int>(it->second.size()) < opts_.max_failures) return 0;
  return it->second.front() + opts_.window_ms - now_ms;
}

void AuthLimiter::MakeRoom(int64_t now_ms) {
  for (auto it = failures_.begin(); it != failures_.end();) {
    Expire(it->second, now_ms);
    it = it->second.empty() ? failures_.erase(it) : std::next(it);
  }
  if (failures_.size() < opts_.max_addresses) return;
  auto oldest = std::min_element(
      failures_.begin(), failures_.end(),
      [](const auto& a, const auto& b) { return a.second.back() < b.second.back(); });
  failures_.erase(oldest);
}

bool AuthLimiter::RecordFailure(const std::string& address, int64_t now_ms) {
  std::lock_guard<std::mutex> lock(mu_);
  if (failures_.find(address) == failures_.end() && failures_.size() >= opts_.max_addresses) {
    MakeRoom(now_ms);
  }
  std::deque<int64_t>& f = failures_[address];
  Expire(f, now_ms);
  f.push_back(now_ms);
  while (static_cast<int>(f.size()) > opts_.max_failures) f.pop_front();
  return static_cast<int>(f.size()) == opts_.max_failures;
}

size_t AuthLimiter::tracked() const {
  std::lock_guard<std::mutex> lock(mu_);
  return failures_.size();
}

}  // namespace lathe::api

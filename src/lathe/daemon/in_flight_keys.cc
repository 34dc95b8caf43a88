#include "lathe/daemon/in_flight_keys.h"

namespace lathe::daemon {

InFlightKeys::Lease::~Lease() {
  if (owner_ != nullptr) owner_->Release(key_);
}

std::optional<InFlightKeys::Lease> InFlightKeys::TryAcquire(uid_t uid, const std::string& key) {
  std::pair<uid_t, std::string> k{uid, key};
  std::lock_guard<std::mutex> lock(mu_);
  if (!held_.insert(k).second) return std::nullopt;
  return Lease(this, std::move(k));
}

void InFlightKeys::Release(const std::pair<uid_t, std::string>& key) {
  std::lock_guard<std::mutex> lock(mu_);
  held_.erase(key);
}

}  // namespace lathe::daemon

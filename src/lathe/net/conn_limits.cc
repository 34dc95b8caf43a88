#include "lathe/net/conn_limits.h"

namespace lathe::net {

// A client holding nothing may take the slots kept for newcomers; one that
// holds a connection already leaves them, so that whoever comes next still
// gets one while a few clients hold every other slot.
bool ConnectionLimits::Fits(const ConnClient& c, size_t mine) const {
  const size_t keep = c.reserved || mine == 0 ? 0 : o_.newcomer_connections;
  const size_t cap = o_.max_connections + (c.reserved ? o_.reserved_connections : 0);
  if (served_ + keep >= cap) return false;
  const size_t tcp_cap = o_.max_tcp_connections == 0 ? o_.max_connections : o_.max_tcp_connections;
  return !c.tcp || served_tcp_ + keep < tcp_cap;
}

ConnectionLimits::Admission ConnectionLimits::Refuse(Admission why) {
  if (refusing_ >= o_.max_refusing) return Admission::kDrop;
  ++refusing_;
  return why;
}

ConnectionLimits::Admission ConnectionLimits::Admit(const ConnClient& c) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = per_client_.find(c.key);
  const size_t mine = it == per_client_.end() ? 0 : it->second;
  if (!c.reserved && c.limit > 0 && mine >= c.limit) return Refuse(Admission::kRejectClient);
  if (!Fits(c, mine)) return Refuse(Admission::kReject);
  ++served_;
  if (c.tcp) ++served_tcp_;
  ++per_client_[c.key];
  return Admission::kServe;
}

void ConnectionLimits::Release(const ConnClient& c, bool served) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!served) {
    --refusing_;
    return;
  }
  --served_;
  if (c.tcp) --served_tcp_;
  auto it = per_client_.find(c.key);
  if (it != per_client_.end() && --it->second == 0) per_client_.erase(it);
}

std::optional<ConnectionLimits::RefusalReport> ConnectionLimits::NoteRefusal(const ConnClient& c,
                                                                             Admission why,
                                                                             int64_t now_ms) {
  std::lock_guard<std::mutex> lock(mu_);
  ++refused_unlogged_;
  if (last_log_ms_ && now_ms - *last_log_ms_ < o_.refusal_log_interval_ms) return std::nullopt;
  last_log_ms_ = now_ms;
  RefusalReport r{refused_unlogged_, c.key, why, c.limit};
  refused_unlogged_ = 0;
  return r;
}

size_t ConnectionLimits::served() const {
  std::lock_guard<std::mutex> lock(mu_);
  return served_;
}

size_t ConnectionLimits::held_by(const std::string& key) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = per_client_.find(key);
  return it == per_client_.end() ? 0 : it->second;
}

}  // namespace lathe::net

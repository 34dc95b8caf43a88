#include "lathe/gateway/balancer.h"

#include <algorithm>

namespace lathe::gateway {

std::vector<std::string> Balancer::Update(const std::vector<RouteReplica>& replicas,
                                          const std::map<std::string, int64_t>& traffic) {
  std::vector<std::string> fresh;
  std::vector<ReplicaState> next;
  next.reserve(replicas.size());
  for (const RouteReplica& r : replicas) {
    ReplicaState* old = Find(r.id);
    if (old != nullptr && old->route.socket == r.socket && old->route.uid == r.uid) {
      ReplicaState kept = std::move(*old);
      kept.route = r;
      next.push_back(std::move(kept));
    } else {
      ReplicaState s;
      s.route = r;
      s.last_error = "not probed yet";
      next.push_back(std::move(s));
      fresh.push_back(r.id);
    }
  }
  replicas_ = std::move(next);
  traffic_ = traffic;
  return fresh;
}

// Allocates nothing: it runs for every request.
const RouteReplica* Balancer::Choose(std::string_view exclude) {
  // 1. The candidates, and the weight of each version that has one (in the
  //    traffic map's order, which is the versions' sorted order).
  bool any = false;
  for (const auto& r : replicas_) any = any || Candidate(r, exclude);
  if (!any) return nullptr;
  auto has_candidate = [&](const std::string& version) {
    for (const auto& r : replicas_) {
      if (Candidate(r, exclude) && r.route.version == version) return true;
    }
    return false;
  };
  int64_t total = 0;
  for (const auto& [v, w] : traffic_) {
    if (w > 0 && has_candidate(v)) total += w;
  }
  // 2. A version by weight; none weighted: every candidate is eligible.
  const std::string* version = nullptr;
  if (total > 0) {
    double x = std::clamp(random01_(), 0.0, 1.0) * static_cast<double>(total);
    for (const auto& [v, w] : traffic_) {
      if (w <= 0 || !has_candidate(v)) continue;
      version = &v;
      if (x < static_cast<double>(w)) break;
      x -= static_cast<double>(w);
    }
  }
  auto eligible = [&](const ReplicaState& r) {
    return Candidate(r, exclude) && (version == nullptr || r.route.version == *version);
  };
  // 3. The fewest in flight within that version; ties go to the first one
  //    after the replica picked last (round robin over the routes' order).
  int64_t least = INT64_MAX;
  for (const auto& r : replicas_) {
    if (eligible(r)) least = std::min(least, r.in_flight);
  }
  size_t first = SIZE_MAX, pick = SIZE_MAX;
  for (size_t i = 0; i < replicas_.size(); ++i) {
    if (!eligible(replicas_[i]) || replicas_[i].in_flight != least) continue;
    if (first == SIZE_MAX) first = i;
    if (i > last_pick_) {
      pick = i;
      break;
    }
  }
  if (pick == SIZE_MAX) pick = first;
  last_pick_ = pick;
  ++replicas_[pick].in_flight;
  return &replicas_[pick].route;
}

void Balancer::Finish(std::string_view id, bool error) {
  ReplicaState* r = Find(id);
  if (r == nullptr) return;
  if (r->in_flight > 0) --r->in_flight;
  ++r->requests;
  if (error) ++r->errors;
}

void Balancer::RequestFailed(std::string_view id, std::string why, int64_t now_ms) {
  ReplicaState* r = Find(id);
  if (r == nullptr) return;
  r->healthy = false;
  r->last_error = std::move(why);
}

bool Balancer::ProbeResult(std::string_view id, bool ok, std::string why, int64_t now_ms) {
  ReplicaState* r = Find(id);
  if (r == nullptr) return false;
  const bool was = r->healthy;
  r->healthy = ok;
  r->last_probe_ms = now_ms;
  r->last_error = ok ? "" : std::move(why);
  return ok && !was;
}

bool Balancer::AnyReady() const {
  return std::any_of(replicas_.begin(), replicas_.end(),
                     [&](const ReplicaState& r) { return Candidate(r, {}); });
}

int64_t Balancer::healthy_count() const {
  return std::count_if(replicas_.begin(), replicas_.end(),
                       [](const ReplicaState& r) { return r.healthy; });
}

ReplicaState* Balancer::Find(std::string_view id) {
  for (auto& r : replicas_) {
    if (r.route.id == id) return &r;
  }
  return nullptr;
}

}  // namespace lathe::gateway

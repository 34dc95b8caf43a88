#include "lathe/deploy/balancer.h"

#include <algorithm>

namespace lathe::deploy {

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

std::optional<RouteReplica> Balancer::Choose(std::string_view exclude) {
  // 1. The candidates, and the weight of each version that has one.
  std::map<std::string, int64_t> weights;
  bool any = false;
  for (const auto& r : replicas_) {
    if (!Candidate(r, exclude)) continue;
    any = true;
    auto w = traffic_.find(r.route.version);
    if (w != traffic_.end() && w->second > 0) weights[r.route.version] = w->second;
  }
  if (!any) return std::nullopt;
  // 2. A version by weight; none weighted: every candidate is eligible.
  std::optional<std::string> version;
  if (!weights.empty()) {
    int64_t total = 0;
    for (const auto& [v, w] : weights) total += w;
    double x = std::clamp(random01_(), 0.0, 1.0) * static_cast<double>(total);
    for (const auto& [v, w] : weights) {
      version = v;
      if (x < static_cast<double>(w)) break;
      x -= static_cast<double>(w);
    }
  }
  // 3. The fewest in flight within that version; ties go to the first one
  //    after the replica picked last (round robin over the routes' order).
  int64_t least = INT64_MAX;
  std::vector<size_t> tied;
  for (size_t i = 0; i < replicas_.size(); ++i) {
    const ReplicaState& r = replicas_[i];
    if (!Candidate(r, exclude) || (version && r.route.version != *version)) continue;
    if (r.in_flight < least) {
      least = r.in_flight;
      tied.clear();
    }
    if (r.in_flight == least) tied.push_back(i);
  }
  size_t pick = tied.front();
  for (size_t i : tied) {
    if (i > last_pick_) {
      pick = i;
      break;
    }
  }
  last_pick_ = pick;
  ++replicas_[pick].in_flight;
  return replicas_[pick].route;
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

}  // namespace lathe::deploy

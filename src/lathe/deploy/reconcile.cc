#include "lathe/deploy/reconcile.h"

namespace lathe::deploy {
Json ToJson(const State& s) {
  return {{"stable_version", s.stable_version}, {"desired", s.desired}};
}
Result<State> StateFromJson(const Json& j) {
  State s;
  s.stable_version = j.value("stable_version", "");
  s.desired = j.value("desired", -1);
  return s;
}
Decision Reconcile(const Goal& g, const std::vector<ReplicaObs>& rs, const State& st, int64_t) {
  Decision d;
  d.next = st;
  d.next.desired = g.min_replicas;
  int live = 0, ready = 0;
  for (const auto& r : rs) {
    if (r.phase == ReplicaObs::Phase::kEnded || r.phase == ReplicaObs::Phase::kDraining) continue;
    ++live;
    if (r.phase == ReplicaObs::Phase::kReady) ++ready;
  }
  if (live < g.min_replicas) d.start.push_back({g.version, g.min_replicas - live});
  if (ready > 0) d.traffic[g.version] = 100;
  d.next.stable_version = g.version;
  d.health = ready >= g.min_replicas ? "healthy" : "progressing";
  return d;
}
}  // namespace lathe::deploy

// Balancer: which replica of one deployment takes the next request, and the
// health bookkeeping behind that choice. Pure: no I/O, no clock (times are
// passed in), randomness injected; not thread-safe (the front guards each
// deployment's balancer with its lock).
//
// The choice (Choose), in steps:
//   1. candidates: replicas that are healthy and not draining;
//   2. a version by the deployment's traffic weights, drawn at random among
//      the versions that have a candidate (a version with none gets no share:
//      its share goes to the others); when no weighted version has one, every
//      candidate is eligible whatever its version, so that traffic still
//      flows while the daemon rewrites the weights;
//   3. among that version's candidates, the one with the fewest requests in
//      flight; ties go round robin (the first after the one picked last).
//
// Health: a replica starts unhealthy until its first good probe. It is
// healthy after a probe answered 200, unhealthy after any other answer, a
// failed probe, or a real request that failed before any byte of an answer
// came back (at once, without waiting for the next probe).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "lathe/gateway/front_routes.h"

namespace lathe::gateway {

struct ReplicaState {
  RouteReplica route;
  bool healthy = false;
  int64_t in_flight = 0;
  int64_t requests = 0;       // finished
  int64_t errors = 0;         // finished with a 5xx or no answer
  int64_t last_probe_ms = 0;  // wall time of the last probe's result; 0: none yet
  std::string last_error;     // why it is unhealthy; "" when healthy
};

class Balancer {
 public:
  // `random01` returns numbers uniform in [0, 1) (tests pass a fixed sequence).
  explicit Balancer(std::function<double()> random01) : random01_(std::move(random01)) {}

  // Takes the deployment's replicas and weights. A replica whose id, socket
  // and uid are unchanged keeps its health and counts (draining and version
  // follow the new route); any other starts unhealthy. Returns the ids of the
  // replicas that are new in this sense (to probe at once).
  std::vector<std::string> Update(const std::vector<RouteReplica>& replicas,
                                  const std::map<std::string, int64_t>& traffic);

  // The replica for the next request, never `exclude` (the one a retry
  // left); counted in flight until Finish. nullptr when there is no
  // candidate; valid until the next Update.
  const RouteReplica* Choose(std::string_view exclude = {});
  // A request chosen earlier is over; `error`: it got a 5xx or no answer.
  // Unknown ids (a replica gone from the routes meanwhile) are ignored.
  void Finish(std::string_view id, bool error);
  // A request failed before any byte of an answer came back: unhealthy now.
  void RequestFailed(std::string_view id, std::string why, int64_t now_ms);
  // A probe's result; true when this made the replica healthy.
  bool ProbeResult(std::string_view id, bool ok, std::string why, int64_t now_ms);

  // True when Choose would find a replica.
  bool AnyReady() const;
  int64_t healthy_count() const;
  const std::vector<ReplicaState>& replicas() const { return replicas_; }

 private:
  ReplicaState* Find(std::string_view id);
  bool Candidate(const ReplicaState& r, std::string_view exclude) const {
    return r.healthy && !r.route.draining && r.route.id != exclude;
  }

  std::function<double()> random01_;
  std::vector<ReplicaState> replicas_;  // in the routes' order
  std::map<std::string, int64_t> traffic_;
  size_t last_pick_ = SIZE_MAX;  // index of the replica picked last (ties: the next one)
};

}  // namespace lathe::gateway

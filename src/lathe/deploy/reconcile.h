// PLACEHOLDER (replaced by the reconciler): fixed replicas only.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "lathe/common/json.h"
#include "lathe/common/status.h"

namespace lathe::deploy {
struct ReplicaObs {
  std::string run;
  std::string version;
  enum class Phase { kPending, kStarting, kReady, kUnready, kDraining, kEnded } phase;
  int64_t phase_since_ms = 0;
  int64_t in_flight = 0;
  int64_t queued = 0;
  std::string end_reason;
  bool preempted = false;
};
struct Goal {
  std::string version;
  int min_replicas = 1, max_replicas = 1;
  int canary_percent = 0;
  bool promoted = false;
  double target_ongoing = 2;
  int64_t upscale_delay_ms = 30000, downscale_delay_ms = 600000;
  int64_t zero_grace_ms = 30000;
  int64_t ready_timeout_ms = 300000;
  int64_t drain_timeout_ms = 30000;
  int free_slots = 0;
  int64_t held_requests = 0;
};
struct State {
  std::string stable_version;
  std::string rolling_to;
  std::vector<std::string> failed_versions;
  int desired = -1;
};
Json ToJson(const State&);
Result<State> StateFromJson(const Json&);
struct Event {
  std::string level;
  std::string msg_id;
  std::vector<std::pair<std::string, std::string>> args;
};
struct Decision {
  std::vector<std::pair<std::string, int>> start;
  std::vector<std::string> drain;
  std::vector<std::string> stop;
  std::map<std::string, int> traffic;
  std::vector<Event> events;
  State next;
  std::string health;
  std::string reason;
};
Decision Reconcile(const Goal& goal, const std::vector<ReplicaObs>& replicas, const State& state,
                   int64_t now_ms);
}  // namespace lathe::deploy

// The deployment reconciler: one pure function from (what the deployment
// asks for, what its replicas are doing now, what the reconciler remembers,
// the clock) to the next step — runs to start, drain and stop, the traffic
// split over versions, events and health. It does no I/O: the daemon calls it
// on every tick for each deployment, carries out the Decision (start service
// runs, mark replicas draining in the front's routes, stop runs, set the
// traffic split, record the events) and stores Decision::next as JSON
// (ToJson) for the next call, across daemon restarts too.
//
// It is level-triggered (a Kubernetes controller, TF Serving's aspired
// versions): every call looks at the replicas as they are and takes the step
// that brings them closer to the goal, so a daemon that crashed mid-rollout
// resumes from what it sees. Calling it twice with the same inputs gives the
// same actions; acting on a Decision twice is harmless.
//
// What the daemon must hold to:
//   - every run a Decision starts appears in the next call's `replicas`
//     (kPending at least), with the version it was started for;
//   - a run that ended is reported as kEnded at least once (with its
//     end_reason and `preempted`) before it is left out;
//   - a run named in Decision::drain is reported as kDraining from then on,
//     with phase_since_ms when it was taken out of traffic.
//
// Rules (docs/deployments.md has them for users):
//   - replicas: live replicas (not ended, not draining) of the serving
//     version are kept at State::desired; an ended one is replaced; a version
//     whose replicas keep failing is restarted with an exponential backoff
//     (kBackoffFirstMs doubling to kBackoffMaxMs).
//   - rollout (the goal's version differs from the serving one): new
//     replicas start beside the old — as many as free_slots allows at once,
//     one at a time when there is none (one old replica is drained first) —
//     traffic shifts to the new version as its replicas become ready, old ones
//     are drained as ready new ones cover `desired`, and stopped once drained.
//   - rollback: a new replica that ends before it was ever ready, or is not
//     ready within ready_timeout_ms, rolls the rollout back: the new version's
//     replicas go, it joins failed_versions (not tried again until the goal's
//     version changes), the old version serves on.
//   - canary: the rollout holds at canary_percent of the traffic on the new
//     version (at least one new replica) until the goal is promoted.
//   - autoscaling (min < max): see autoscaler.h.
//   - never more live replicas than max_replicas + free_slots; never a start
//     of a failed version; never drained the last ready replica while no
//     other is ready, except when scaling to zero.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "lathe/common/json.h"
#include "lathe/common/status.h"

namespace lathe::deploy {

// Crash-loop backoff: the delay before the next start of a version after its
// n-th failure in a row is kBackoffFirstMs * 2^(n-1), at most kBackoffMaxMs.
// The count resets when one of its replicas has been ready kBackoffResetMs.
inline constexpr int64_t kBackoffFirstMs = 1000;
inline constexpr int64_t kBackoffMaxMs = 60000;
inline constexpr int64_t kBackoffResetMs = 600000;

// One replica (a run of kind service) as the daemon sees it now.
struct ReplicaObs {
  enum class Phase {
    kPending,   // queued or placed, its process not started yet
    kStarting,  // running; the front has not seen it healthy yet
    kReady,     // running and healthy in the front
    kUnready,   // running, was ready, now failing its health probe
    kDraining,  // taken out of traffic by an earlier decision, still running
    kEnded,     // the run ended (failed, stopped, lost, preempted)
  };
  std::string run;      // run id
  std::string version;  // what it serves: "digits/3", or a command deployment's "rev-2"
  Phase phase = Phase::kPending;
  int64_t phase_since_ms = 0;  // when it entered `phase` (the daemon's clock)
  int64_t in_flight = 0;       // requests in flight at the front
  // What the replica reports itself (replica_load.h), 0 when it reports
  // nothing: requests waiting in its queues, and those it is computing. A
  // request queued there is in flight at the front too: the replica's load
  // is max(in_flight, running + queued), never the sum.
  int64_t queued = 0;
  int64_t running = 0;
  std::string end_reason;  // kEnded: why ("exit 1", "preempted", "stopped")
  bool preempted = false;  // kEnded/kPending: a higher-priority run preempted it
  bool stopped = false;    // kEnded: a user stopped it (`lathe stop`): replaced, no failure
  std::string waiting;     // kPending: why the scheduler holds it (English), "" if unknown
};

// What the deployment's spec asks for, plus facts of now. Defaults are Ray
// Serve's (target_ongoing_requests 2, upscale delay 30 s, downscale delay
// 600 s) and Knative's (scale-to-zero grace 30 s).
struct Goal {
  std::string version;   // the version wanted (an alias already resolved)
  int min_replicas = 1;  // fixed replicas: min == max; autoscaling MIN..MAX (MIN may be 0)
  int max_replicas = 1;
  int canary_percent = 0;  // > 0: a rollout holds at this share on the new version until promoted
  bool promoted = false;   // the user ran `lathe deploy promote`
  double target_ongoing = 2;  // requests per replica (in flight + queued) the autoscaler aims at
  int64_t upscale_delay_ms = 30000;     // load above target this long → scale up
  int64_t downscale_delay_ms = 600000;  // load below target this long → scale down
  int64_t zero_grace_ms = 30000;        // min 0: no request at all this long → scale to zero
  int64_t ready_timeout_ms = 300000;    // a new version's replica not ready by then → rollback
  int64_t drain_timeout_ms = 30000;     // a draining replica stops at 0 in flight or after this
  int free_slots = 0;         // replicas that could be placed now beyond the live ones (free GPUs)
  int64_t held_requests = 0;  // requests the front holds because no replica is ready
};

// Why a version's replicas are being restarted slowly.
struct Backoff {
  int failures = 0;           // failures in a row
  int64_t next_start_ms = 0;  // no replica of the version starts before this
  std::string reason;         // the last failure's end_reason

  bool operator==(const Backoff&) const = default;
};

// The reconciler's memory between calls, stored by the daemon (ToJson).
// A fresh deployment starts from a default State.
struct State {
  std::string stable_version;  // what served before the current rollout (the rollback target)
  std::string rolling_to;      // the version being rolled out, "" when none
  std::vector<std::string> failed_versions;  // rolled back; not retried until the goal's version
                                             // changes
  int desired = -1;             // the autoscaler's count; -1: not yet set (see autoscaler.h)
  int64_t above_since_ms = -1;  // load above target since (-1: it is not)
  int64_t below_since_ms = -1;  // load below target since
  int64_t idle_since_ms = -1;   // no request at all since (min 0 only)

  std::string goal_version;                // the goal's version at the last call (to see it change)
  bool canary = false;                     // the current rollout holds at the canary share
  std::string failed_reason;               // why the newest of failed_versions failed
  std::map<std::string, Backoff> backoff;  // version → crash-loop backoff
  std::map<std::string, int64_t> drained;  // run → when this reconciler drained it
  std::vector<std::string> stopped;        // runs this reconciler stopped (their end is no failure)
  std::vector<std::string> noted_ended;    // ended runs already accounted for
  std::vector<std::string> ready_seen;     // runs seen ready at least once
  std::vector<std::string> preempted;      // preempted runs the deployment is short of

  bool operator==(const State&) const = default;
};

Json ToJson(const State& s);
// The inverse; a field left out takes its default (older records), a field
// of the wrong type is InvalidArgument naming it.
Result<State> StateFromJson(const Json& j);

// Something that happened, for the deployment's events: a catalog id
// (data/messages_deploy_plan.yaml) and its named arguments, e.g.
// Tr(e.msg_id, lang, e.args).
struct Event {
  std::string level;   // "info" | "warning" | "error"
  std::string msg_id;  // "deploy.scaled_up"
  MsgArgs args;        // {{"load", "9"}, {"replicas", "1"}, ...}
};

struct Decision {
  std::vector<std::pair<std::string, int>> start;  // (version, how many new replicas)
  std::vector<std::string> drain;                  // runs to take out of traffic now
  std::vector<std::string> stop;                   // runs to stop now (drained, or never ready)
  // version → percent of new requests: sums to 100 over the versions with
  // ready replicas in traffic; empty when none is ready (the front holds).
  std::map<std::string, int> traffic;
  std::vector<Event> events;
  State next;  // to store and pass to the next call
  // "healthy" | "progressing" | "degraded" | "scaled_to_zero" | "failed",
  // and why: a catalog id with its arguments, and its English text.
  std::string health;
  std::string reason_id;
  MsgArgs reason_args;
  std::string reason;
};

Decision Reconcile(const Goal& goal, const std::vector<ReplicaObs>& replicas, const State& state,
                   int64_t now_ms);

// A start of `version` the daemon refused before any replica ran (a
// workdir, resources or a submission refused): a failure of the version like
// a crash, so that the next start waits the same backoff (1 s doubling to
// 60 s) instead of being tried again at every tick. Returns that delay.
int64_t NoteRefusedStart(State& state, const std::string& version, const std::string& reason,
                         int64_t now_ms);

}  // namespace lathe::deploy

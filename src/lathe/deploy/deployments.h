// Deployments: a model version served by replicas behind one endpoint
// (docs/deployments.md). A deployment is aspired state — what to serve, how
// many replicas, the autoscaler's bounds — that this manager reconciles, on
// a thread of its own, into runs of kind service (each a `lathe serve` of
// the version, placed by the daemon's scheduler like any run, held by its
// monitor) and into the routes of the front (`lathe __gateway`,
// gateway_control.h), which serves the endpoint and keeps serving while the
// daemon is down.
//
// Every tick: the replicas (RunStore::OfDeployment) and what the front says
// of them (healthy, in flight) become deploy::ReplicaObs; deploy::Reconcile
// decides (replace, roll out, roll back, scale, drain); the decision is
// carried out here (submit replicas as the owner, stop drained ones, record
// events), and the routes are written when they changed.
//
// Who may do what: a deployment is its owner's (and root's, and the daemon
// user's); to another user it is unknown (deploy.not_found, 404, as for a
// name nobody holds), and lists leave it out, unless it is shared with them
// (daemon/sharing.h). Names are unique per owner: a deployment is stored as
// OWNER/NAME (common/owned_name.h).
//
// Replicas listen on unix sockets in directories of their own
// (<home>/deployments/sockets/<replica>/, the owner's, group the front's,
// 02750), so no other local user can reach a replica without the front and
// its keys; the front checks each listener's owner (SO_PEERCRED).
//
// Built on the run supervisor's face (daemon::Runs) and the model registry;
// neither calls it back.
//
// Thread-safe: API threads call the public methods; mu_ guards the store
// and the in-memory bookkeeping (GUARDED_BY, checked by clang:
// scripts/check_thread_safety.sh); the supervisor's and the registry's
// methods are called without mu_.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "lathe/common/json.h"
#include "lathe/common/mutex.h"
#include "lathe/common/status.h"
#include "lathe/common/thread_annotations.h"
#include "lathe/daemon/runs.h"
#include "lathe/daemon/sharing.h"
#include "lathe/deploy/deployment_spec.h"
#include "lathe/deploy/gateway_control.h"
#include "lathe/deploy/reconcile.h"
#include "lathe/deploy/registry.h"
#include "lathe/os/clock.h"
#include "lathe/os/users.h"
#include "lathe/state/credential_store.h"
#include "lathe/state/deployment_store.h"
#include "lathe/state/run_store.h"

namespace lathe::deploy {

// Catalog message `msg_id` with `args` (a JSON object) as {"en", "zh"}.
Json BothTexts(const std::string& msg_id, const Json& args);

// "OWNER/NAME": how any user names deployment `d` (common/owned_name.h).
std::string RefOf(const state::DeploymentRecord& d);

// What a deployment serves, for people: its model reference, or its command
// line (shortened).
std::string WhatItServes(const DeploymentSpec& spec);

struct DeploymentOptions {
  // Where the front listens: HOST:PORT (port 0: any free one, chosen when
  // it first starts; it keeps it across daemon restarts).
  std::string listen = "127.0.0.1:7733";
  // A root daemon runs the front as this user (created as a system user
  // when missing).
  std::string gateway_user = "lathe-gateway";
  std::string tls_cert, tls_key;  // the front's TLS when both are set
  int tick_ms = 250;
  int64_t drain_timeout_ms = 30'000;
  // Deployments one user may have (root and the daemon's user: no limit);
  // config.yaml `deployments.max_per_user`.
  int max_per_user = 20;
  // Makes the front, with the config the manager would start
  // `lathe __gateway` with; null: a GatewayControl. Tests give a fake.
  std::function<std::unique_ptr<FrontControl>()> make_front;
};

// Who may use a deployment's keys (Deployments::KeyAccessFor).
struct KeyAccess {
  std::string name;  // the deployment's key (its keys' scope)
  uid_t owner = 0;
  daemon::Role role = daemon::Role::kNone;
};

class Deployments {
 public:
  // `runs` and `registry` must outlive it.
  Deployments(daemon::Runs& runs, Registry& registry, DeploymentOptions options, os::Clock& clock);
  ~Deployments();  // Stop()

  Status Start() EXCLUDES(mu_);  // Open(), then the loop
  void Stop() EXCLUDES(mu_);
  // Opens the stores and reclaims leftover socket directories, without the
  // loop; Start() does it. For tests that drive ticks by StepForTest().
  Status Open() EXCLUDES(mu_);
  // One tick of the loop, as its thread does.
  void StepForTest() EXCLUDES(mu_) { Tick(); }

  // POST /api/v1/deployments: validates (the model ref resolves for the
  // caller, the replicas could fit this machine), records it and starts
  // reconciling. The deployment's JSON.
  Result<Json> Create(const daemon::Caller& caller, const Json& spec_json) EXCLUDES(mu_);
  Result<Json> List(const daemon::Caller& caller) EXCLUDES(mu_);  // {deployments: [...]}
  Result<Json> Get(const daemon::Caller& caller, const std::string& name) EXCLUDES(mu_);
  // PATCH: any of model (command, port, ready, env, workdir for a command
  // deployment: a change of the program is a new revision, rolled out;
  // {"revision": "rev-N"} brings revision N's program back as a new one),
  // replicas, autoscale, canary, public, ready_timeout; {"promote": true}
  // ends a canary. The new JSON.
  Result<Json> Update(const daemon::Caller& caller, const std::string& name, const Json& patch)
      EXCLUDES(mu_);
  // Drains and removes it (its replicas stop, its keys go). {name, removing}.
  Result<Json> Delete(const daemon::Caller& caller, const std::string& name) EXCLUDES(mu_);
  Result<Json> Events(const daemon::Caller& caller, const std::string& name, int64_t after_id)
      EXCLUDES(mu_);
  // The front's Prometheus text (every deployment's), "" when it is not running.
  std::string Metrics() EXCLUDES(mu_);
  // Deployment `name` as sharing sees it, when `caller` may see it.
  Result<daemon::SharedObject> ObjectOf(const daemon::Caller& caller, const std::string& name)
      EXCLUDES(mu_);
  // The check for the key routes: the caller needs role use (sharing.h);
  // the deployment's owner and the caller's role.
  Result<KeyAccess> KeyAccessFor(const daemon::Caller& caller, const std::string& name)
      EXCLUDES(mu_);
  // Keys were issued or revoked: the routes are written again.
  void Kick() EXCLUDES(mu_);
  // Kick, then wait (at most `timeout_ms`) until a pass of the loop that
  // began after it has written the routes and the front has read them: a
  // key printed after this works at its first request, a revoked one is
  // refused at the next. DeadlineExceeded when the loop took longer.
  Status SyncFront(int64_t timeout_ms) EXCLUDES(mu_);
  // The endpoint's base URL: http://127.0.0.1:7733/d/NAME/
  std::string UrlOf(const std::string& name);

 private:
  // deployment_loop.cc
  void Loop() EXCLUDES(mu_);
  void Tick() EXCLUDES(mu_);
  // One deployment's tick; its route for the front (null: none). Three
  // steps: Observe, then Reconcile (reconcile.h) and Apply, then Persist.
  Json ReconcileOne(state::DeploymentRecord& d, const std::map<std::string, Json>& front,
                    const Json& front_deployment, const daemon::GpuSlots& gpus) EXCLUDES(mu_);
  // What one tick sees of a deployment.
  struct Observed {
    std::vector<state::RunRecord> runs;      // its replicas (ended ones: recent)
    std::vector<ReplicaObs> obs;             // as the reconciler sees them
    std::string want;                        // the version wanted (the alias followed now)
    std::map<std::string, Json> signatures;  // version -> a ready replica's metadata
  };
  Result<Observed> Observe(const state::DeploymentRecord& d, const DeploymentSpec& spec,
                           const std::map<std::string, Json>& front, int64_t now) EXCLUDES(mu_);
  // Carries `dec` out: replicas started (a refused start noted in
  // dec.next), drained and stopped, its events recorded.
  void Apply(const state::DeploymentRecord& d, const DeploymentSpec& spec, Decision& dec,
             int64_t now) EXCLUDES(mu_);
  // Stores what changed (plan, health, reason, the version served); the
  // version served.
  std::string Persist(state::DeploymentRecord& d, const Decision& dec, const std::string& want,
                      int64_t now) EXCLUDES(mu_);
  Json RouteOf(const state::DeploymentRecord& d, const DeploymentSpec& spec,
               const std::vector<const state::RunRecord*>& live, const Json& traffic, int desired)
      EXCLUDES(mu_);
  Json Remove(state::DeploymentRecord& d, const std::vector<const state::RunRecord*>& live,
              const std::map<std::string, Json>& front) EXCLUDES(mu_);
  Status StartReplica(const state::DeploymentRecord& d, const DeploymentSpec& spec,
                      const std::string& version);
  Status SubmitReplica(const state::DeploymentRecord& d, const DeploymentSpec& spec,
                       const std::string& version, const std::string& dir,
                       const std::string& socket, run::RunSpec run);
  // A command deployment's replica of revision `version` ("rev-N"): the
  // program behind `lathe __relay` (gateway/relay.h), on the run's own network
  // when the daemon can isolate one.
  Status StartCommandReplica(const state::DeploymentRecord& d, const DeploymentSpec& spec,
                             const std::string& version);
  // A new replica's socket directory (see above); its path.
  Result<std::string> MakeSocketDir(const state::DeploymentRecord& d, const std::string& base);
  void KeepRevision(state::DeploymentRecord& d, const DeploymentSpec& spec);
  // The version's model repository (a `lathe serve --repository`), restored
  // as the owner into their ~/.lathe/deployments/models/<model>-<N>-<snapshot>/
  // once
  // and shared by the replicas.
  Result<std::string> EnsureCache(const state::DeploymentRecord& d, const std::string& version);
  void PruneCache(const state::DeploymentRecord& d) EXCLUDES(mu_);
  Result<std::string> CacheBase(const os::UserInfo& u, bool make);
  // Records, through the registry, the signature of each version (key) from
  // a ready replica's metadata (value), once per version.
  void RecordSignatures(const std::map<std::string, Json>& signatures) EXCLUDES(mu_);
  Result<std::string> BatchingRepo(const state::DeploymentRecord& d, const DeploymentSpec& spec,
                                   const std::string& version, const std::string& cache);
  std::string SocketRoot() const;
  void RemoveSocketDir(const state::RunRecord& r);
  // At start, before the loop: the socket directories of no live replica
  // (a kill during a removal left them).
  void ReclaimSocketDirs();
  Result<Json> ToJson(const state::DeploymentRecord& d, bool full) REQUIRES(mu_);
  Json FrontStatusOf(const std::string& name) const REQUIRES(mu_);
  Json ReplicasJson(const state::DeploymentRecord& d, const Json& front, bool full, int& ready)
      REQUIRES(mu_);
  std::string CurlOf(const state::DeploymentRecord& d) REQUIRES(mu_);
  // `caller`'s role on `d` (daemon/sharing.h): kOwner for the owner and admins.
  daemon::Role RoleOn(const daemon::Caller& caller, const state::DeploymentRecord& d);
  // The deployment, when `caller`'s role on it is at least `needed`:
  // deploy.not_found when they have none, deploy.forbidden below `needed`.
  // `name`: NAME or OWNER/NAME (Find); `reach`: the caller's roles, read
  // once per request.
  Result<state::DeploymentRecord> Reached(const daemon::Caller& caller, const std::string& name,
                                          daemon::Role needed, const Result<daemon::Reach>& reach)
      REQUIRES(mu_);
  Result<state::DeploymentRecord> Reached(const daemon::Caller& caller, const std::string& name,
                                          daemon::Role needed) REQUIRES(mu_) {
    return Reached(caller, name, needed, runs_.sharing().ReachOf(caller));
  }
  // The deployment NAME or OWNER/NAME names for `caller` (common/owned_name.h):
  // with an owner, that owner's; bare, the caller's own, else the only one
  // of that name the caller may see (FailedPrecondition deploy.ambiguous
  // naming the choices when several are). nullopt: none.
  Result<std::optional<state::DeploymentRecord>> Find(const daemon::Caller& caller,
                                                      const std::string& name,
                                                      const Result<daemon::Reach>& reach)
      REQUIRES(mu_);
  // What a user it is shared with sees: "shared" {role, by} from `reach`
  // (the caller's, read once per request), environment values hidden.
  Json ForRole(Json j, const state::DeploymentRecord& d, const daemon::Caller& caller,
               const Result<daemon::Reach>& reach);
  // Update's {"revision": "rev-N"}: that revision's program onto `spec`
  // (deploy.no_revision once the plan no longer keeps it; deploy.command_only
  // for a model deployment).
  Status RestoreRevision(const state::DeploymentRecord& d, const std::string& rev,
                         DeploymentSpec& spec) REQUIRES(mu_);
  // A user (not an admin) at DeploymentOptions::max_per_user: deploy.too_many.
  Status CheckUserLimit(const daemon::Caller& caller) REQUIRES(mu_);
  Status CheckFitsMachine(const DeploymentSpec& spec);
  // A command deployment's image, resolved among its owner's images (its id pinned).
  Status PinImage(const daemon::Caller& owner, DeploymentSpec& spec);
  // The version spec.model names (`version`: NAME/N), its backend here, and
  // spec.model as the deployment keeps it (Registry::ResolveVersion's
  // `qualified`). Asks the registry, which takes its own lock: never under mu_.
  Status CheckModel(const daemon::Caller& caller, DeploymentSpec& spec, std::string* version)
      EXCLUDES(mu_);
  Status AddEvent(const std::string& name, const std::string& level, const std::string& msg_id,
                  const Json& args) REQUIRES(mu_);
  GatewayConfig GatewayConfigFor();

  daemon::Runs& runs_;
  Registry& registry_;
  const DeploymentOptions opts_;
  os::Clock& clock_;
  Mutex mu_;
  CondVar cv_;  // waited on with mu_
  bool stopping_ GUARDED_BY(mu_) = false;
  bool kicked_ GUARDED_BY(mu_) = false;
  int64_t kicks_ GUARDED_BY(mu_) = 0;         // Kick()s so far
  int64_t kicks_served_ GUARDED_BY(mu_) = 0;  // those a finished pass began after
  std::unique_ptr<state::DeploymentStore> store_ GUARDED_BY(mu_);
  std::unique_ptr<state::CredentialStore> keys_ GUARDED_BY(mu_);  // its deployment keys
  // Made by the loop at the first deployment (assigned under mu_; the loop
  // uses it, API threads only its port() and Metrics()). Not GUARDED_BY: the
  // loop, its only writer, reads it without mu_.
  std::unique_ptr<FrontControl> gateway_;
  Json last_status_ GUARDED_BY(mu_) = Json::object();  // the front's /status
  Status front_error_ GUARDED_BY(mu_);  // why the front is not running (OK when it is)
  // Replicas taken out of traffic (run id -> since, monotonic ms).
  std::map<std::string, int64_t> draining_ GUARDED_BY(mu_);
  // Replicas the front has seen healthy at least once.
  std::set<std::string> seen_ready_ GUARDED_BY(mu_);
  // run id -> (phase, since)
  std::map<std::string, std::pair<int, int64_t>> phase_since_ GUARDED_BY(mu_);
  // Ended replicas already shown to Reconcile.
  std::set<std::string> ended_seen_ GUARDED_BY(mu_);
  // Model versions whose signature a ready replica's metadata was offered
  // for (recorded, or known already).
  std::set<std::string> signature_seen_ GUARDED_BY(mu_);
  int64_t started_ms_ GUARDED_BY(mu_) = 0;
  std::thread loop_;
};

}  // namespace lathe::deploy

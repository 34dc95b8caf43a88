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
// name nobody holds), and lists leave it out. Names are unique across users.
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
// and the in-memory bookkeeping; the supervisor's and the registry's methods
// are called without mu_.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "lathe/common/json.h"
#include "lathe/common/status.h"
#include "lathe/daemon/runs.h"
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

class Deployments {
 public:
  // `runs` and `registry` must outlive it.
  Deployments(daemon::Runs& runs, Registry& registry, DeploymentOptions options, os::Clock& clock);
  ~Deployments();  // Stop()

  Status Start();  // Open(), then the loop
  void Stop();
  // Opens the stores and reclaims leftover socket directories, without the
  // loop; Start() does it. For tests that drive ticks by StepForTest().
  Status Open();
  // One tick of the loop, as its thread does.
  void StepForTest() { Tick(); }

  // POST /api/v1/deployments: validates (the model ref resolves for the
  // caller, the replicas could fit this machine), records it and starts
  // reconciling. The deployment's JSON.
  Result<Json> Create(const daemon::Caller& caller, const Json& spec_json);
  Result<Json> List(const daemon::Caller& caller);  // {deployments: [...]}
  Result<Json> Get(const daemon::Caller& caller, const std::string& name);
  // PATCH: any of model (command, port, ready, env, workdir for a command
  // deployment: a change of the program is a new revision, rolled out),
  // replicas, autoscale, canary, public, ready_timeout; {"promote": true}
  // ends a canary. The new JSON.
  Result<Json> Update(const daemon::Caller& caller, const std::string& name, const Json& patch);
  // Drains and removes it (its replicas stop, its keys go). {name, removing}.
  Result<Json> Delete(const daemon::Caller& caller, const std::string& name);
  Result<Json> Events(const daemon::Caller& caller, const std::string& name, int64_t after_id);
  // The front's Prometheus text (every deployment's), "" when it is not running.
  std::string Metrics();
  // The owner check for the key routes: the deployment's owner uid.
  Result<uid_t> OwnerFor(const daemon::Caller& caller, const std::string& name);
  // Keys were issued or revoked: the routes are written again.
  void Kick();
  // The endpoint's base URL: http://127.0.0.1:7733/d/NAME/
  std::string UrlOf(const std::string& name);

 private:
  // deployment_loop.cc
  void Loop();
  void Tick();
  // One deployment's tick; its route for the front (null: none). Three
  // steps: Observe, then Reconcile (reconcile.h) and Apply, then Persist.
  Json ReconcileOne(state::DeploymentRecord& d, const std::map<std::string, Json>& front,
                    const Json& front_deployment, const daemon::GpuSlots& gpus);
  // What one tick sees of a deployment.
  struct Observed {
    std::vector<state::RunRecord> runs;      // its replicas (ended ones: recent)
    std::vector<ReplicaObs> obs;             // as the reconciler sees them
    std::string want;                        // the version wanted (the alias followed now)
    std::map<std::string, Json> signatures;  // version -> a ready replica's metadata
  };
  Result<Observed> Observe(const state::DeploymentRecord& d, const DeploymentSpec& spec,
                           const std::map<std::string, Json>& front, int64_t now);
  // Carries `dec` out: replicas started (a refused start noted in
  // dec.next), drained and stopped, its events recorded.
  void Apply(const state::DeploymentRecord& d, const DeploymentSpec& spec, Decision& dec,
             int64_t now);
  // Stores what changed (plan, health, reason, the version served); the
  // version served.
  std::string Persist(state::DeploymentRecord& d, const Decision& dec, int64_t now);
  Json RouteOf(const state::DeploymentRecord& d, const DeploymentSpec& spec,
               const std::vector<const state::RunRecord*>& live, const Json& traffic, int desired);
  Json Remove(state::DeploymentRecord& d, const std::vector<const state::RunRecord*>& live,
              const std::map<std::string, Json>& front);
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
  void PruneCache(const state::DeploymentRecord& d);
  Result<std::string> CacheBase(const os::UserInfo& u, bool make);
  // Records, through the registry, the signature of each version (key) from
  // a ready replica's metadata (value), once per version.
  void RecordSignatures(const std::map<std::string, Json>& signatures);
  Result<std::string> BatchingRepo(const state::DeploymentRecord& d, const DeploymentSpec& spec,
                                   const std::string& version, const std::string& cache);
  std::string SocketRoot() const;
  void RemoveSocketDir(const state::RunRecord& r);
  // At start, before the loop: the socket directories of no live replica
  // (a kill during a removal left them).
  void ReclaimSocketDirs();
  Result<Json> ToJson(const state::DeploymentRecord& d, bool full);  // mu_ held
  Result<state::DeploymentRecord> Owned(const daemon::Caller& caller, const std::string& name);
  // A user (not an admin) at DeploymentOptions::max_per_user: deploy.too_many. mu_ held.
  Status CheckUserLimit(const daemon::Caller& caller);
  Status CheckFitsMachine(const DeploymentSpec& spec);
  Status CheckModel(const daemon::Caller& caller, const DeploymentSpec& spec, std::string* version);
  Status AddEvent(const std::string& name, const std::string& level, const std::string& msg_id,
                  const Json& args);
  GatewayConfig GatewayConfigFor();

  daemon::Runs& runs_;
  Registry& registry_;
  const DeploymentOptions opts_;
  os::Clock& clock_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  bool kicked_ = false;
  std::unique_ptr<state::DeploymentStore> store_;  // mu_
  std::unique_ptr<state::CredentialStore> keys_;   // its deployment keys; mu_
  // Made by the loop at the first deployment (assigned under mu_; the loop
  // uses it, API threads only its port() and Metrics()).
  std::unique_ptr<FrontControl> gateway_;
  Json last_status_ = Json::object();  // the front's /status, mu_
  Status front_error_;                 // why the front is not running (OK when it is), mu_
  // Replicas taken out of traffic (run id -> since, monotonic ms); mu_.
  std::map<std::string, int64_t> draining_;
  // Replicas the front has seen healthy at least once; mu_.
  std::set<std::string> seen_ready_;
  std::map<std::string, std::pair<int, int64_t>> phase_since_;  // run id -> (phase, since)
  std::set<std::string> ended_seen_;  // ended replicas already shown to Reconcile; mu_
  // Model versions whose signature a ready replica's metadata was offered
  // for (recorded, or known already); mu_.
  std::set<std::string> signature_seen_;
  int64_t started_ms_ = 0;
  std::thread loop_;
};

}  // namespace lathe::deploy

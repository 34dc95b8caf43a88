// The run supervisor's face for the services built on runs: the model
// registry and the deployment manager (deploy/) use the supervisor only
// through this interface, with typed values in and out, and the supervisor
// never calls them back. Daemon implements it; the deployment manager's
// tests implement it with a fake (deploy/test_util/fake_runs.h).
//
// Thread-safe: every method may be called from any thread, with no lock of
// the caller's held that the supervisor could wait on.
#pragma once

#include <sys/types.h>

#include <string>
#include <string_view>
#include <vector>

#include "lathe/common/json.h"
#include "lathe/common/status.h"
#include "lathe/daemon/home.h"
#include "lathe/os/users.h"
#include "lathe/run/spec.h"
#include "lathe/snap/store.h"
#include "lathe/state/run_store.h"

namespace lathe::daemon {

// Who is calling, as established by the API's authentication.
struct Caller {
  uid_t uid = 0;
  std::string user;
  bool admin = false;  // root or the daemon's own user
};

// What a caller wants to do with a run, for Access's rule and its message.
enum class AccessAction { kRead, kStop, kDelete, kResumeFrom, kOpen };
// "read", "stop", "delete", "resume from", "open"
std::string_view AccessActionName(AccessAction a);

// How a run is submitted, beside its spec.
struct SubmitOptions {
  // With a key (validated by the API), a request that repeats an earlier one
  // of the caller's uid (same key, same canonical spec) gets that request's
  // run, replayed (Daemon::Submit says the rest).
  std::string idempotency_key;
  // A deployment's replica (type service), which only the deployment manager
  // submits; a caller's service spec is refused.
  bool replica = false;
};

// What Submit did: queued a new run, or found the one that an earlier request
// with the same idempotency key created.
struct Submission {
  state::RunRecord run;
  bool replayed = false;  // true: `run` is the earlier request's
};

// This node's GPUs, and how many no active run holds.
struct GpuSlots {
  int total = 0;
  int free = 0;
};

// What a restore wrote (Runs::RestoreSnapshotTo).
struct Restored {
  int64_t files = 0;
  int64_t bytes = 0;
};

class Sharing;

class Runs {
 public:
  virtual ~Runs() = default;

  // --- the node, constant after start ---
  virtual const HomePaths& paths() const = 0;
  virtual uid_t uid() const = 0;                          // the daemon's own
  virtual const std::string& self_exe() const = 0;        // for `lathe serve`, `lathe __relay`
  virtual std::string UserCacheDir(uid_t uid) const = 0;  // Daemon::UserCacheDir
  // Whether runs may have a network of their own (spec network: isolated).
  virtual bool CanIsolateNetwork() const = 0;
  // Whether a run with `spec`'s resources could ever be placed on this node
  // (Daemon::CheckFitsNode).
  virtual Status CheckFitsNode(const run::RunSpec& spec) const = 0;
  virtual GpuSlots FreeGpuSlots() = 0;
  // `spec_json` (a run's or a deployment's) with its `profile:` resolved
  // against config.yaml `profiles:` (run::ResolveProfile): the fields the
  // profile filled go to `filled`; profile.unknown for a name not configured.
  virtual Result<Json> ResolveProfile(const Json& spec_json,
                                      std::vector<std::string>& filled) const = 0;
  // spec.image -> spec.image_id among `caller`'s images, as for a run
  // (image.not_found, image.not_granted, spec.images_unavailable); a
  // registry reference not here yet leaves image_id empty (a run pulls it
  // while queued).
  virtual Status ResolveImage(const Caller& caller, run::RunSpec& spec) = 0;

  // Who besides an owner reaches what (sharing.h).
  virtual Sharing& sharing() = 0;

  // --- runs ---
  // Validates what the JSON edge cannot (quotas, paths, names) and queues.
  virtual Result<Submission> Submit(const Caller& caller, run::RunSpec spec,
                                    const SubmitOptions& options) = 0;
  virtual Result<state::RunRecord> StopRun(const Caller& caller, const std::string& ref) = 0;
  // Resolves `ref` and checks that `caller` may `action` it.
  virtual Result<state::RunRecord> Access(const Caller& caller, const std::string& ref,
                                          AccessAction action) = 0;
  // The replicas of deployment `name`: those not ended, and those that
  // ended at or after `ended_since_ms` (RunStore::OfDeployment).
  virtual Result<std::vector<state::RunRecord>> ReplicasOf(const std::string& name,
                                                           int64_t ended_since_ms) = 0;
  // The sockets of every replica that has not ended, whatever its deployment.
  virtual Result<std::vector<std::string>> LiveReplicaSockets() = 0;
  // Why a queued run waits, from the last scheduling pass, in English as the
  // catalog has it (run::ReasonText renders it); "" when unknown.
  virtual std::string WaitingWhy(const std::string& run_id) = 0;

  // --- snapshots and paths, for the registry ---
  // The daemon's snapshot store, opened on first use.
  virtual Result<snap::Store*> SnapshotStore() = 0;
  // Waits for the captures of ended run `run_id` still running in the
  // background: after it, the run gets no more snapshots.
  virtual void SettleCheckpoints(const std::string& run_id) = 0;
  // `path` (absolute, what request field `field` named) may be read by
  // `caller` as a source; the identity to read it with.
  virtual Result<os::AccessAs> CheckReadSource(const Caller& caller, const std::string& field,
                                               const std::string& path) = 0;
  // Restores snapshot `id` into `to` with the caller's identity, `to` lying
  // in a directory the caller owns (Daemon::RestoreSnapshot's rules).
  virtual Result<Restored> RestoreSnapshotTo(const Caller& caller, const snap::SnapshotId& id,
                                             const std::string& to, bool force) = 0;
  // `to` is absolute, not the daemon's, and (for a caller who is not an
  // admin) lies in a directory the caller owns: where a restore may write.
  virtual Status CheckRestorePlace(const Caller& caller, const std::string& to) = 0;
};

}  // namespace lathe::daemon

// The daemon core: owns the state store, the GPU inventory, the scheduler
// loop and the runs' monitors. The REST API (api/) calls into it; it knows
// nothing of HTTP.
//
// The daemon keeps the run state machine — queueing, placement (sched/),
// retries, requeue after preemption, `lost`, deadlines, checkpoints — and
// has attempts executed by an ExecutionBackend (exec/backend.h; the local
// one unless a test injects another), whose durable handle it stores with
// the run.
//
// Threads: one supervisor thread runs the loop (poll the backend, finish,
// schedule, start, enforce deadlines) every poll interval or when Kick()ed.
// API threads call the public methods. All state is guarded by mu_ (the
// GUARDED_BY and REQUIRES below, checked by clang:
// scripts/check_thread_safety.sh); the backend is called under it, except
// Launch (see StartAttempt).
//
// Crash safety: a run's process is held by its backend (the local one: a
// monitor process, exec/monitor.h), not by the daemon. On start the daemon
// asks the backend to re-adopt each active attempt, records exits that
// happened while it was down, and marks the rest lost.
#pragma once

#include <sys/types.h>

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
#include "lathe/daemon/disk_shares.h"
#include "lathe/daemon/home.h"
#include "lathe/daemon/image_puller.h"
#include "lathe/daemon/images.h"
#include "lathe/daemon/in_flight_keys.h"
#include "lathe/daemon/metrics_text.h"
#include "lathe/daemon/notebook_watch.h"
#include "lathe/daemon/quotas.h"
#include "lathe/daemon/retention.h"
#include "lathe/daemon/run_checkpoints.h"
#include "lathe/daemon/runs.h"
#include "lathe/daemon/scheduling_latency.h"
#include "lathe/daemon/secrets.h"
#include "lathe/daemon/sharing.h"
#include "lathe/daemon/user_paths.h"
#include "lathe/exec/backend.h"
#include "lathe/gpu/source.h"
#include "lathe/os/cgroup.h"
#include "lathe/os/clock.h"
#include "lathe/os/env.h"
#include "lathe/os/file_lock.h"
#include "lathe/os/users.h"
#include "lathe/run/ports.h"
#include "lathe/run/profile.h"
#include "lathe/snap/store.h"
#include "lathe/state/run_store.h"
#include "lathe/telemetry/sampler.h"
#include "lathe/telemetry/store.h"

namespace lathe::daemon {

// The longest a queue goes without a scheduling pass while nothing asks for
// one (Daemon::PassWorthRunning): quota windows and fair share move with time.
inline constexpr int64_t kFullPassEveryMs = 1000;

// GPU telemetry per run (config.yaml `telemetry:`, docs/telemetry.md).
struct TelemetryOptions {
  bool enabled = true;                // false: no sampler, no telemetry.db
  telemetry::SamplerOptions sampler;  // interval (default 5 s), warnings' thresholds
  uint64_t max_bytes = telemetry::kDefaultMaxStoreBytes;
  // Where attribution reads /proc; null: os::RealProcessTable(). Not owned.
  os::ProcessTable* processes = nullptr;
};

struct DaemonOptions {
  std::string home;           // empty: DaemonHome("") decides
  std::string gpus = "auto";  // "auto" | "none" | "sim:4x24GB"
  int kill_grace_ms = 10000;  // stopping: SIGTERM, then SIGKILL after this
  int poll_ms = 100;          // supervisor loop period
  // A run that failed and is retried waits retry_backoff_ms before its next
  // attempt, twice as long after each failure, at most retry_backoff_max_ms
  // (config.yaml `retry_backoff`, `retry_backoff_max`).
  int64_t retry_backoff_ms = 1000;
  int64_t retry_backoff_max_ms = 300'000;
  // One run's log at most (config.yaml `run_log_max`): past it the monitor
  // keeps the head and a rolling tail (exec::LaunchRequest::log_max_bytes).
  uint64_t run_log_max_bytes = 10ULL << 30;
  // The image store at most (config.yaml `images: {max_size}`; 0 = no cap):
  // past it the least recently used images no queued or active run holds
  // are removed (daemon/images.h Images::SetCap).
  uint64_t images_max_bytes = 0;
  std::string self_exe;  // the lathe binary, for `lathe __monitor`
  // How runs' files (exit.json, monitor.json) are read and monitors looked
  // for; null: os::RealEnv(). Not owned; tests inject faults through it.
  os::Env* env = nullptr;
  // What executes attempts; null: a LocalBackend made by the daemon. Not
  // owned; must outlive the daemon (tests keep one across two daemons, as
  // processes outlive a daemon that is restarted).
  exec::ExecutionBackend* backend = nullptr;
  // The cluster pools (config.yaml `pools:`), by name, each with its own
  // backend (a run's spec.pool names one; "" or "local" is this node). Not
  // owned; they outlive the daemon (node/ makes them). A run records its
  // pool's name as its backend, so a restarted daemon finds it again.
  std::map<std::string, exec::ExecutionBackend*> pools;
  // Where a spec without `pool:` runs ("" or "local": this node).
  std::string default_pool;
  // The resource profiles (config.yaml `profiles:`) a spec may name, by name.
  std::map<std::string, run::Profile> profiles;
  // Which finished runs the daemon removes by itself (config.yaml
  // `retention:`); the default keeps them all.
  RetentionPolicy retention;
  // Per-user limits and fair share (config.yaml `quotas:`, `fair_share:`);
  // the default has no limits and fair share with a 7-day half-life.
  QuotaConfig quotas;
  // Notebooks' readiness and idle stop (config.yaml `notebooks:`).
  NotebookWatchOptions notebooks;
  TelemetryOptions telemetry;
};

// A run of type notebook (counts against the notebooks quota).
bool IsNotebook(const state::RunRecord& r);
// What the scheduler knows of a queued run (sched::Schedule, sched::MightChange).
sched::QueuedJob QueuedJobOf(const state::RunRecord& r);

// One pool as `lathe pools` and GET /pools show it (Daemon::Pools).
struct PoolView {
  std::string name;  // "local" (this machine) or a pool of config.yaml
  std::string type;  // its backend's name: "local", "slurm"
  bool is_default = false;
  exec::Capabilities caps;
  exec::PoolDescription description;  // its partitions, or why they are unknown
  // The caller's own runs there, in submission order. `running` includes
  // runs being stopped.
  std::vector<std::string> queued, starting, running;
};

struct DaemonConfig;  // config.h

// The settings of `c` that `lathe reload` may change while the daemon runs
// (quotas and fair share, retention, retry backoff, the run log and image
// store caps), put into `o` where `c` gives them (reload.cc); the daemon's
// start applies them the same way.
void ApplyReloadableConfig(const DaemonConfig& c, DaemonOptions& o);

class Daemon final : public Runs {
 public:
  static Result<std::unique_ptr<Daemon>> Create(DaemonOptions options, os::Clock& clock);
  ~Daemon() override;

  Status Start();             // starts the supervisor thread
  void Stop() EXCLUDES(mu_);  // stops it; runs keep running (re-adopted at next start)

  // --- Runs (runs.h) ---
  const HomePaths& paths() const override { return paths_; }
  uid_t uid() const override { return uid_; }
  const std::string& self_exe() const override { return opts_.self_exe; }
  // The deployments' model cache of a user without a usable home directory:
  // <home>/deployments/users/<uid>, owned by that user, 0700
  // (deploy/deployment_loop.cc). Restores into it and a replica's workdir in
  // it are the user's own, though it lies in the daemon's home.
  std::string UserCacheDir(uid_t uid) const override;
  bool CanIsolateNetwork() const override;
  // Whether a run with `spec`'s resources could ever be placed on this node,
  // whatever else runs: InvalidArgument naming the field (spec.too_much,
  // spec.too_many_gpus, spec.no_gpus) otherwise. Constant after start.
  Status CheckFitsNode(const run::RunSpec& spec) const override;
  // spec.image -> spec.image_id, among the caller's images (images.h).
  Status ResolveImage(const Caller& caller, run::RunSpec& spec) override EXCLUDES(mu_);
  GpuSlots FreeGpuSlots() override EXCLUDES(mu_);
  Result<Json> ResolveProfile(const Json& spec_json,
                              std::vector<std::string>& filled) const override;
  // Validates and queues a run. With an idempotency key, the same key with
  // another spec is InvalidArgument (run.idempotency_key_reused); while a
  // request with the key is still being handled, FailedPrecondition
  // (run.idempotency_in_flight). Keys live state::kIdempotencyKeyTtlMs.
  Result<Submission> Submit(const Caller& caller, run::RunSpec spec,
                            const SubmitOptions& options) override EXCLUDES(mu_);
  Result<state::RunRecord> StopRun(const Caller& caller, const std::string& ref) override
      EXCLUDES(mu_);
  // The owner and admins may do anything; nobody else anything (see
  // docs/security.md).
  Result<state::RunRecord> Access(const Caller& caller, const std::string& ref,
                                  AccessAction action) override EXCLUDES(mu_);
  Result<std::vector<state::RunRecord>> ReplicasOf(const std::string& name,
                                                   int64_t ended_since_ms) override EXCLUDES(mu_);
  Result<std::vector<std::string>> LiveReplicaSockets() override EXCLUDES(mu_);
  Result<snap::Store*> SnapshotStore() override { return checkpoints_->store(); }
  void SettleCheckpoints(const std::string& run_id) override { checkpoints_->Settle(run_id); }
  Result<os::AccessAs> CheckReadSource(const Caller& caller, const std::string& field,
                                       const std::string& path) override;
  Result<Restored> RestoreSnapshotTo(const Caller& caller, const snap::SnapshotId& id,
                                     const std::string& to, bool force) override;
  Status CheckRestorePlace(const Caller& caller, const std::string& to) override;

  // The --gpus spec the daemon started with ("auto", "sim:4x24GB", …).
  const std::string& gpu_spec() const { return opts_.gpus; }
  Secrets& secrets() { return *secrets_; }
  Sharing& sharing() override { return *sharing_; }
  // What project `project`'s runs hold now and used in the last 30 days
  // (GPU-hours, in all and per member) and in its gpu_hours limit's period,
  // for GET /projects/{name} and GET /status (docs/api.md). Reads the cached
  // ledger (GpuAttempts) and the active runs: no scan of finished runs.
  Json ProjectUsage(const std::string& project) EXCLUDES(mu_);
  // Project `project`'s limits from config.yaml (quotas.projects):
  // {gpus, runs, notebooks, gpu_hours, period_ms}, null where unlimited.
  Json ProjectLimits(const std::string& project) EXCLUDES(mu_);
  // `caller`'s role on run `r` (sharing.h): kOwner for their own and for
  // admins; what a share or `r`'s project gives them otherwise.
  Role RoleOn(const Caller& caller, const state::RunRecord& r);
  Images& images() { return *images_; }
  // The image ids queued and active runs hold: never pruned under them.
  std::set<std::string> PinnedImageIds() EXCLUDES(mu_);
  // Queued and active runs by the image id they run in (`image ls`):
  // `uid`'s, or everyone's.
  std::map<std::string, std::vector<std::string>> ImageRuns(std::optional<uid_t> uid) EXCLUDES(mu_);
  RunCheckpoints& checkpoints() { return *checkpoints_; }

  // The JSON edge of Submit: `spec_json` is the spec object (spec.h), parsed
  // and checked field by field; never a replica.
  Result<Submission> Submit(const Caller& caller, const Json& spec_json,
                            const std::string& idempotency_key = "");
  // Newest first, at most `limit`; `total` gets the count without the limit.
  // Without `all`, also the runs that ended in the last `recent_ms` (the
  // `recent_limit` newest of them when > 0);
  // `total_all` (may be null) gets the count of every run; `filter` narrows,
  // orders and pages the list (`total` counts what it matches).
  Result<std::vector<state::RunRecord>> List(bool all, int limit, int64_t* total,
                                             int64_t recent_ms = 0, int64_t* total_all = nullptr,
                                             int recent_limit = 0,
                                             const state::RunFilter& filter = {}) EXCLUDES(mu_);
  // The id of the newest event of any run (0: none yet).
  Result<int64_t> LatestEventId() EXCLUDES(mu_);
  // How many runs the daemon keeps, in every state.
  Result<int64_t> CountRuns() EXCLUDES(mu_);
  // Queues an ended notebook again (notebooks_daemon.cc): same id, workspace
  // and notebook directory; the next attempt. FailedPrecondition
  // (notebook.not_notebook, notebook.not_finished) otherwise.
  Result<state::RunRecord> RestartRun(const Caller& caller, const std::string& ref) EXCLUDES(mu_);
  // The token the proxy adds for a notebook's Jupyter ("" for other runs).
  std::string NotebookTokenOf(const state::RunRecord& r) EXCLUDES(mu_);
  // What the watch knows of a running notebook, as JSON (null when nothing).
  Json NotebookJson(const state::RunRecord& r);
  NotebookWatch& notebooks() { return *notebooks_; }
  Result<std::vector<state::EventRecord>> Events(const std::string& run_id, int64_t after_id)
      EXCLUDES(mu_);
  bool IsFinished(const std::string& run_id) EXCLUDES(mu_);
  // Why a queued run waits, from the last scheduling pass ("" if unknown).
  std::string WaitingWhy(const std::string& run_id) override EXCLUDES(mu_);
  // What it waits on (sched::WaitReasonName: "quota", "resources", ...; "").
  std::string WaitingOn(const std::string& run_id) EXCLUDES(mu_);
  // Quotas and usage (quota_usage.cc): the caller's own, every user's for an
  // admin. {fair_share: {half_life_ms}, limited, users: [{user, limits,
  // sources, usage, queued, waiting_on_quota}]} (docs/api.md).
  Json QuotaJson(const Caller& caller) EXCLUDES(mu_);
  // The home's filesystem and what runs' directories take of it
  // (disk_shares.h): {home, size_bytes, available_bytes, counted_at_ms,
  // users: [{user, uid, bytes}]} — the caller's own, every user's for an admin.
  Json DiskJson(const Caller& caller);

  // Snapshots of runs in the daemon's store (snapshots.cc), filtered to what
  // `caller` may see; `run_ref` "" = every visible run.
  Result<Json> ListSnapshots(const Caller& caller, const std::string& run_ref);
  Result<Json> GetSnapshot(const Caller& caller, const std::string& ref);  // {id, manifest}
  // Restores into `to` (absolute), which must lie in a directory the caller
  // owns. `progress` (may be empty) is called from the restoring thread.
  Result<Json> RestoreSnapshot(const Caller& caller, const std::string& ref, const std::string& to,
                               bool force, snap::ProgressFn progress = {});
  // Removes a snapshot (`ref` as for GetSnapshot) the caller may see; its
  // chunks are freed by `lathe snap gc`. {id}. FailedPrecondition
  // (snap.pinned, naming the model versions) while a model version uses it.
  Result<Json> DeleteSnapshot(const Caller& caller, const std::string& ref);
  // Removes a finished run (run_removal.cc): its record, events and run
  // directory, and with `snapshots` its snapshots too, taken after its last
  // capture has ended. Owner or admin, as for StopRun; FailedPrecondition
  // (run.not_finished) while it is queued or active. {id, snapshots_deleted}.
  Result<Json> DeleteRun(const Caller& caller, const std::string& ref, bool snapshots)
      EXCLUDES(mu_);
  // Removes the finished runs that `req` selects (retention.h), each as
  // DeleteRun does; never a queued or active one. A caller who is not an
  // admin may only ask for their own runs (req.uid = caller.uid), else
  // PermissionDenied (run.prune_others). {removed: [{id, name, user, state,
  // ended_at_ms, snapshots_deleted}], kept: N (the finished runs of those
  // users that stay), snapshots_deleted, dry_run}.
  Result<Json> PruneRuns(const Caller& caller, const PruneRequest& req) EXCLUDES(mu_);
  // Applies options.retention now, at most kRetentionBatch runs, and logs
  // what it removed; the supervisor loop calls it every kRetentionEveryMs.
  Result<Json> ApplyRetention() EXCLUDES(mu_);

  // Every pool, this machine's first, each described by its backend
  // (exec::ExecutionBackend::Describe: a cluster's sinfo, which may take up
  // to its command timeout), with the caller's own runs there — only their
  // own, admin or not. The backends are asked without mu_, so a slow
  // cluster holds up no other call.
  std::vector<PoolView> Pools(const Caller& caller) EXCLUDES(mu_);
  Json StatusJson() EXCLUDES(mu_);
  // Reads <home>/config.yaml again (`lathe reload`, SIGHUP) and puts its
  // quotas and fair share, retention, retry backoff, run log cap and image
  // store cap in force; {"applied": [...], "at_next_start": [...]} (what
  // only a restart changes). A file that does not parse or check is refused
  // with its error, naming the key, and nothing changes.
  Result<Json> ReloadConfig() EXCLUDES(mu_);
  Json GpusJson() EXCLUDES(mu_);
  // GET /profiles (profiles_daemon.cc): {"profiles": [{name, fields: {the
  // spec fields it sets}, pool (where it runs: "local" or a pool's name),
  // fits: "yes" | "no" | "never" | "unknown", why}]}. Nothing in it is
  // private: every caller sees the same.
  Json ProfilesJson() EXCLUDES(mu_);
  // What GET /metrics shows (metrics_daemon.cc): a fresh sample of the GPU
  // source (the start-up one when it fails), the runs holding GPUs, the queue
  // per priority, every run per state and the scheduling latency.
  MetricsSnapshot CollectMetrics() EXCLUDES(mu_);
  // A run's telemetry from `since_ms` on (telemetry_daemon.cc; the JSON of
  // telemetry/metrics_json.h), for those who may read the run. A run not
  // sampled yet has empty series. FailedPrecondition (telemetry.disabled)
  // when telemetry is off.
  Result<Json> RunMetrics(const Caller& caller, const std::string& ref, int64_t since_ms);
  // The machine's GPUs over the last samples (telemetry::Sampler::History).
  Result<Json> GpuHistory(int64_t since_ms);
  // The run's log file, wherever its backend keeps it.
  std::string LogPath(const state::RunRecord& r) const;
  // How the log is to be read: as the daemon for a log in the daemon's own
  // run directory (empty), as the run's user for one in a directory the user
  // controls (a pool's shared directory, where a symlink of theirs must not
  // make the daemon read what they could not).
  os::AccessAs LogAccess(const state::RunRecord& r) const;
  // Where an active run can be reached, as its backend reports it:
  // [{"kind": "tcp", "address": "127.0.0.1:8888"}, ...]; [] when it ended.
  Json EndpointsJson(const state::RunRecord& r) EXCLUDES(mu_);
  // The same, typed.
  std::vector<exec::Endpoint> Endpoints(const state::RunRecord& r) EXCLUDES(mu_);
  // Each of the run's ports, in its spec's order: where it is served and
  // which layer keeps it from answering (run/ports.h), read from what the
  // run's processes listen on (run_ports.cc). A run that is not active has
  // every port kNotRunning and no address.
  struct PortStatus {
    run::PortSpec spec;
    std::string kind;     // "tcp" | "unix"
    std::string address;  // "127.0.0.1:41234", a path; "" when not known
    run::PortCheck check;
  };
  std::vector<PortStatus> CheckPorts(const state::RunRecord& r) EXCLUDES(mu_);
  // The explanation of the port named `port_name` ("" = the main one) of
  // run `run_id`, as the proxy's error page gives it when the port did not
  // answer: the layer that failed (run/ports.h ExplainPort), or `fallback`
  // when no layer is at fault (it answered meanwhile).
  Status ExplainPort(const std::string& run_id, const std::string& port_name,
                     const Status& fallback) EXCLUDES(mu_);

  // One pass of the supervisor loop, starts included, as its thread does;
  // for tests that drive a daemon without Start(). `force_pass`: a
  // scheduling pass whether or not one is worth running (PassWorthRunning).
  void StepForTest(bool force_pass = true) EXCLUDES(mu_);
  // How many scheduling passes have run (each reads every queued run).
  uint64_t SchedulingPasses() EXCLUDES(mu_);

  // Blocks until something changes (an event is recorded) or `timeout_ms`.
  void WaitForChange(int timeout_ms) EXCLUDES(mu_);
  void Kick() EXCLUDES(mu_);  // wakes the supervisor loop

 private:
  Daemon(DaemonOptions o, os::Clock& clock)
      : opts_(std::move(o)), clock_(clock), live_(LiveSettings::Of(opts_)) {}
  // Not analysed: it opens store_ without mu_, as no other thread can see the
  // Daemon before Create returns it (mu_ is taken for Recover and what follows).
  Status Init() NO_THREAD_SAFETY_ANALYSIS;
  // A run committed as `starting` whose monitor is yet to be spawned.
  struct PendingStart {
    state::RunRecord run;
    exec::LaunchRequest request;
    Json prepared;  // the backend's preliminary handle
  };

  void Loop() EXCLUDES(mu_);
  std::vector<PendingStart> Tick() REQUIRES(mu_);  // one pass
  void Recover() REQUIRES(mu_);                    // at start
  void ReclaimLeftovers() REQUIRES(mu_);           // at start (leftovers.cc)
  void RecoverRun(state::RunRecord& r) REQUIRES(mu_);
  void Readopt(state::RunRecord& r) REQUIRES(mu_);
  Status CheckPaths(const run::RunSpec& spec, const Caller& caller) const;
  Status ResolvePool(run::RunSpec& spec) const;  // spec.pool: a configured pool or ""
  // This node as sched/ sees it: its GPUs (with their names), cpus, memory.
  sched::NodeState NodeOf() const;
  // CheckFitsNode's refusal said as the profile's (profile.unsatisfiable).
  Status AsProfileRefusal(const run::RunSpec& spec, const Status& why) const;
  Json PoolsJson() const;
  // Exits, lost, deadlines.
  void CheckActive(state::RunRecord& r, const exec::AttemptStatus& s) REQUIRES(mu_);
  // cluster_end: AttemptStatus::cluster_end (a pool's cluster ended it).
  void Finish(state::RunRecord& r, const exec::ExitRecord& e, std::string_view cluster_end = {})
      REQUIRES(mu_);
  void MarkLost(state::RunRecord& r, const std::string& why) REQUIRES(mu_);
  void AttachDiagnosis(const state::RunRecord& r) REQUIRES(mu_);
  std::vector<PendingStart> Schedule() REQUIRES(mu_);
  std::vector<PendingStart> HandOver(std::vector<const state::RunRecord*>& queued) REQUIRES(mu_);
  void PollBackends(std::vector<state::RunRecord>& active) REQUIRES(mu_);
  std::optional<PendingStart> PrepareStart(state::RunRecord r, const std::vector<int>& gpus)
      REQUIRES(mu_);
  std::vector<Result<exec::Launched>> LaunchAll(std::vector<PendingStart>& starts) EXCLUDES(mu_);
  Result<exec::Launched> StartAttempt(PendingStart& p) EXCLUDES(mu_);
  // Checkpoint capture ends with the attempt (see run_checkpoints.h).
  void EndCheckpoints(const state::RunRecord& r, bool capture_if_unwatched) REQUIRES(mu_);
  int64_t TimeLeftMs(const state::RunRecord& r) const;
  // A pool run's node recorded `recorded` finished checkpoints so far.
  void CapturePoolCheckpoints(const state::RunRecord& r, int64_t recorded) REQUIRES(mu_);
  void DrainCheckpointEvents() REQUIRES(mu_);
  DirOwner OwnerOf(const state::RunRecord& r) const;
  Status ResolveResumeFrom(const Caller& caller, run::RunSpec& spec) REQUIRES(mu_);
  void CompleteStart(PendingStart& p, const Result<exec::Launched>& launched) REQUIRES(mu_);
  std::nullopt_t FailStart(state::RunRecord& r, const std::string& why) REQUIRES(mu_);
  Status BeginStop(state::RunRecord& r, run::StopIntent intent, const std::string& why)
      REQUIRES(mu_);
  Status CheckSubmittable(const run::RunSpec& spec, const Caller& caller) REQUIRES(mu_);
  // quota_usage.cc. A request no usage could ever let start
  // (more GPUs than the limit; a limit of 0) is InvalidArgument (quota.too_big).
  Status CheckQuotaFits(const run::RunSpec& spec, const Caller& caller) REQUIRES(mu_);
  // The quotas, usage and fair-share figures of the users of `queued` and
  // `active` for sched::Schedule.
  sched::Accounts AccountsFor(const std::vector<const state::RunRecord*>& queued,
                              const std::vector<state::RunRecord>& active) REQUIRES(mu_);
  // The same for the projects of `queued` that have limits (quotas.projects):
  // what their active runs hold and their GPU-hours in each one's period.
  sched::Accounts ProjectAccountsFor(const std::vector<const state::RunRecord*>& queued,
                                     const std::vector<state::RunRecord>& active) REQUIRES(mu_);
  // `user`'s limits; the groups are looked up (and kept a minute).
  ResolvedQuota QuotaOf(uid_t uid, const std::string& user) REQUIRES(mu_);
  // The gpu_attempts rows the quotas, fair share and project usage need
  // (at least the last 30 days), re-read after an attempt started or ended
  // and at least every minute. Each row carries its project (a removed
  // run's too).
  const std::vector<state::GpuAttempt>& GpuAttempts() REQUIRES(mu_);
  int64_t UsageLookbackMs() const REQUIRES(mu_);
  // Records why each queued run waits, with an event the first time a run
  // waits on a given quota limit.
  void NoteWaiting(const sched::Decision& d) REQUIRES(mu_);
  // Retries' backoff (daemon.cc): the wait before retry `retries_used`, its
  // start, and the queued runs still waiting theirs out.
  int64_t RetryBackoffMs(int retries_used) const REQUIRES(mu_);
  void HoldForRetry(const state::RunRecord& r) REQUIRES(mu_);
  // Opens telemetry.db and makes the sampler (telemetry_daemon.cc), when enabled.
  Status InitTelemetry();
  // The sampler's hooks (telemetry_daemon.cc); each takes mu_.
  telemetry::Sampler::Hooks TelemetryHooks();
  // The notebook watch's hooks (notebooks_daemon.cc); each takes mu_.
  NotebookWatch::Hooks NotebookHooks();
  Result<std::string> CachedNotebookToken(const state::RunRecord& r) REQUIRES(mu_);
  // Forgets idempotency keys past their TTL, at most every kKeyPurgeEveryMs
  // unless `now`.
  void PurgeExpiredKeys(bool now = false) REQUIRES(mu_);
  // Commits a state change and its event. A failure is logged here; callers
  // that go on regardless discard it with (void): the next pass re-reads the
  // stored state.
  Status Transition(state::RunRecord& r, run::RunState to, const std::string& msg) REQUIRES(mu_);
  // When `r`'s attempt about to start was queued; nullopt when not known (a
  // requeue seen by an earlier daemon).
  std::optional<int64_t> QueuedAtMs(const state::RunRecord& r) const REQUIRES(mu_);
  std::string AttemptDir(const state::RunRecord& r) const;
  // backend_->Release, then the attempt's secret files go (secret_files.h).
  void ReleaseAttempt(const state::RunRecord& r) REQUIRES(mu_);
  exec::RunUser UserOf(uid_t uid) const;
  exec::AttemptRef RefOf(const state::RunRecord& r) const;
  exec::LaunchRequest RequestFor(const state::RunRecord& r) const REQUIRES(mu_);
  void Notify() REQUIRES(mu_);
  // Removes finished run `id` (`ref` names it in errors); with `snapshots`
  // its snapshots too, looked up in `snaps` (the store's list) or, when
  // null, in a fresh list. The number of snapshots removed (run_removal.cc).
  Result<size_t> RemoveFinished(const std::string& id, const std::string& ref, bool snapshots,
                                const std::vector<snap::SnapshotInfo>* snaps) EXCLUDES(mu_);
  // snapshots.cc: the restore, written with the caller's identity, after
  // CheckRestorePlace.
  Result<Json> RestoreInto(const Caller& caller, const snap::SnapshotId& id, const std::string& to,
                           bool force, snap::ProgressFn progress);
  // The loop's retention pass when one is due; releases mu_ while it
  // removes, and holds it again on return (retention.cc).
  void MaybeApplyRetention() REQUIRES(mu_);

  // Constant after Init (the settings `lathe reload` replaces are live_'s).
  const DaemonOptions opts_;
  os::Clock& clock_;
  // The settings of config.yaml that `lathe reload` (SIGHUP) replaces while
  // the daemon runs; opts_ keeps those it started with.
  struct LiveSettings {
    QuotaConfig quotas;
    RetentionPolicy retention;
    int64_t retry_backoff_ms = 0;
    int64_t retry_backoff_max_ms = 0;
    uint64_t run_log_max_bytes = 0;
    static LiveSettings Of(const DaemonOptions& o) {
      return {o.quotas, o.retention, o.retry_backoff_ms, o.retry_backoff_max_ms,
              o.run_log_max_bytes};
    }
  };
  LiveSettings live_ GUARDED_BY(mu_);
  HomePaths paths_;
  os::Env* env_ = nullptr;
  std::unique_ptr<ReservedPaths> reserved_;  // the home's directories, resolved
  uid_t uid_ = 0;
  std::string user_;
  std::unique_ptr<os::FileLock> lock_;  // the home's single-instance lock, held for life
  std::unique_ptr<gpu::GpuSource> gpu_source_;
  gpu::Inventory inventory_;   // sampled at start; GPU count and names
  os::CgroupSupport cgroups_;  // detected for the local backend only
  std::unique_ptr<exec::ExecutionBackend> own_backend_;
  exec::ExecutionBackend* backend_ = nullptr;  // own_backend_ or the injected one
  // The backend that executes `r`'s attempts: this node's, or its pool's;
  // null when its pool is not configured (any more).
  exec::ExecutionBackend* BackendOf(const state::RunRecord& r) const;
  // Where a run of `spec` would go: spec.pool's backend, or this node's.
  exec::ExecutionBackend* BackendFor(const run::RunSpec& spec) const;
  // What a run of `spec` records as its backend: its pool, or this node's backend's name.
  std::string BackendKeyFor(const run::RunSpec& spec) const;
  std::unique_ptr<RunCheckpoints> checkpoints_;  // thread-safe itself
  std::unique_ptr<Secrets> secrets_;             // thread-safe itself
  std::unique_ptr<Sharing> sharing_;             // thread-safe itself
  std::unique_ptr<Images> images_;               // thread-safe itself
  std::unique_ptr<ImagePuller> puller_;          // thread-safe itself; ended at Stop()
  InFlightKeys in_flight_keys_;                  // thread-safe itself
  std::unique_ptr<NotebookWatch> notebooks_;     // thread-safe itself; calls in under no lock
  std::unique_ptr<DiskShares> disk_;             // thread-safe itself; its thread takes mu_
  SchedulingLatency scheduling_latency_;         // thread-safe itself
  int64_t started_at_ms_ = 0;                    // Init's wall time
  std::unique_ptr<telemetry::TelemetryStore> telemetry_;  // thread-safe itself; null when off
  std::unique_ptr<telemetry::Sampler> sampler_;           // its own thread; calls in under no lock
  // run id -> Jupyter token.
  std::map<std::string, std::string> notebook_tokens_ GUARDED_BY(mu_);
  double node_cpus_ = 1;
  uint64_t node_memory_ = 0;

  Mutex mu_;
  CondVar loop_cv_;    // waited on with mu_
  CondVar change_cv_;  // waited on with mu_
  bool stopping_ GUARDED_BY(mu_) = false;
  bool kicked_ GUARDED_BY(mu_) = false;
  uint64_t change_seq_ GUARDED_BY(mu_) = 0;
  // Scheduling passes (Schedule): a pass reads every queued run, so one runs
  // only when it may start something — a state changed, a kick (a stop, a
  // deployment), a retry's backoff, kFullPassEveryMs since the last, or a
  // submission that sched::MightChange says could start, claim or preempt
  // in the room the last pass left. A submission that cannot waits for the
  // next pass with a provisional "resources" note. All guarded by mu_.
  bool pass_needed_ GUARDED_BY(mu_) = true;
  int64_t last_pass_ms_ GUARDED_BY(mu_) = 0;  // monotonic
  // What the last pass left; none: unknown.
  std::optional<sched::Headroom> headroom_ GUARDED_BY(mu_);
  std::vector<sched::QueuedJob> submitted_ GUARDED_BY(mu_);  // queued since the last pass
  bool submitted_kick_ GUARDED_BY(mu_) = false;              // wakes the loop for submitted_
  uint64_t passes_ GUARDED_BY(mu_) = 0;
  bool PassWorthRunning() REQUIRES(mu_);
  std::unique_ptr<state::RunStore> store_ GUARDED_BY(mu_);
  // run id -> SIGKILL time (monotonic).
  std::map<std::string, int64_t> stop_deadline_ms_ GUARDED_BY(mu_);
  struct WaitNote {
    std::string why;   // English, as the catalog has it (run::ReasonText renders it)
    std::string on;    // sched::WaitReasonName
    std::string user;  // "quota": whose quota
  };
  std::map<std::string, WaitNote> waiting_why_ GUARDED_BY(mu_);  // run id -> why it waits
  // What a pool's backend says of a run it holds but has not started
  // (AttemptStatus::note: "PENDING (Resources)"); run id -> note.
  std::map<std::string, std::string> pool_notes_ GUARDED_BY(mu_);
  // How many of a pool run's node-recorded checkpoints were captured, for
  // its current attempt; run id -> count.
  struct PoolCheckpoints {
    int attempt = 0;
    int64_t captured = 0;
  };
  std::map<std::string, PoolCheckpoints> pool_checkpoints_ GUARDED_BY(mu_);
  // run id -> when a retried run may start again (monotonic ms): its backoff.
  // Kept in memory: after a daemon restart a retry starts without waiting.
  std::map<std::string, int64_t> retry_at_ms_ GUARDED_BY(mu_);
  std::vector<std::pair<std::string, WaitNote>> HoldBackRetries(
      std::vector<const state::RunRecord*>& queued) REQUIRES(mu_);
  // Queued runs whose image is still being pulled (image_puller.h) wait out
  // of the scheduler's sight: their pull is started if it is not running,
  // and a pull that ended gives them their image id (or fails them, with
  // the pull's reason). image_pulls.cc.
  std::vector<std::pair<std::string, WaitNote>> HoldBackPulls(
      std::vector<const state::RunRecord*>& queued) REQUIRES(mu_);
  void ApplyEndedPulls() REQUIRES(mu_);
  // run id -> when its current attempt was queued (wall ms), for the
  // scheduling latency; set on submission and requeue, dropped when it
  // leaves the queue. A run queued before this daemon started is absent.
  std::map<std::string, int64_t> queued_at_ms_ GUARDED_BY(mu_);
  // run id -> quota kind told in an event.
  std::map<std::string, std::string> quota_noted_ GUARDED_BY(mu_);
  struct GroupsSeen {
    std::vector<std::string> names;
    int64_t at_ms = 0;  // monotonic
  };
  std::map<uid_t, GroupsSeen> groups_ GUARDED_BY(mu_);           // uid -> its groups, for quotas
  std::vector<state::GpuAttempt> gpu_attempts_ GUARDED_BY(mu_);  // GpuAttempts()
  bool gpu_attempts_stale_ GUARDED_BY(mu_) = true;
  int64_t gpu_attempts_at_ms_ GUARDED_BY(mu_) = 0;  // monotonic
  int64_t keys_purged_at_ms_ GUARDED_BY(mu_) = 0;   // monotonic
  // Last pass, monotonic; supervisor only.
  std::optional<int64_t> retention_at_ms_ GUARDED_BY(mu_);

  std::thread loop_;
};

}  // namespace lathe::daemon

#include "lathe/daemon/daemon.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "lathe/common/i18n.h"
#include "lathe/common/ids.h"
#include "lathe/common/log.h"
#include "lathe/common/units.h"
#include "lathe/daemon/disk_shares.h"
#include "lathe/daemon/notebooks.h"
#include "lathe/daemon/secret_files.h"
#include "lathe/daemon/workspaces.h"
#include "lathe/doctor/explainer.h"
#include "lathe/exec/local_backend.h"
#include "lathe/exec/torchrun.h"
#include "lathe/os/file_lock.h"
#include "lathe/os/files.h"
#include "lathe/os/identity.h"
#include "lathe/os/machine.h"
#include "lathe/os/process.h"
#include "lathe/os/users.h"
#include "lathe/run/event_text.h"
#include "lathe/run/log_reader.h"
#include "lathe/run/secret_mask.h"
#include "lathe/sched/scheduler.h"

namespace lathe::daemon {

using run::RunState;
using state::RunRecord;

namespace {

// The state an ended attempt leaves its run in, from why it stopped and how
// it exited; `what` (the exit, described) may be reworded, `*requeue` set for
// a preemption the spec requeues.
RunState EndStateOf(const RunRecord& r, const exec::ExitRecord& e, std::string_view cluster_end,
                    std::string& what, bool* requeue, bool* chained) {
  // Exited 0 without being asked to stop: the program finished, whatever
  // the cluster says of the job afterwards (a preemption decided as it ended).
  const bool finished = e.exit_code && *e.exit_code == 0 && e.stop_signal == 0;
  // Cancelled in the cluster (an admin's or the user's own scancel), not by
  // Lathe: stopped, whether or not the program had started.
  if (r.stop_intent == run::StopIntent::kNone && cluster_end == "CANCELLED" && !finished) {
    what = fmt::format("cancelled in its pool, not by Lathe ({}: {})", cluster_end, what);
    return RunState::kStopped;
  }
  if (!e.start_error.empty()) return RunState::kFailed;
  if (r.stop_intent == run::StopIntent::kNone && !cluster_end.empty() && !finished) {
    // Ended by its pool's cluster, not by the program: preempted or a node
    // lost is a preemption here (requeued when the spec allows, not a
    // retry); the job's time limit is the run's max_duration.
    if (cluster_end == exec::kPartitionTimeLimit) {
      // Not the run's own deadline: it goes on in its pool's next job.
      what = fmt::format(
          "reached its partition's time limit ({}); continues in a new job from its last "
          "checkpoint",
          what);
      *requeue = *chained = true;
      return RunState::kPreempted;
    }
    if (cluster_end == "TIMEOUT") {
      what = fmt::format("stopped after exceeding max_duration ({}; Slurm: TIMEOUT)", what);
      return RunState::kFailed;
    }
    what = fmt::format("{} by its pool ({}: {})",
                       cluster_end == "NODE_FAIL" ? "its node failed; ended" : "preempted",
                       cluster_end, what);
    *requeue = r.spec.requeue;
    return RunState::kPreempted;
  }
  switch (r.stop_intent) {
    case run::StopIntent::kPreempt:
      *requeue = r.spec.requeue;
      return RunState::kPreempted;
    case run::StopIntent::kUser:
    case run::StopIntent::kIdle:
      return RunState::kStopped;
    case run::StopIntent::kTimeout:
      what = "stopped after exceeding max_duration (" + what + ")";
      return RunState::kFailed;
    default:
      return e.exit_code && *e.exit_code == 0 ? RunState::kSucceeded : RunState::kFailed;
  }
}

// The events of an attempt whose log lost output (the monitor could not write
// it) or was trimmed (past run_log_max its middle was given back).
void NoteLogEvents(state::RunStore& store, int64_t now_ms, const RunRecord& r,
                   const exec::ExitRecord& e, uint64_t run_log_max_bytes) {
  if (e.log_lost_bytes > 0) {
    Status lost =
        Status::Msg(Code::kIoError, "run.log_lost",
                    {{"bytes", std::to_string(e.log_lost_bytes)}, {"reason", e.log_lost_reason}});
    // Best effort: an event only tells; what it tells of is stored already.
    (void)store.AddEvent(r.id, "warning", lost.message(),
                         Json{{"lost_bytes", e.log_lost_bytes},
                              {"reason", e.log_lost_reason},
                              {"msg_id", lost.msg_id()}},
                         now_ms);
  }
  if (e.log_trimmed_bytes > 0) {
    auto ev = run::MakeEventMessage(
        "run.log_truncated",
        {{"bytes", FormatBytes(e.log_trimmed_bytes)}, {"max", FormatBytes(run_log_max_bytes)}},
        Json{{"trimmed_bytes", e.log_trimmed_bytes}});
    // Best effort: an event only tells; what it tells of is stored already.
    (void)store.AddEvent(r.id, "warning", ev.message, ev.data, now_ms);
  }
}

// What the scheduler knows of the active runs.
std::vector<sched::RunningJob> RunningJobsOf(const std::vector<RunRecord>& active) {
  std::vector<sched::RunningJob> running;
  running.reserve(active.size());
  for (const auto& r : active) {
    sched::RunningJob j;
    j.id = r.id;
    j.priority = static_cast<int>(r.spec.priority);
    j.started_ms = r.started_at_ms;
    j.gpu_indices = r.gpus;
    j.req = {r.spec.gpus, r.spec.cpus, r.spec.memory_bytes};
    if (r.spec.max_duration_ms > 0) j.deadline_ms = r.started_at_ms + r.spec.max_duration_ms;
    j.preemptible = r.spec.preemptible;
    j.stopping = r.state == RunState::kStopping;
    running.push_back(std::move(j));
  }
  return running;
}

// Errors the loop meets on every pass (a full disk: every 100 ms) are
// logged once a minute with a count.
RepeatFilter& LoopErrors() {
  static RepeatFilter filter;
  return filter;
}

// The last part of a run's log, as the program printed it.
std::string LogTail(const std::string& log_path) {
  constexpr size_t kTailBytes = 256 * 1024;
  return run::RenderLogEnd(log_path, kTailBytes).value_or("");
}

std::string DescribeExit(const exec::ExitRecord& e, const run::RunSpec& spec) {
  if (!e.start_error.empty()) return e.start_error;
  if (e.oom_killed) {
    return fmt::format("out of memory: killed by the kernel at its {} memory limit",
                       FormatBytes(spec.memory_bytes));
  }
  if (e.signal) return "killed by " + os::SignalName(*e.signal);
  if (e.exit_code) return fmt::format("exited with code {}", *e.exit_code);
  return "ended";
}
}  // namespace

Result<std::unique_ptr<Daemon>> Daemon::Create(DaemonOptions options, os::Clock& clock) {
  std::unique_ptr<Daemon> d(new Daemon(std::move(options), clock));
  RETURN_IF_ERROR(d->Init());
  return d;
}

Daemon::~Daemon() { Stop(); }

Status Daemon::Init() {
  started_at_ms_ = clock_.NowMs();
  paths_ = DaemonHome(opts_.home);
  uid_ = os::EffectiveUid();
  auto me = os::LookupUser(uid_);
  user_ = me.ok() ? me->name : std::to_string(uid_);
  env_ = opts_.env ? opts_.env : &os::RealEnv();
  // Explicit modes for everything in the home, old homes repaired: the store
  // holds every user's checkpoints and the database every run's spec and
  // environment; users reach them only through the API's access rules.
  RETURN_IF_ERROR(SecureHome(paths_));
  reserved_ = std::make_unique<ReservedPaths>(paths_);

  auto held = os::FileLock::TryAcquire(paths_.lock, os::FileLock::Mode::kExclusive, 0600);
  // A daemon killed a moment ago can leave a child between fork and exec (a
  // monitor being spawned) that holds the lock's descriptor for a few
  // milliseconds more: try for a second before saying another daemon runs.
  for (int i = 0; i < 20 && !held.ok() && held.status().code() == Code::kAlreadyExists; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    held = os::FileLock::TryAcquire(paths_.lock, os::FileLock::Mode::kExclusive, 0600);
  }
  if (!held.ok() && held.status().code() == Code::kAlreadyExists) {
    return Status::Msg(Code::kAlreadyExists, "daemon.already_running", {{"home", paths_.home}});
  }
  if (!held.ok()) return held.status();
  lock_ = std::make_unique<os::FileLock>(std::move(held).value());
  ASSIGN_OR_RETURN(store_, state::RunStore::Open(paths_.db));
  checkpoints_ = std::make_unique<RunCheckpoints>(paths_.store, clock_);
  secrets_ = std::make_unique<Secrets>(paths_, clock_);
  sharing_ = std::make_unique<Sharing>(paths_.db, clock_);
  images_ = std::make_unique<Images>(paths_, clock_);
  puller_ = std::make_unique<ImagePuller>(*images_, [this] { Kick(); });
  // Initialised now, not by the first checkpointing run: `lathe snap create`
  // right after `lathe up` finds a store.
  if (auto st = checkpoints_->store(); !st.ok()) {
    spdlog::warn("snapshot store {}: {}", paths_.store, st.status().ToString());
  }
  if (!store_->db().journal_note().empty()) spdlog::warn("{}", store_->db().journal_note());

  ASSIGN_OR_RETURN(gpu_source_, gpu::OpenGpuSource(opts_.gpus));
  ASSIGN_OR_RETURN(inventory_, gpu_source_->Sample());
  if (opts_.backend) {
    backend_ = opts_.backend;
    cgroups_.note = "not used by the " + std::string(backend_->Name()) + " backend";
  } else {
    cgroups_ = os::DetectCgroups();
    exec::LocalBackendOptions lo;
    lo.self_exe = opts_.self_exe;
    lo.cgroups = cgroups_;
    lo.can_mount = os::IsRoot();
    lo.daemon_user = user_;
    lo.leftover_grace_ms = std::min(opts_.kill_grace_ms, 2000);
    lo.env = env_;
    lo.clock = &clock_;
    lo.podman = Images::Detect(paths_, lo.images_note);
    lo.container_devices = [simulated =
                                inventory_.source == "simulated"](const std::vector<int>& gpus) {
      return ContainerGpuDevices(gpu::ReadCdiState(), gpus, simulated);
    };
    images_->SetPodman(lo.podman, lo.images_note);
    images_->SetCap(opts_.images_max_bytes, [this] { return PinnedImageIds(); });
    own_backend_ = std::make_unique<exec::LocalBackend>(std::move(lo));
    backend_ = own_backend_.get();
  }
  node_cpus_ = std::max(1, os::OnlineCpus());
  node_memory_ = os::PhysicalMemoryBytes();
  spdlog::info("home {} ({} mode); {} GPU(s) from {}; cgroups: {}", paths_.home,
               paths_.system ? "system" : "user", inventory_.gpus.size(), inventory_.source,
               cgroups_.note.empty() ? "ok" : cgroups_.note);
  notebooks_ = std::make_unique<NotebookWatch>(opts_.notebooks, clock_, NotebookHooks());
  RETURN_IF_ERROR(InitTelemetry());
  disk_ = std::make_unique<DiskShares>(
      paths_.runs,
      [this] {
        MutexLock lock(&mu_);
        return store_->Owners();
      },
      clock_);
  MutexLock lock(&mu_);
  Recover();
  ReclaimLeftovers();
  PurgeExpiredKeys(/*now=*/true);
  return Status::OK();
}

Status Daemon::Start() {
  loop_ = std::thread([this] { Loop(); });
  disk_->Start();
  notebooks_->Start();
  if (sampler_) sampler_->Start();
  return Status::OK();
}

Result<std::vector<state::RunRecord>> Daemon::ReplicasOf(const std::string& name,
                                                         int64_t ended_since_ms) {
  MutexLock lock(&mu_);
  return store_->OfDeployment(name, ended_since_ms);
}

Result<std::vector<std::string>> Daemon::LiveReplicaSockets() {
  MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(auto live, store_->InStates({RunState::kQueued, RunState::kStarting,
                                                RunState::kRunning, RunState::kStopping}));
  std::vector<std::string> sockets;
  for (const auto& r : live) {
    if (!r.spec.deployment_socket.empty()) sockets.push_back(r.spec.deployment_socket);
  }
  return sockets;
}

void Daemon::Stop() {
  {
    MutexLock lock(&mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  loop_cv_.SignalAll();
  change_cv_.SignalAll();
  if (notebooks_) notebooks_->Stop();
  if (sampler_) sampler_->Stop();
  if (disk_) disk_->Stop();
  if (loop_.joinable()) loop_.join();
  puller_.reset();  // waits for the pulls in flight; their Kick finds the loop gone
}

void Daemon::Kick() {
  {
    MutexLock lock(&mu_);
    kicked_ = true;
  }
  loop_cv_.SignalAll();
}

void Daemon::Notify() {
  ++change_seq_;
  change_cv_.SignalAll();
}

void Daemon::WaitForChange(int timeout_ms) {
  MutexLock lock(&mu_);
  uint64_t seen = change_seq_;
  // What wait_for with a predicate does, spelled out (the analysis does not
  // see mu_ held in a lambda).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (change_seq_ == seen && !stopping_) {
    if (!change_cv_.WaitUntil(&mu_, deadline)) break;
  }
}

void Daemon::Loop() {
  MutexLock lock(&mu_);
  while (!stopping_) {
    std::vector<PendingStart> starts = Tick();
    if (!starts.empty()) {
      lock.Unlock();
      auto results = LaunchAll(starts);
      lock.Lock();
      for (size_t i = 0; i < starts.size(); ++i) CompleteStart(starts[i], results[i]);
      continue;  // a run may have ended meanwhile: look again at once
    }
    MaybeApplyRetention();  // retention.cc
    // Until kicked, a submission or a stop, at most poll_ms (wait_for with a
    // predicate, spelled out as in WaitForChange).
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::milliseconds(opts_.poll_ms);
    while (!kicked_ && !submitted_kick_ && !stopping_) {
      if (!loop_cv_.WaitUntil(&mu_, deadline)) break;
    }
    if (kicked_) pass_needed_ = true;
    kicked_ = false;
    submitted_kick_ = false;
  }
}

void Daemon::StepForTest(bool force_pass) {
  MutexLock lock(&mu_);
  if (force_pass) pass_needed_ = true;
  std::vector<PendingStart> starts = Tick();
  if (starts.empty()) return;
  lock.Unlock();
  auto results = LaunchAll(starts);
  lock.Lock();
  for (size_t i = 0; i < starts.size(); ++i) CompleteStart(starts[i], results[i]);
}

std::vector<Daemon::PendingStart> Daemon::Tick() {
  // 1. Ask the backend about every active attempt at once: exits, vanished
  // supervision; then stop escalations and deadlines.
  auto active = store_->InStates({RunState::kStarting, RunState::kRunning, RunState::kStopping});
  if (!active.ok()) {
    LogFiltered(LoopErrors(), spdlog::level::err, "state store: " + active.status().ToString());
    return {};
  }
  PollBackends(*active);
  DrainCheckpointEvents();
  PurgeExpiredKeys();
  // 2. Place queued runs; the caller launches them.
  return Schedule();
}

// One Poll per backend (this node's and each pool's, every pass: it is also
// their housekeeping) with that backend's attempts; runs whose pool is gone
// are left to recovery's rule (lost) at the next start.
void Daemon::PollBackends(std::vector<RunRecord>& active) {
  std::map<exec::ExecutionBackend*, std::vector<RunRecord*>> by_backend;
  by_backend[backend_];
  for (const auto& [name, b] : opts_.pools) by_backend[b];
  for (auto& r : active) {
    if (exec::ExecutionBackend* b = BackendOf(r)) by_backend[b].push_back(&r);
  }
  for (auto& [backend, runs] : by_backend) {
    std::vector<exec::AttemptRef> refs;
    refs.reserve(runs.size());
    for (const RunRecord* r : runs) refs.push_back(RefOf(*r));
    std::vector<exec::AttemptStatus> statuses = backend->Poll(refs);
    if (statuses.size() != runs.size()) {
      LogFiltered(LoopErrors(), spdlog::level::err,
                  fmt::format("backend {} answered {} of {} attempts", backend->Name(),
                              statuses.size(), runs.size()));
      continue;
    }
    for (size_t i = 0; i < statuses.size(); ++i) CheckActive(*runs[i], statuses[i]);
  }
}

exec::ExecutionBackend* Daemon::BackendOf(const RunRecord& r) const {
  if (r.backend == backend_->Name()) return backend_;
  auto it = opts_.pools.find(r.backend);
  return it == opts_.pools.end() ? nullptr : it->second;
}

exec::ExecutionBackend* Daemon::BackendFor(const run::RunSpec& spec) const {
  if (spec.pool.empty()) return backend_;
  auto it = opts_.pools.find(spec.pool);
  return it == opts_.pools.end() ? nullptr : it->second;
}

std::string Daemon::BackendKeyFor(const run::RunSpec& spec) const {
  return spec.pool.empty() ? std::string(backend_->Name()) : spec.pool;
}

Status Daemon::Transition(RunRecord& r, RunState to, const std::string& msg) {
  const bool attempt_edge =
      to == RunState::kStarting || (run::IsActive(r.state) && !run::IsActive(to));
  const RunState from = r.state;
  const int64_t now_ms = clock_.NowMs();
  Status st = store_->Transition(r, to, msg, now_ms);
  if (st.ok()) pass_needed_ = true;  // what runs or waits changed: the next pass looks again
  if (st.ok() && attempt_edge) gpu_attempts_stale_ = true;  // quotas re-read the ledger
  if (st.ok() && from == RunState::kQueued) queued_at_ms_.erase(r.id);
  if (st.ok() && to == RunState::kQueued) queued_at_ms_[r.id] = now_ms;
  if (!st.ok()) {
    LogFiltered(LoopErrors(), spdlog::level::err, fmt::format("run {}: {}", r.id, st.ToString()));
  } else {
    spdlog::info("run {} -> {}: {}", r.id, run::StateName(to), msg);
    Notify();
  }
  return st;
}

std::optional<int64_t> Daemon::QueuedAtMs(const RunRecord& r) const {
  if (auto it = queued_at_ms_.find(r.id); it != queued_at_ms_.end()) return it->second;
  if (r.attempt == 0) return r.created_at_ms;  // never started: queued since its submission
  return std::nullopt;
}

std::string Daemon::AttemptDir(const RunRecord& r) const {
  return fmt::format("{}/attempt-{}", r.run_dir, r.attempt);
}

// The attempt is over, however it ended: what is left of it goes, its
// secret files with it.
void Daemon::ReleaseAttempt(const RunRecord& r) {
  pool_notes_.erase(r.id);
  if (exec::ExecutionBackend* b = BackendOf(r)) b->Release(RefOf(r));
  if (r.spec.secret_files.empty() || r.attempt == 0) return;
  const DirOwner owner = OwnerOf(r);
  if (Status st = RemoveSecretFiles(SecretFilesDir(r.run_dir, r.attempt), owner.uid, owner.gid);
      !st.ok()) {
    LogFiltered(LoopErrors(), spdlog::level::err, fmt::format("run {}: {}", r.id, st.ToString()));
  }
}

exec::RunUser Daemon::UserOf(uid_t uid) const {
  exec::RunUser u;
  u.uid = uid;
  u.gid = static_cast<gid_t>(uid);
  if (auto info = os::LookupUser(uid); info.ok()) {
    u.gid = info->gid;
    u.groups = os::GroupsOf(*info);
    u.name = info->name;
    u.home = info->home;
    u.shell = info->shell;
  }
  return u;
}

exec::AttemptRef Daemon::RefOf(const RunRecord& r) const {
  exec::AttemptRef a;
  a.run_id = r.id;
  a.attempt = r.attempt;
  a.attempt_dir = AttemptDir(r);
  a.user.uid = r.uid;
  a.user.name = r.user;
  a.handle = r.handle;
  return a;
}

std::string Daemon::LogPath(const RunRecord& r) const {
  const exec::ExecutionBackend* b = BackendOf(r);
  return (b ? b : backend_)->LogPath(r.run_dir);
}

os::AccessAs Daemon::LogAccess(const RunRecord& r) const {
  if (BackendOf(r) == backend_) return {};  // in the run's directory, the daemon's
  return os::AccessAsUser(os::IdentityOf(r.uid, OwnerOf(r).gid));
}

std::vector<exec::Endpoint> Daemon::Endpoints(const RunRecord& r) {
  exec::ExecutionBackend* b = BackendOf(r);
  if (!run::IsActive(r.state) || b == nullptr) return {};
  MutexLock lock(&mu_);  // backend calls other than Launch hold it
  return b->Endpoints(RefOf(r));
}

Json Daemon::EndpointsJson(const RunRecord& r) {
  Json out = Json::array();
  for (const auto& e : Endpoints(r)) {
    Json j = {{"name", e.name}, {"kind", e.kind}, {"address", e.address}};
    if (e.netns_pid > 0) {  // an isolated run's port, inside its own namespace
      j["netns_pid"] = e.netns_pid;
      j["netns_start"] = e.netns_start;
    }
    out.push_back(std::move(j));
  }
  return out;
}

// ---- recovery -----------------------------------------------------------------

void Daemon::Recover() {
  auto active = store_->InStates({RunState::kStarting, RunState::kRunning, RunState::kStopping});
  if (!active.ok()) {
    LogFiltered(LoopErrors(), spdlog::level::err, "recovery: " + active.status().ToString());
    return;
  }
  for (auto& r : *active) RecoverRun(r);
}

// One run found active at start: its backend says whether the attempt is
// still there. A run that ended meanwhile is never taken for lost (the local
// backend reads exit.json again after finding the monitor gone).
void Daemon::RecoverRun(RunRecord& r) {
  exec::ExecutionBackend* backend = BackendOf(r);
  if (backend == nullptr) {
    return MarkLost(
        r, fmt::format("it ran on the '{}' backend, which this daemon does not have", r.backend));
  }
  exec::Readoption found = backend->Readopt(RefOf(r));
  switch (found.what) {
    case exec::Found::kExited:
      // Best effort: an event only tells; what it tells of is stored already.
      (void)store_->AddEvent(r.id, "info", "the run ended while the daemon was down",
                             Json::object(), clock_.NowMs());
      return Finish(r, found.exit);
    case exec::Found::kAlive:
      r.handle = found.handle;
      return Readopt(r);
    case exec::Found::kNeverStarted:
      if (r.state == RunState::kRunning) {
        return MarkLost(r, "its backend has no record of the attempt; the exit status is unknown");
      }
      // The program was never started, so the run goes back to the queue
      // without using up a retry (or ends, when it was being stopped).
      ReleaseAttempt(r);
      r.gpus.clear();
      if (r.state == RunState::kStopping) {
        r.reason = "stopped before it was started";
        r.finished_at_ms = clock_.NowMs();
        // Best effort: Transition logs a failure; the next pass re-reads the stored state.
        (void)Transition(r, RunState::kStopped, r.reason);
        return;
      }
      // Best effort: Transition logs a failure; the next pass re-reads the stored state.
      (void)Transition(r, RunState::kQueued,
                       "requeued: the daemon stopped before the run was started");
      return;
    case exec::Found::kGone:
      return MarkLost(r, found.why.empty() ? "it vanished while the daemon was down; the exit "
                                             "status is unknown"
                                           : found.why);
  }
}

void Daemon::Readopt(RunRecord& r) {
  exec::ExecutionBackend* backend = BackendOf(r);
  const bool pool_run = backend != nullptr && backend->Caps().places_runs;
  // A pool run stays starting until its cluster says it runs (CheckActive):
  // its job may still be queued there.
  if (r.state == RunState::kStarting && !pool_run) {
    // Best effort: Transition logs a failure; the next pass re-reads the stored state.
    (void)Transition(r, RunState::kRunning, "re-adopted after a daemon restart");
  } else {
    // Best effort: a failed save leaves the stored state, which the next pass re-reads.
    (void)store_->Save(r, "info", "re-adopted after a daemon restart", clock_.NowMs());
  }
  if (r.state == RunState::kStopping) {
    stop_deadline_ms_[r.id] = clock_.MonotonicMs() + opts_.kill_grace_ms;
  }
  if (r.spec.checkpoint_dir.empty()) return;
  // A pool run's node recorded what it wrote: the first poll captures it.
  if (pool_run) return;
  // Checkpoints written while no daemon watched are captured now, with the
  // run's user's identity, and only from a directory the rules still allow.
  const DirOwner owner = OwnerOf(r);
  Status st = reserved_->Check("checkpoints.dir", r.spec.checkpoint_dir, PathUse::kCheckpointDir,
                               ActingAs(owner.uid, owner.gid));
  if (st.ok()) {
    st = checkpoints_->Watch(r.id, r.attempt, r.spec.checkpoint_dir, owner, r.spec.keep_checkpoints,
                             /*capture_now=*/true);
  }
  if (!st.ok()) {
    // Best effort: an event only tells; what it tells of is stored already.
    (void)store_->AddEvent(r.id, "warning", "checkpoint directory not watched: " + st.message(),
                           Json::object(), clock_.NowMs());
  }
}

// What the knowledge base recognises in a failed run's log, as an event
// that `lathe inspect` shows in the reader's language.
void Daemon::AttachDiagnosis(const RunRecord& r) {
  // A diagnosis quotes the log: never a secret's value.
  run::SecretMask mask(secrets_->Values(r.uid, run::SecretNames(r.spec)));
  std::string tail;
  // Best effort: a log that cannot be read has nothing to diagnose.
  (void)os::WithAccess(LogAccess(r), [&] {
    tail = LogTail(LogPath(r));
    return Status::OK();
  });
  Json matches = doctor::DiagnoseLog(mask.Apply(tail));
  if (!matches.is_array() || matches.empty()) return;
  std::string first = matches[0].value("id", "");
  // Best effort: an event only tells; what it tells of is stored already.
  (void)store_->AddEvent(r.id, "diagnosis", "known failure: " + first, Json{{"matches", matches}},
                         clock_.NowMs());
}

void Daemon::MarkLost(RunRecord& r, const std::string& why) {
  // Whatever is left of the attempt must not keep GPUs busy.
  ReleaseAttempt(r);
  r.reason = why;
  r.finished_at_ms = clock_.NowMs();
  r.gpus.clear();
  EndCheckpoints(r, /*capture_if_unwatched=*/true);
  disk_->Kick();  // the attempt's files are final: count them soon
  if (!Transition(r, RunState::kLost, why).ok()) return;
  if (r.retries_used < r.spec.retry) {
    r.retries_used++;
    if (Transition(
            r, RunState::kQueued,
            fmt::format("retry {} of {} after the run was lost", r.retries_used, r.spec.retry))
            .ok()) {
      HoldForRetry(r);
    }
  }
}

int64_t Daemon::RetryBackoffMs(int retries_used) const {
  int64_t wait = std::max<int64_t>(live_.retry_backoff_ms, 0);
  for (int i = 1; i < retries_used && wait < live_.retry_backoff_max_ms; ++i) wait *= 2;
  return std::min(wait, live_.retry_backoff_max_ms);
}

void Daemon::HoldForRetry(const RunRecord& r) {
  const int64_t wait_ms = RetryBackoffMs(r.retries_used);
  if (wait_ms <= 0) return;
  retry_at_ms_[r.id] = clock_.MonotonicMs() + wait_ms;
}

// Takes the queued runs that wait out a retry's backoff out of `queued`,
// with the note of what they wait on.
std::vector<std::pair<std::string, Daemon::WaitNote>> Daemon::HoldBackRetries(
    std::vector<const RunRecord*>& queued) {
  const int64_t now = clock_.MonotonicMs();
  std::vector<std::pair<std::string, WaitNote>> held;
  std::erase_if(queued, [&](const RunRecord* run) REQUIRES(mu_) {
    const RunRecord& r = *run;
    auto it = retry_at_ms_.find(r.id);
    if (it == retry_at_ms_.end()) return false;
    if (it->second <= now) {
      retry_at_ms_.erase(it);
      return false;
    }
    const int64_t left_s = (it->second - now + 999) / 1000;
    held.emplace_back(r.id, WaitNote{Tr("event.retry_backoff", Lang::kEn,
                                        {{"n", std::to_string(r.retries_used)},
                                         {"max", std::to_string(r.spec.retry)},
                                         {"seconds", std::to_string(left_s)}}),
                                     "retry_backoff", ""});
    return true;
  });
  return held;
}

// ---- supervision ----------------------------------------------------------------

void Daemon::CheckActive(RunRecord& r, const exec::AttemptStatus& s) {
  switch (s.phase) {
    case exec::AttemptPhase::kExited:
      return Finish(r, s.exit, s.cluster_end);
    case exec::AttemptPhase::kStarting:
      // Not running yet: CompleteStart has not run, or a cluster holds the
      // job in its queue (and says why).
      if (!s.note.empty()) pool_notes_[r.id] = s.note;
      return;
    case exec::AttemptPhase::kGone:
      return MarkLost(r, s.why.empty() ? "it vanished without recording an exit status" : s.why);
    case exec::AttemptPhase::kRunning:
      break;
  }
  pool_notes_.erase(r.id);
  CapturePoolCheckpoints(r, s.checkpoints_recorded);
  if (r.state == RunState::kStarting && !r.handle.empty()) {  // a cluster's job began
    // Best effort: Transition logs a failure; the next pass looks again.
    (void)Transition(r, RunState::kRunning, "running on its pool");
  }
  if (WorkspacePending(r)) {  // the run's first process reports what it checked out
    const DirOwner owner = OwnerOf(r);
    if (TakeWorkspaceRecord(r, owner.uid, owner.gid) && !WorkspaceFailure(r)) {
      // Best effort: a failed save leaves the stored state, which the next pass re-reads.
      (void)store_->Save(r, "info", WorkspaceEvent(r), clock_.NowMs());
    }
  }
  int64_t mono = clock_.MonotonicMs();
  if (r.state == RunState::kStopping) {
    auto it = stop_deadline_ms_.find(r.id);
    if (it == stop_deadline_ms_.end()) {
      stop_deadline_ms_[r.id] = mono + opts_.kill_grace_ms;
    } else if (mono >= it->second) {
      // Best effort: an attempt that is gone needs no signal; the next poll sees its exit.
      if (exec::ExecutionBackend* b = BackendOf(r))
        (void)b->Signal(RefOf(r), exec::StopSignal::kKill);
      it->second = mono + opts_.kill_grace_ms;
    }
    return;
  }
  const int64_t since = r.chain_started_at_ms > 0 ? r.chain_started_at_ms : r.started_at_ms;
  if (r.spec.max_duration_ms > 0 && clock_.NowMs() - since > r.spec.max_duration_ms) {
    // Best effort: BeginStop logs a failure; the run stays active and the next pass looks again.
    (void)BeginStop(r, run::StopIntent::kTimeout,
                    "max_duration " +
                        FormatDuration(std::chrono::milliseconds(r.spec.max_duration_ms)) +
                        " exceeded");
  }
}

void Daemon::Finish(RunRecord& r, const exec::ExitRecord& e, std::string_view cluster_end) {
  stop_deadline_ms_.erase(r.id);
  ReleaseAttempt(r);
  bool workspace_noted = false;
  if (WorkspacePending(r)) {
    const DirOwner owner = OwnerOf(r);
    workspace_noted = TakeWorkspaceRecord(r, owner.uid, owner.gid) && !WorkspaceFailure(r);
  }
  // A workspace that could not be made fails the run, with git's words, and
  // is not retried: the next attempt would meet the same repository.
  const std::optional<std::string> no_workspace = WorkspaceFailure(r);
  r.exit_code = e.exit_code;
  r.signal = e.signal;
  r.oom_killed = e.oom_killed;
  r.finished_at_ms = e.finished_at_ms ? e.finished_at_ms : clock_.NowMs();
  r.gpus.clear();
  std::string what = DescribeExit(e, r.spec);
  if (no_workspace && e.start_error.empty()) what = *no_workspace;
  if (workspace_noted) {
    // Best effort: an event only tells; what it tells of is stored already.
    (void)store_->AddEvent(r.id, "info", WorkspaceEvent(r), Json::object(), clock_.NowMs());
  }
  bool requeue = false, chained = false;
  RunState to = EndStateOf(r, e, cluster_end, what, &requeue, &chained);
  const bool cancelled = to == RunState::kStopped && cluster_end == "CANCELLED";
  // max_duration counts from the chain's first job while it goes on.
  r.chain_started_at_ms =
      !chained ? 0 : (r.chain_started_at_ms > 0 ? r.chain_started_at_ms : r.started_at_ms);
  r.reason = to == RunState::kSucceeded ? "" : what;
  if (r.state == RunState::kStarting &&
      (to == RunState::kSucceeded || (to == RunState::kPreempted && !cluster_end.empty()))) {
    // It ran and exited 0 (or its cluster preempted it) before its start was
    // recorded (a daemon killed in between; a job that ran between two
    // polls): record the start, then the end.
    if (!Transition(r, RunState::kRunning, "started (recorded after it had finished)").ok()) return;
  } else if (r.state == RunState::kStarting && to != RunState::kFailed && !cancelled) {
    to = RunState::kFailed;
  }
  // Cancelled in its cluster: stopped, by way of stopping as any stop.
  if (cancelled && r.state != RunState::kStopping &&
      !Transition(r, RunState::kStopping, "cancelled in its pool").ok()) {
    return;
  }
  EndCheckpoints(r, /*capture_if_unwatched=*/e.start_error.empty());
  disk_->Kick();  // the attempt's files are final: count them soon
  if (!Transition(r, to, what).ok()) return;
  NoteLogEvents(*store_, clock_.NowMs(), r, e, live_.run_log_max_bytes);
  if (to == RunState::kFailed) AttachDiagnosis(r);
  if (to == RunState::kFailed && e.start_error.empty() && !no_workspace &&
      r.retries_used < r.spec.retry) {
    r.retries_used++;
    requeue = true;
  }
  if (requeue) {
    if (to == RunState::kPreempted && !chained) r.preemptions++;
    r.stop_intent = run::StopIntent::kNone;
    const bool retry = to != RunState::kPreempted;
    if (Transition(r, RunState::kQueued,
                   retry     ? fmt::format("retry {} of {}", r.retries_used, r.spec.retry)
                   : chained ? std::string("requeued to continue in its pool's next job")
                             : std::string("requeued after preemption"))
            .ok() &&
        retry) {
      HoldForRetry(r);
    }
  }
}

Status Daemon::BeginStop(RunRecord& r, run::StopIntent intent, const std::string& why) {
  if (r.state == RunState::kQueued) {
    r.stop_intent = intent;
    r.reason = why;
    r.finished_at_ms = clock_.NowMs();
    return Transition(r, RunState::kStopped, why);
  }
  if (r.state == RunState::kStopping) return Status::OK();
  r.stop_intent = intent;
  RETURN_IF_ERROR(Transition(r, RunState::kStopping, why));  // committed before acting
  stop_deadline_ms_[r.id] = clock_.MonotonicMs() + opts_.kill_grace_ms;
  // Best effort: none yet while starting; a run whose pool is gone has nothing to signal.
  if (exec::ExecutionBackend* b = BackendOf(r))
    (void)b->Signal(RefOf(r), exec::StopSignal::kGraceful);
  return Status::OK();
}

// ---- scheduling -------------------------------------------------------------------

uint64_t Daemon::SchedulingPasses() {
  MutexLock lock(&mu_);
  return passes_;
}

bool Daemon::PassWorthRunning() {
  const int64_t now = clock_.MonotonicMs();
  if (pass_needed_ || !headroom_ || !retry_at_ms_.empty() || backend_->Caps().places_runs ||
      !opts_.pools.empty() || now - last_pass_ms_ >= kFullPassEveryMs) {
    return true;
  }
  for (const sched::QueuedJob& j : submitted_) {
    if (sched::MightChange(*headroom_, j)) return true;
  }
  return false;
}

std::vector<Daemon::PendingStart> Daemon::Schedule() {
  if (!PassWorthRunning()) {
    // None of the runs submitted since can start before something else
    // changes: each waits, said as the pass would say it, until the next pass.
    for (const sched::QueuedJob& j : submitted_) {
      waiting_why_[j.id] = WaitNote{sched::ShortfallFor(*headroom_, j), "resources", ""};
    }
    submitted_.clear();
    return {};
  }
  pass_needed_ = false;
  last_pass_ms_ = clock_.MonotonicMs();
  ++passes_;
  submitted_.clear();
  headroom_.reset();
  ApplyEndedPulls();  // image_pulls.cc; writes, so before the queued runs are read
  // The queued runs from the store's memory (no SQLite, no spec decoding);
  // valid until the first write below, so what is acted on is copied first.
  std::vector<const RunRecord*> queued = store_->Queued();
  auto active = store_->InStates({RunState::kStarting, RunState::kRunning, RunState::kStopping});
  if (!active.ok() || queued.empty()) {
    waiting_why_.clear();
    return {};
  }
  auto backoff = HoldBackRetries(queued);
  for (auto& held : HoldBackPulls(queued)) backoff.push_back(std::move(held));
  // Runs for a backend that places runs itself (a cluster's pool) are handed
  // over as they come; sched/ places the rest on this node's GPUs.
  std::vector<PendingStart> starts = HandOver(queued);
  std::erase_if(*active, [&](const RunRecord& r) { return BackendOf(r) != backend_; });
  if (queued.empty()) {
    waiting_why_.clear();
    for (auto& [id, note] : backoff) waiting_why_[id] = std::move(note);
    return starts;
  }
  const sched::NodeState node = NodeOf();
  std::vector<sched::QueuedJob> q;
  q.reserve(queued.size());
  for (const RunRecord* r : queued) q.push_back(QueuedJobOf(*r));
  sched::Accounts accounts = AccountsFor(queued, *active);
  sched::Accounts projects = ProjectAccountsFor(queued, *active);
  sched::Decision d = sched::Schedule(node, std::move(q), RunningJobsOf(*active), clock_.NowMs(),
                                      accounts, projects);
  headroom_ = d.headroom;
  NoteWaiting(d);  // starts the notes afresh
  for (auto& [id, note] : backoff) waiting_why_[id] = std::move(note);
  // Copies of the runs the decision acts on, before any of them changes.
  std::map<std::string, RunRecord> chosen;
  for (const auto& imp : d.impossible) chosen[imp.id];
  for (const auto& p : d.start) chosen[p.id];
  for (const RunRecord* r : queued) {
    if (auto it = chosen.find(r->id); it != chosen.end()) it->second = *r;
  }
  for (const auto& victim : d.preempt) {
    for (auto& r : *active) {
      if (r.id != victim) continue;
      // Best effort: BeginStop logs a failure; the run stays active and the next pass looks again.
      (void)BeginStop(r, run::StopIntent::kPreempt, "preempted by a higher-priority run");
    }
  }
  for (const auto& imp : d.impossible) {
    RunRecord& r = chosen[imp.id];
    r.reason = imp.reason;
    r.finished_at_ms = clock_.NowMs();
    // Best effort: Transition logs a failure; the next pass re-reads the stored state.
    (void)Transition(r, RunState::kStopped, "cannot ever be placed: " + imp.reason);
  }
  for (const auto& p : d.start) {
    if (auto s = PrepareStart(std::move(chosen[p.id]), p.gpu_indices)) {
      starts.push_back(std::move(*s));
    }
  }
  return starts;
}

// Takes the queued runs whose backend places runs itself out of `queued`
// and starts them (a run whose pool is no longer configured fails, saying so).
std::vector<Daemon::PendingStart> Daemon::HandOver(std::vector<const RunRecord*>& queued) {
  std::vector<RunRecord> mine;
  std::erase_if(queued, [&](const RunRecord* r) {
    const exec::ExecutionBackend* b = BackendFor(r->spec);
    if (b != nullptr && !b->Caps().places_runs) return false;
    mine.push_back(*r);
    return true;
  });
  std::vector<PendingStart> starts;
  for (RunRecord& r : mine) {
    if (BackendFor(r.spec) == nullptr) {
      r.reason = fmt::format("its pool '{}' is not configured on this daemon", r.spec.pool);
      r.finished_at_ms = clock_.NowMs();
      // Best effort: Transition logs a failure; the next pass re-reads the stored state.
      (void)Transition(r, RunState::kFailed, r.reason);
      continue;
    }
    if (auto s = PrepareStart(std::move(r), {})) starts.push_back(std::move(*s));
  }
  return starts;
}

exec::LaunchRequest Daemon::RequestFor(const RunRecord& r) const {
  exec::LaunchRequest q;
  q.run_id = r.id;
  q.run_name = r.name;
  q.attempt = r.attempt;
  q.user = UserOf(r.uid);
  q.argv = r.spec.command;
  q.env = r.spec.env;
  for (auto& [k, v] : run::NcclEnv(r.spec)) q.env.emplace(k, v);  // spec.env wins
  q.env["LATHE_RUN_ID"] = r.id;
  q.env["LATHE_RUN_NAME"] = r.name;
  q.env["LATHE_ATTEMPT"] = std::to_string(r.attempt);
  q.workdir = r.spec.workdir;
  q.gpus = r.gpus;
  q.gpu_count = r.spec.gpus;  // for a backend that places runs itself
  q.gpu_type = r.spec.gpu_type;
  q.partition = r.spec.partition;
  q.nodes = r.spec.nodes;
  q.time_limit_ms = TimeLeftMs(r);
  q.cpus = r.spec.cpus;
  q.memory_bytes = r.spec.memory_bytes;
  q.shm_bytes = r.spec.shm_bytes;
  q.umask = r.spec.umask;
  q.ports = r.spec.ports;
  q.isolated_network = r.spec.network == run::Network::kIsolated;
  q.attempt_dir = AttemptDir(r);
  q.log_path = LogPath(r);
  q.log_max_bytes = live_.run_log_max_bytes;
  q.checkpoint_dir = r.spec.checkpoint_dir;
  q.image_id = r.spec.image_id;
  q.image = r.spec.image;
  if (IsNotebook(r)) {
    // Made at submission; a run from before notebooks had tokens gets one now.
    auto token = NotebookToken(r.run_dir);
    ApplyNotebook(r.run_dir, r.spec, opts_.self_exe.empty() ? os::SelfExe() : opts_.self_exe,
                  token.ok() ? *token : "", q);
  }
  if (r.spec.torchrun && !r.spec.image_id.empty()) {
    // In an image, torchrun is the image's own (Lathe's binary is not in
    // it), on this one node: the plan `lathe __torchrun` would exec.
    exec::TorchrunArgs ta;
    ta.nproc_per_node = std::max(1, r.spec.gpus);
    ta.run_id = r.id;
    ta.script = q.argv;
    if (auto plan = exec::PlanTorchrun(ta, "", {}, {}); plan.ok()) {
      q.argv = plan->argv;
      for (const auto& [k, v] : plan->env) q.env[k] = v;
    }
  } else if (r.spec.torchrun) {
    q.argv = exec::TorchrunWrapArgv(opts_.self_exe.empty() ? os::SelfExe() : opts_.self_exe,
                                    r.spec.gpus, r.spec.nodes, r.id, q.argv);
  }
  if (!r.spec.deployment_socket.empty() && !r.spec.image_id.empty()) {
    // A command replica in an image: its relay beside the container.
    q.sidecar_argv = {opts_.self_exe.empty() ? os::SelfExe() : opts_.self_exe, "__relay",
                      "--socket", r.spec.deployment_socket, "--beside"};
  }
  ApplyWorkspace(r, opts_.self_exe.empty() ? os::SelfExe() : opts_.self_exe,
                 q);  // last: it wraps whatever q.argv holds
  return q;
}

// What is left of the run's max_duration for the attempt starting now (0:
// no limit): all of it, or what the chain it continues has not used yet —
// at least a minute, Slurm's smallest --time.
int64_t Daemon::TimeLeftMs(const RunRecord& r) const {
  if (r.spec.max_duration_ms <= 0) return 0;
  if (r.chain_started_at_ms <= 0) return r.spec.max_duration_ms;
  const int64_t used = clock_.NowMs() - r.chain_started_at_ms;
  return std::max<int64_t>(r.spec.max_duration_ms - used, 60000);
}

// Step 1 of a start, under mu_: commit `starting`, prepare the attempt
// directory, cgroups and launch.json. nullopt when the run failed already.
std::optional<Daemon::PendingStart> Daemon::PrepareStart(RunRecord r,
                                                         const std::vector<int>& gpus) {
  const std::optional<int64_t> queued_at_ms = QueuedAtMs(r);
  r.gpus = gpus;
  r.attempt++;
  r.started_at_ms = clock_.NowMs();
  r.exit_code.reset();
  r.signal.reset();
  r.oom_killed = false;
  r.reason.clear();
  r.stop_intent = run::StopIntent::kNone;
  r.backend = BackendKeyFor(r.spec);
  r.handle = Json::object();
  exec::ExecutionBackend* backend = BackendFor(r.spec);  // Schedule checked it is there
  if (!r.spec.workspace.empty()) r.workspace = InitialWorkspace(r, UserOf(r.uid).home);
  const std::string placed =
      backend->Caps().places_runs ? fmt::format("handed to the {} backend", r.backend)
      : gpus.empty()              ? std::string("placed, without GPUs")
                                  : fmt::format("placed on GPUs [{}]", fmt::join(gpus, ","));
  if (!Transition(r, RunState::kStarting, placed).ok()) {
    return std::nullopt;
  }
  if (queued_at_ms) scheduling_latency_.Observe(r.started_at_ms - *queued_at_ms);
  PendingStart p;
  p.request = RequestFor(r);
  if (Status st = os::MakeDirs(p.request.attempt_dir, 0700); !st.ok()) {
    return FailStart(r, st.message());
  }
  if (IsNotebook(r)) {
    const DirOwner owner = OwnerOf(r);
    if (Status st = PrepareNotebookDir(r.run_dir, owner.uid, owner.gid); !st.ok()) {
      return FailStart(r, st.message());
    }
  }
  auto prepared = backend->Prepare(p.request);
  if (!prepared.ok()) return FailStart(r, prepared.status().message());
  p.prepared = std::move(prepared).value();
  p.run = std::move(r);
  return p;
}

std::nullopt_t Daemon::FailStart(RunRecord& r, const std::string& why) {
  ReleaseAttempt(r);
  EndCheckpoints(r, /*capture_if_unwatched=*/false);
  disk_->Kick();  // the attempt's files are final: count them soon
  r.reason = why;
  r.finished_at_ms = clock_.NowMs();
  r.gpus.clear();
  // Best effort: Transition logs a failure; the next pass re-reads the stored state.
  (void)Transition(r, RunState::kFailed, why);
  return std::nullopt;
}

// Step 3, under mu_ again: record what the backend said. The run may have
// been stopped while it was being launched; then it is told now.
void Daemon::CompleteStart(PendingStart& p, const Result<exec::Launched>& launched) {
  DrainCheckpointEvents();  // a restore is told before the start
  auto current = store_->Get(p.run.id);
  if (!current.ok()) return;
  RunRecord r = std::move(current).value();
  r.handle = launched.ok() ? launched->handle : p.prepared;
  if (!launched.ok()) {
    // Best effort: FailStart records the failure; its nullopt is for PrepareStart.
    (void)FailStart(r, launched.status().message());
    return;
  }
  if (!launched->start_error.empty()) {
    // The attempt has ended; its exit, when the backend recorded one, says how.
    auto polled = BackendOf(r)->Poll({RefOf(r)});  // PrepareStart found it
    if (polled.size() == 1 && polled[0].phase == exec::AttemptPhase::kExited) {
      return Finish(r, polled[0].exit);
    }
    // Best effort: FailStart records the failure; its nullopt is for PrepareStart.
    (void)FailStart(r, launched->start_error);
    return;
  }
  if (r.state == RunState::kStopping) {
    // Best effort: a failed save leaves the stored state, which the next pass re-reads.
    (void)store_->Save(r, "info", fmt::format("started, {}; stopping it", launched->what),
                       clock_.NowMs());
    // Best effort: an attempt that is gone needs no signal; the next poll sees its exit.
    (void)BackendOf(r)->Signal(RefOf(r), exec::StopSignal::kGraceful);
    return;
  }
  if (BackendOf(r)->Caps().places_runs) {
    // Handed over: it runs when the cluster starts it (CheckActive).
    // Best effort: a failed save leaves the stored state, which the next pass re-reads.
    (void)store_->Save(r, "info", "submitted, " + launched->what, clock_.NowMs());
    return;
  }
  // Best effort: Transition logs a failure; the next pass re-reads the stored state.
  (void)Transition(r, RunState::kRunning, "started, " + launched->what);
}

// Step 2, without mu_: launch the attempts, all at once. The local backend
// waits for each monitor's handshake (tens of ms), during which the API
// stays responsive.
std::vector<Result<exec::Launched>> Daemon::LaunchAll(std::vector<PendingStart>& starts) {
  std::vector<Result<exec::Launched>> results(starts.size(), Status::Internal("not started"));
  if (starts.size() == 1) {
    results[0] = StartAttempt(starts[0]);
    return results;
  }
  std::vector<std::thread> threads;
  for (size_t i = 0; i < starts.size(); ++i) {
    threads.emplace_back([&, i] { results[i] = StartAttempt(starts[i]); });
  }
  for (auto& t : threads) t.join();
  return results;
}

// Without mu_: hand the checkpoint back, start watching, and launch. Until
// the backend has launched it, a daemon crash requeues the run (Recover),
// so a half-done restore is simply done again.
Result<exec::Launched> Daemon::StartAttempt(PendingStart& p) {
  const RunRecord& r = p.run;
  // Read at each start: a secret set again since reaches the next attempt.
  ASSIGN_OR_RETURN(auto secret_env, secrets_->SecretEnv(r.uid, r.user, r.spec.secrets));
  for (auto& [name, value] : secret_env) p.request.env[name] = std::move(value);
  if (!r.spec.secret_files.empty()) {
    ASSIGN_OR_RETURN(auto values, secrets_->SecretEnv(r.uid, r.user, r.spec.secret_files));
    const std::string dir = SecretFilesDir(r.run_dir, r.attempt);
    RETURN_IF_ERROR(WriteSecretFiles(dir, values, p.request.user.uid, p.request.user.gid));
    p.request.env["LATHE_SECRETS_DIR"] = dir;
  }
  if (!r.spec.image_id.empty()) images_->NoteUse(r.uid, r.spec.image_id);
  if (!r.spec.checkpoint_dir.empty()) {
    const std::string& dir = r.spec.checkpoint_dir;
    const DirOwner owner = OwnerOf(r);
    // Checked again at each start: a component may have become a symlink.
    RETURN_IF_ERROR(reserved_->Check("checkpoints.dir", dir, PathUse::kCheckpointDir,
                                     ActingAs(owner.uid, owner.gid)));
    auto point = checkpoints_->Prepare(r.id, r.spec.resume_from, dir, owner);
    if (!point.ok()) {
      return Status(point.status().code(),
                    "cannot hand the checkpoint back: " + point.status().message());
    }
    p.request.env["LATHE_CHECKPOINT_DIR"] = dir;
    if (!point->resume_from.empty()) p.request.env["LATHE_RESUME_FROM"] = point->resume_from;
    // A pool's runs write on their nodes, which the daemon's inotify does not
    // see: the node records each checkpoint (CapturePoolCheckpoints).
    if (!BackendOf(r)->Caps().places_runs) {
      RETURN_IF_ERROR(checkpoints_->Watch(r.id, r.attempt, dir, owner, r.spec.keep_checkpoints));
    }
  }
  RETURN_IF_ERROR(PrepareWorkspaceRecord(r, p.request.user.uid, p.request.user.gid));
  return BackendOf(r)->Launch(p.request, p.prepared);  // PrepareStart found it
}

DirOwner Daemon::OwnerOf(const RunRecord& r) const {
  auto u = os::LookupUser(r.uid);
  return DirOwner{r.uid, u.ok() ? u->gid : static_cast<gid_t>(r.uid)};
}

// A running pool attempt whose node recorded more finished checkpoints than
// were captured: one snapshot of the directory, as the user, in the
// background. While the previous capture still runs the count is kept, so
// the next pass asks again.
void Daemon::CapturePoolCheckpoints(const RunRecord& r, int64_t recorded) {
  if (r.spec.checkpoint_dir.empty() || recorded <= 0) return;
  PoolCheckpoints& seen = pool_checkpoints_[r.id];
  if (seen.attempt != r.attempt) seen = PoolCheckpoints{r.attempt, 0};
  if (recorded <= seen.captured) return;
  if (checkpoints_->CaptureRecorded(r.id, r.attempt, r.spec.checkpoint_dir, OwnerOf(r),
                                    r.spec.keep_checkpoints, recorded)) {
    seen.captured = recorded;
  }
}

void Daemon::EndCheckpoints(const RunRecord& r, bool capture_if_unwatched) {
  pool_checkpoints_.erase(r.id);
  if (r.spec.checkpoint_dir.empty()) return;
  checkpoints_->Unwatch(r.id, r.attempt, r.spec.checkpoint_dir, OwnerOf(r), r.spec.keep_checkpoints,
                        capture_if_unwatched);
}

void Daemon::DrainCheckpointEvents() {
  auto events = checkpoints_->TakeEvents();
  for (const auto& e : events) {
    // Best effort: an event only tells; what it tells of is stored already.
    (void)store_->AddEvent(e.run_id, e.type, e.message, e.data, clock_.NowMs());
  }
  if (!events.empty()) Notify();
}

}  // namespace lathe::daemon

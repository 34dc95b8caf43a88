// The daemon's API-facing half: submission and its checks (the node's size,
// the backend's capabilities, the paths a spec names, idempotency keys),
// listing, access, stopping, status. The loop, recovery and the run state
// machine are in daemon.cc.
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <spdlog/spdlog.h>
#include <algorithm>
#include <filesystem>
#include <set>

#include "lathe/common/i18n.h"
#include "lathe/common/ids.h"
#include "lathe/common/units.h"
#include "lathe/daemon/daemon.h"
#include "lathe/daemon/notebooks.h"
#include "lathe/os/files.h"
#include "lathe/os/process.h"
#include "lathe/sched/scheduler.h"
#include "lathe/snap/sha256.h"
#include "lathe/state/deployment_store.h"

namespace lathe::daemon {

using run::RunState;
using state::RunRecord;

namespace {
constexpr int kMaxEventsPerCall = 1000;
constexpr int64_t kKeyPurgeEveryMs = 3600 * 1000;
constexpr int64_t kGpuLedgerKeepMs = 90LL * 24 * 3600 * 1000;

// What makes two submissions the same request: the spec as parsed, written
// canonically (defaults filled in, keys sorted), hashed.
std::string SpecHash(const run::RunSpec& spec) {
  return snap::ToHex(snap::Sha256(run::SpecToJson(spec).dump()));
}

// ENOSPC/EDQUOT from the daemon's home is the same full disk the state
// store reports as state.disk_full (the API answers both with 507).
Status AsDiskFull(const Status& st) {
  if (st.code() != Code::kResourceExhausted || !st.msg_id().empty()) return st;
  return Status::Msg(Code::kResourceExhausted, "state.disk_full", {{"detail", st.message()}});
}

}  // namespace

std::string_view AccessActionName(AccessAction a) {
  switch (a) {
    case AccessAction::kRead:
      return "read";
    case AccessAction::kStop:
      return "stop";
    case AccessAction::kDelete:
      return "delete";
    case AccessAction::kResumeFrom:
      return "resume from";
    case AccessAction::kOpen:
      return "open";
  }
  return "use";
}

namespace {

// Why a caller whose role on run `ref` (owned by `owner`) is `role` may not
// `action` it: what only the owner does says so (run.owner_only); a role
// too low names it and the one needed (run.role_too_low); no role at all,
// whose it is (run.forbidden). The action in each language ({action} in
// English, {action_zh} in Chinese: a verb is not an argument one text can
// carry for both).
Status RunForbidden(const std::string& ref, const std::string& owner, AccessAction action,
                    Role role = Role::kNone) {
  const std::string name(AccessActionName(action));
  std::string id = "run.action." + name;
  std::replace(id.begin(), id.end(), ' ', '_');
  MsgArgs args = {
      {"run", ref}, {"owner", owner}, {"action", name}, {"action_zh", Tr(id, Lang::kZh)}};
  const Role needed = RoleNeeded(action);
  if (needed == Role::kOwner) return Status::Msg(Code::kPermissionDenied, "run.owner_only", args);
  if (role == Role::kNone) return Status::Msg(Code::kPermissionDenied, "run.forbidden", args);
  args.push_back({"role", std::string(RoleName(role))});
  args.push_back({"needed", std::string(RoleName(needed))});
  return Status::Msg(Code::kPermissionDenied, "run.role_too_low", args);
}

}  // namespace

// `resume_from` names a run the caller may read; stored as its id. A spec
// without a checkpoint directory takes the resumed run's.
Status Daemon::ResolveResumeFrom(const Caller& caller, run::RunSpec& spec) {
  if (spec.resume_from.empty()) return Status::OK();
  ASSIGN_OR_RETURN(RunRecord from, store_->Resolve(spec.resume_from, caller.uid));
  if (!caller.admin && caller.uid != from.uid) {
    return RunForbidden(spec.resume_from, from.user, AccessAction::kResumeFrom);
  }
  if (spec.checkpoint_dir.empty()) {
    spec.checkpoint_dir = from.spec.checkpoint_dir;
    if (spec.keep_checkpoints == 0) spec.keep_checkpoints = from.spec.keep_checkpoints;
  }
  if (spec.checkpoint_dir.empty()) {
    return Status::Msg(Code::kInvalidArgument, "run.resume_no_checkpoints",
                       {{"run", spec.resume_from}});
  }
  spec.resume_from = from.id;
  return Status::OK();
}

// `image` names one of the caller's images (or the spec brings the id a
// run of theirs recorded: --like, a resubmission): the id is recorded on
// the run. Every kind: a job (torchrun included: the image's own torchrun,
// on one node), a notebook (the image's own Jupyter, notebooks.h), a
// service or a command deployment's replica (its relay beside the
// container, exec/monitor.cc). A model deployment's replica is Lathe's own
// server, which its spec never puts in an image (deployment_spec.h).
Status Daemon::ResolveImage(const Caller& caller, run::RunSpec& spec) {
  if (spec.image.empty() && spec.image_id.empty()) return Status::OK();
  if (!images_->available()) {
    return Status::Msg(Code::kInvalidArgument, "spec.images_unavailable",
                       {{"note", images_->note()}});
  }
  auto id = images_->Resolve(caller.uid, spec.image, spec.image_id);
  if (!id.ok() && id.status().code() == Code::kNotFound && spec.image_id.empty() &&
      IsRegistryRef(spec.image)) {
    // Not here yet: queued now, pulled while it waits (image_pulls.cc).
    spec.image = NormalizeImageName(spec.image);
    return Status::OK();
  }
  if (!id.ok()) return id.status();
  spec.image_id = *id;
  if (spec.image.empty()) spec.image = "sha256:" + spec.image_id.substr(0, 12);
  return Status::OK();
}

// ---- API-facing -------------------------------------------------------------------

// Where the run goes, stored in spec.pool: a configured pool's name, or ""
// for this machine. A job without `pool:` goes to the default pool; a
// notebook or a service without one stays here (their ports are proxied here).
Status Daemon::ResolvePool(run::RunSpec& spec) const {
  if (spec.pool.empty() && spec.type == run::RunKind::kJob) spec.pool = opts_.default_pool;
  if (spec.pool == run::kLocalPool) spec.pool.clear();
  if (spec.pool.empty() || opts_.pools.count(spec.pool)) return Status::OK();
  std::string allowed(run::kLocalPool);
  for (const auto& [name, b] : opts_.pools) allowed += ", " + name;
  return Status::Msg(Code::kInvalidArgument, "spec.unknown_pool",
                     {{"pool", spec.pool}, {"allowed", allowed}});
}

Status Daemon::CheckSubmittable(const run::RunSpec& spec, const Caller& caller) {
  exec::ExecutionBackend* backend = BackendFor(spec);  // ResolvePool found it
  if (spec.nodes > 1 && !backend->Caps().multi_node) {
    return Status::Msg(Code::kInvalidArgument, "spec.nodes_not_supported",
                       {{"nodes", std::to_string(spec.nodes)},
                        {"pool", spec.pool.empty() ? std::string(run::kLocalPool) : spec.pool}});
  }
  if ((!spec.image_id.empty() || !spec.image.empty()) && !backend->Caps().images) {
    return Status::Msg(Code::kInvalidArgument, "spec.image_pool",
                       {{"pool", spec.pool.empty() ? std::string(run::kLocalPool) : spec.pool},
                        {"note", backend->Caps().note}});
  }
  // A backend that places runs itself (a cluster) judges the fit itself.
  if (!backend->Caps().places_runs) {
    if (Status fit = CheckFitsNode(spec); !fit.ok()) {
      return spec.profile.empty() ? fit : AsProfileRefusal(spec, fit);
    }
  }
  if (run::IsNotebookSpec(spec) && !backend->Caps().places_runs) {
    RETURN_IF_ERROR(CheckNotebookSubmittable(spec));
  }
  RETURN_IF_ERROR(CheckQuotaFits(spec, caller));
  RETURN_IF_ERROR(secrets_->CheckSet(caller.uid, caller.user, run::SecretNames(spec)));
  exec::RunUser user;  // Check needs who, not their passwd entry
  user.uid = caller.uid;
  user.name = caller.user;
  return backend->Check(spec, user);
}

// Whether `spec` could ever be placed on this node, whatever else runs.
Status Daemon::CheckFitsNode(const run::RunSpec& spec) const {
  int gpus = static_cast<int>(inventory_.gpus.size());
  if (spec.gpus > 0 && gpus == 0) {
    return Status::Msg(Code::kInvalidArgument, "spec.no_gpus",
                       {{"requested", std::to_string(spec.gpus)},
                        {"why", inventory_.note.empty() ? inventory_.source : inventory_.note}});
  }
  if (spec.gpus > gpus) {
    return Status::Msg(
        Code::kInvalidArgument, "spec.too_many_gpus",
        {{"requested", std::to_string(spec.gpus)}, {"available", std::to_string(gpus)}});
  }
  if (spec.cpus > node_cpus_) {
    return Status::Msg(Code::kInvalidArgument, "spec.too_much",
                       {{"field", "cpus"},
                        {"requested", fmt::format("{:g}", spec.cpus)},
                        {"available", fmt::format("{:g}", node_cpus_)}});
  }
  if (spec.memory_bytes > node_memory_) {
    return Status::Msg(Code::kInvalidArgument, "spec.too_much",
                       {{"field", "memory"},
                        {"requested", FormatBytes(spec.memory_bytes)},
                        {"available", FormatBytes(node_memory_)}});
  }
  // A private /dev/shm is a tmpfs: its pages are memory, whatever size it claims.
  if (spec.shm_bytes > node_memory_) {
    return Status::Msg(Code::kInvalidArgument, "spec.too_much",
                       {{"field", "shm"},
                        {"requested", FormatBytes(spec.shm_bytes)},
                        {"available", FormatBytes(node_memory_)}});
  }
  const sched::NodeState node = NodeOf();
  if (spec.gpus > 0 && !spec.gpu_type.empty()) {
    size_t matching = sched::MatchingGpus(node, spec.gpu_type).size();
    if (matching < static_cast<size_t>(spec.gpus)) {
      std::string names;
      for (const auto& g : inventory_.gpus) names += (names.empty() ? "" : ", ") + g.name;
      return Status::Msg(Code::kInvalidArgument, "spec.gpu_type_unmatched",
                         {{"gpus", std::to_string(spec.gpus)},
                          {"gpu_type", spec.gpu_type},
                          {"matching", std::to_string(matching)},
                          {"names", names}});
    }
  }
  if (Status v = sched::Validate(node, {spec.gpus, spec.cpus, spec.memory_bytes, spec.gpu_type});
      !v.ok()) {
    return Status(Code::kInvalidArgument, v.message());  // GPUs marked unavailable
  }
  return Status::OK();
}

sched::NodeState Daemon::NodeOf() const {
  sched::NodeState node{static_cast<int>(inventory_.gpus.size()), {}, node_cpus_, node_memory_, {}};
  node.gpu_names.resize(inventory_.gpus.size());
  for (const auto& g : inventory_.gpus) {
    if (g.index >= 0 && static_cast<size_t>(g.index) < node.gpu_names.size()) {
      node.gpu_names[static_cast<size_t>(g.index)] = g.name;
    }
  }
  return node;
}

// The profile's name goes with the field: the person named the profile, not
// the field, and may not know what it holds.
Status Daemon::AsProfileRefusal(const run::RunSpec& spec, const Status& why) const {
  auto arg = [&](std::string_view key) {
    for (const auto& a : why.args()) {
      if (a.key == key) return a.value;
    }
    return std::string();
  };
  const std::string& id = why.msg_id();
  if (id == "spec.gpu_type_unmatched") {
    return Status::Msg(Code::kInvalidArgument, "profile.gpu_type_unmatched",
                       {{"profile", spec.profile},
                        {"gpus", arg("gpus")},
                        {"gpu_type", arg("gpu_type")},
                        {"matching", arg("matching")},
                        {"names", arg("names")}});
  }
  if (id == "spec.too_many_gpus" || id == "spec.no_gpus" || id == "spec.too_much") {
    return Status::Msg(Code::kInvalidArgument, "profile.unsatisfiable",
                       {{"profile", spec.profile},
                        {"field", id == "spec.too_much" ? arg("field") : "gpus"},
                        {"requested", arg("requested")},
                        {"available", id == "spec.no_gpus" ? "0" : arg("available")}});
  }
  return why;
}

Result<Json> Daemon::ResolveProfile(const Json& spec_json, std::vector<std::string>& filled) const {
  return run::ResolveProfile(opts_.profiles, spec_json, filled);
}

std::string Daemon::UserCacheDir(uid_t uid) const {
  return (std::filesystem::path(paths_.home).lexically_normal() / "deployments" / "users" /
          std::to_string(uid))
      .string();
}

// The paths a spec names, checked with the submitter's identity (see
// user_paths.h): the daemon acts on them for that user later.
Status Daemon::CheckPaths(const run::RunSpec& spec, const Caller& caller) const {
  const os::AccessAs as = ActingAs(caller.uid, caller.uid);
  // A relative workdir is inside a clone; a replica's may be its user's own
  // model cache (UserCacheDir), entered as that user.
  const bool own_cache = run::IsServiceSpec(spec) &&
                         PathWithin(std::filesystem::path(spec.workdir).lexically_normal().string(),
                                    UserCacheDir(caller.uid));
  if (!spec.workdir.empty() && spec.workdir[0] == '/' && !own_cache) {
    RETURN_IF_ERROR(reserved_->Check("workdir", spec.workdir, PathUse::kWorkdir, as));
  }
  if (!spec.workspace.dir.empty()) {
    RETURN_IF_ERROR(reserved_->Check("workspace.dir", spec.workspace.dir, PathUse::kWorkdir, as));
  }
  if (!spec.checkpoint_dir.empty()) {
    RETURN_IF_ERROR(
        reserved_->Check("checkpoints.dir", spec.checkpoint_dir, PathUse::kCheckpointDir, as));
  }
  return Status::OK();
}

void Daemon::PurgeExpiredKeys(bool now) {
  int64_t mono = clock_.MonotonicMs();
  if (!now && mono - keys_purged_at_ms_ < kKeyPurgeEveryMs) return;
  keys_purged_at_ms_ = mono;
  // The GPU ledger keeps what quotas and fair share read, and at least
  // kGpuLedgerKeepMs, so that turning them on later finds some history.
  if (auto gone =
          store_->PurgeGpuAttempts(clock_.NowMs() - std::max(UsageLookbackMs(), kGpuLedgerKeepMs));
      !gone.ok()) {
    spdlog::warn("gpu attempts: {}", gone.status().ToString());
  }
  auto n = store_->PurgeExpiredKeys(clock_.NowMs());
  if (!n.ok()) {
    spdlog::warn("idempotency keys: {}", n.status().ToString());
  } else if (*n > 0) {
    spdlog::info("forgot {} idempotency key(s) older than 24h", *n);
  }
}

Result<Submission> Daemon::Submit(const Caller& caller, const Json& spec_json,
                                  const std::string& idempotency_key) {
  std::vector<std::string> filled;  // by the spec's profile
  ASSIGN_OR_RETURN(Json resolved, ResolveProfile(spec_json, filled));
  ASSIGN_OR_RETURN(run::RunSpec spec, run::SpecFromJson(resolved));
  auto was_filled = [&](std::string_view f) {
    return std::find(filled.begin(), filled.end(), f) != filled.end();
  };
  if (was_filled("shm") || was_filled("nodes")) {
    run::RunSpec where = spec;
    const exec::ExecutionBackend* b = ResolvePool(where).ok() ? BackendFor(where) : nullptr;
    // A profile's shm where the run goes cannot have a private /dev/shm (a
    // Slurm pool, a daemon not running as root) is left out rather than
    // refusing the profile there; an shm the spec gives itself is refused.
    if (b != nullptr && was_filled("shm") && !b->Caps().private_shm) spec.shm_bytes = 0;
    // A profile's nodes are refused where they cannot be, as the spec's own
    // are (CheckSubmittable), naming the profile that asked for them.
    if (b != nullptr && was_filled("nodes") && spec.nodes > 1 && !b->Caps().multi_node) {
      return Status::Msg(
          Code::kInvalidArgument, "profile.nodes_not_supported",
          {{"profile", spec.profile},
           {"nodes", std::to_string(spec.nodes)},
           {"pool", where.pool.empty() ? std::string(run::kLocalPool) : where.pool}});
    }
  }
  return Submit(caller, std::move(spec), SubmitOptions{idempotency_key, /*replica=*/false});
}

Result<Submission> Daemon::Submit(const Caller& caller, run::RunSpec spec,
                                  const SubmitOptions& options) {
  const std::string& idempotency_key = options.idempotency_key;
  std::optional<InFlightKeys::Lease> lease =
      idempotency_key.empty() ? std::nullopt
                              : in_flight_keys_.TryAcquire(caller.uid, idempotency_key);
  if (!idempotency_key.empty() && !lease) {
    return Status::Msg(Code::kFailedPrecondition, "run.idempotency_in_flight",
                       {{"key", idempotency_key}});
  }
  if (run::IsServiceSpec(spec) && !options.replica) {  // only deployments make replicas
    return Status::Msg(Code::kInvalidArgument, "spec.service_deployment");
  }
  RETURN_IF_ERROR(ResolveImage(caller, spec));
  if (!spec.project.empty() && !options.replica) {
    RETURN_IF_ERROR(sharing_->CheckPutInto(caller, spec.project));
  }
  std::optional<state::IdempotencyKey> key;
  if (lease) key = state::IdempotencyKey{caller.uid, idempotency_key, SpecHash(spec)};
  MutexLock lock(&mu_);
  if (key) {  // before any check: the original run may hold the name, the GPUs...
    ASSIGN_OR_RETURN(std::optional<RunRecord> earlier, store_->FindByKey(*key, clock_.NowMs()));
    if (earlier) return Submission{std::move(*earlier), true};
  }
  RETURN_IF_ERROR(ResolvePool(spec));
  RETURN_IF_ERROR(CheckSubmittable(spec, caller));
  RETURN_IF_ERROR(ResolveResumeFrom(caller, spec));
  RETURN_IF_ERROR(CheckPaths(spec, caller));
  RunRecord r;
  r.id = NewId("r");
  r.name = spec.name.empty() ? r.id : spec.name;
  if (!spec.name.empty()) {
    ASSIGN_OR_RETURN(bool used, store_->NameInUse(spec.name, caller.uid));  // unique per user
    if (used) return Status::Msg(Code::kInvalidArgument, "run.name_in_use", {{"name", spec.name}});
  }
  r.uid = caller.uid;
  r.user = caller.user;
  r.kind = run::IsNotebookSpec(spec)  ? run::RunKind::kNotebook
           : run::IsServiceSpec(spec) ? run::RunKind::kService
                                      : run::RunKind::kJob;
  r.spec = std::move(spec);
  r.run_dir = paths_.runs + "/" + r.id;
  // The daemon's, never the user's: root's monitor writes the log and the
  // attempt records in it, so a user who could replace an entry (with a
  // symlink to a file of root's) would have root write there. The user
  // reads their log (0600, theirs) by name through the 0711 directory.
  if (Status made = os::MakeDirs(r.run_dir, paths_.system ? 0711 : 0700); !made.ok())
    return AsDiskFull(made);
  RETURN_IF_ERROR(os::Chmod(r.run_dir, paths_.system ? 0711 : 0700));
  if (r.kind == run::RunKind::kNotebook) {
    if (auto token = NotebookToken(r.run_dir); !token.ok()) return AsDiskFull(token.status());
  }
  RETURN_IF_ERROR(store_->Insert(r, clock_.NowMs(), key));
  queued_at_ms_[r.id] = r.created_at_ms;
  Notify();
  // The loop decides whether it is worth a pass (PassWorthRunning).
  submitted_.push_back(QueuedJobOf(r));
  if (!r.spec.image.empty() && r.spec.image_id.empty()) pass_needed_ = true;  // its pull starts
  submitted_kick_ = true;
  loop_cv_.SignalAll();
  return Submission{std::move(r), false};
}

Result<std::vector<RunRecord>> Daemon::List(bool all, int limit, int64_t* total, int64_t recent_ms,
                                            int64_t* total_all, int recent_limit,
                                            const state::RunFilter& filter) {
  MutexLock lock(&mu_);
  int64_t since = recent_ms > 0 ? clock_.NowMs() - recent_ms : 0;
  ASSIGN_OR_RETURN(*total, store_->Count(all, since, recent_limit, filter));
  if (total_all) {
    ASSIGN_OR_RETURN(*total_all, store_->Count(true));
  }
  return store_->List(all, limit, since, recent_limit, filter);
}

Result<int64_t> Daemon::LatestEventId() {
  MutexLock lock(&mu_);
  return store_->LatestEventId();
}

Result<int64_t> Daemon::CountRuns() {
  MutexLock lock(&mu_);
  return store_->Count(true);
}

Role Daemon::RoleOn(const Caller& caller, const RunRecord& r) {
  if (caller.admin || caller.uid == r.uid) return Role::kOwner;
  auto reach = sharing_->ReachOf(caller);
  return reach.ok() ? reach->RoleOf(RunObjectOf(r)) : Role::kNone;
}

// The owner and admins may do anything; a user the run is shared with (or a
// member of its project) what their role allows (sharing.h); nobody else
// anything.
Result<RunRecord> Daemon::Access(const Caller& caller, const std::string& ref,
                                 AccessAction action) {
  RunRecord r;
  {
    MutexLock lock(&mu_);
    ASSIGN_OR_RETURN(r, store_->Resolve(ref, caller.uid));
  }
  const Role role = RoleOn(caller, r);
  if (role < RoleNeeded(action)) return RunForbidden(ref, r.user, action, role);
  return r;
}

Result<RunRecord> Daemon::StopRun(const Caller& caller, const std::string& ref) {
  ASSIGN_OR_RETURN(RunRecord r, Access(caller, ref, AccessAction::kStop));
  MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(r, store_->Get(r.id));
  if (run::IsTerminal(r.state)) {
    return Status::Msg(Code::kFailedPrecondition, "run.already_finished",
                       {{"run", ref}, {"state", std::string(run::StateName(r.state))}});
  }
  RETURN_IF_ERROR(BeginStop(r, run::StopIntent::kUser, "stopped by " + caller.user));
  kicked_ = true;
  loop_cv_.SignalAll();
  return r;
}

Result<std::vector<state::EventRecord>> Daemon::Events(const std::string& run_id,
                                                       int64_t after_id) {
  MutexLock lock(&mu_);
  return store_->Events(run_id, after_id, kMaxEventsPerCall);
}

std::string Daemon::WaitingWhy(const std::string& run_id) {
  MutexLock lock(&mu_);
  if (auto p = pool_notes_.find(run_id); p != pool_notes_.end()) {
    return Tr("run.pool_waiting", Lang::kEn, {{"note", p->second}});
  }
  auto it = waiting_why_.find(run_id);
  return it == waiting_why_.end() ? "" : it->second.why;
}

std::string Daemon::WaitingOn(const std::string& run_id) {
  MutexLock lock(&mu_);
  if (pool_notes_.count(run_id)) return "pool";
  auto it = waiting_why_.find(run_id);
  return it == waiting_why_.end() ? "" : it->second.on;
}

bool Daemon::IsFinished(const std::string& run_id) {
  MutexLock lock(&mu_);
  auto r = store_->Get(run_id);
  return !r.ok() || run::IsTerminal(r->state);
}

std::set<std::string> Daemon::PinnedImageIds() {
  std::set<std::string> ids;
  for (const auto& [id, runs] : ImageRuns(std::nullopt)) ids.insert(id);
  // A command deployment's image, and its kept revisions' (a rollback runs
  // them again), even while it has no replica. Its store is opened here: the
  // deployments are a layer above the daemon.
  auto deployments = state::DeploymentStore::Open(paths_.db);
  Result<std::vector<state::DeploymentRecord>> all = deployments.status();
  if (deployments.ok()) all = (*deployments)->List();
  if (!all.ok()) {
    spdlog::warn("images: cannot read the deployments' images: {}", all.status().ToString());
    return ids;
  }
  for (const auto& d : *all) {
    if (d.spec.contains("image_id")) ids.insert(d.spec.value("image_id", ""));
    for (const auto& [v, rev] : d.plan.value("revisions", Json::object()).items()) {
      if (rev.is_object() && rev.contains("image_id")) ids.insert(rev.value("image_id", ""));
    }
  }
  ids.erase("");
  return ids;
}

std::map<std::string, std::vector<std::string>> Daemon::ImageRuns(std::optional<uid_t> uid) {
  MutexLock lock(&mu_);
  std::map<std::string, std::vector<std::string>> out;
  if (auto runs = store_->List(false); runs.ok()) {
    for (const auto& r : *runs) {
      if ((!uid || r.uid == *uid) && !r.spec.image_id.empty()) out[r.spec.image_id].push_back(r.id);
    }
  }
  return out;
}

Json Daemon::StatusJson() {
  MutexLock lock(&mu_);
  Json counts = Json::object();
  if (auto runs = store_->List(false); runs.ok()) {
    for (const auto& r : *runs)
      counts[std::string(run::StateName(r.state))] =
          counts.value(std::string(run::StateName(r.state)), 0) + 1;
  }
  return Json{{"version", LATHE_VERSION},
              {"pid", os::SelfPid()},
              {"mode", paths_.system ? "system" : "user"},
              {"home", paths_.home},
              {"socket", paths_.socket},
              {"user", user_},
              {"gpus",
               {{"count", inventory_.gpus.size()},
                {"source", inventory_.source},
                {"simulated", inventory_.simulated},
                {"note", inventory_.note},
                {"spec", opts_.gpus}}},
              {"grace_ms", opts_.kill_grace_ms},
              {"retention",
               {{"finished_runs_ms", live_.retention.finished_runs_ms},
                {"snapshots", live_.retention.snapshots}}},
              {"cgroups",
               {{"mode", cgroups_.mode == os::CgroupSupport::Mode::kV2   ? "v2"
                         : cgroups_.mode == os::CgroupSupport::Mode::kV1 ? "v1"
                                                                         : "none"},
                {"memory", cgroups_.memory},
                {"cpu", cgroups_.cpu},
                {"pids", cgroups_.pids},
                {"note", cgroups_.note}}},
              {"backend",
               {{"name", std::string(backend_->Name())},
                {"capabilities", exec::CapabilitiesToJson(backend_->Caps())}}},
              {"pools", PoolsJson()},
              {"default_pool",
               opts_.default_pool.empty() ? std::string(run::kLocalPool) : opts_.default_pool},
              {"state", {{"wal", store_->db().wal()}, {"note", store_->db().journal_note()}}},
              {"runs", counts}};
}

Json Daemon::GpusJson() {
  auto sample = gpu_source_->Sample();
  gpu::Inventory inv = sample.ok() ? *sample : inventory_;
  Json j = gpu::ToJson(inv);
  MutexLock lock(&mu_);
  std::map<int, std::string> owner;
  if (auto active =
          store_->InStates({RunState::kStarting, RunState::kRunning, RunState::kStopping});
      active.ok()) {
    for (const auto& r : *active) {
      for (int g : r.gpus) owner[g] = r.id;
    }
  }
  if (j.contains("gpus")) {
    for (auto& g : j["gpus"]) {
      int idx = g.value("index", -1);
      g["allocated_to"] = owner.count(idx) ? Json(owner[idx]) : Json(nullptr);
    }
  }
  return j;
}

GpuSlots Daemon::FreeGpuSlots() {
  GpuSlots slots;
  slots.total = static_cast<int>(inventory_.gpus.size());
  MutexLock lock(&mu_);
  std::set<int> held;
  if (auto active =
          store_->InStates({RunState::kStarting, RunState::kRunning, RunState::kStopping});
      active.ok()) {
    for (const auto& r : *active) held.insert(r.gpus.begin(), r.gpus.end());
  }
  for (const auto& g : inventory_.gpus) slots.free += held.count(g.index) ? 0 : 1;
  return slots;
}

bool Daemon::CanIsolateNetwork() const { return backend_->Caps().isolated_network; }

std::vector<PoolView> Daemon::Pools(const Caller& caller) {
  // opts_ and the backends are constant after construction: no lock to
  // describe them, which may block on a cluster.
  std::string default_pool =
      opts_.default_pool.empty() ? std::string(run::kLocalPool) : opts_.default_pool;
  std::vector<PoolView> pools;
  auto add = [&](const std::string& name, exec::ExecutionBackend* b) {
    PoolView v;
    v.name = name;
    v.type = std::string(b->Name());
    v.is_default = name == default_pool;
    v.caps = b->Caps();
    v.description = b->Describe();
    pools.push_back(std::move(v));
  };
  add(std::string(run::kLocalPool), backend_);
  for (const auto& [name, b] : opts_.pools) add(name, b);

  MutexLock lock(&mu_);
  auto runs = store_->InStates(
      {RunState::kQueued, RunState::kStarting, RunState::kRunning, RunState::kStopping});
  if (!runs.ok()) {
    spdlog::warn("pools: reading the runs: {}", runs.status().ToString());
    return pools;
  }
  std::sort(runs->begin(), runs->end(),
            [](const RunRecord& a, const RunRecord& b) { return a.seq < b.seq; });
  for (const RunRecord& r : *runs) {
    if (r.uid != caller.uid) continue;
    std::string pool = r.spec.pool.empty() ? std::string(run::kLocalPool) : r.spec.pool;
    for (PoolView& v : pools) {
      if (v.name != pool) continue;
      if (r.state == RunState::kQueued) v.queued.push_back(r.id);
      if (r.state == RunState::kStarting) v.starting.push_back(r.id);
      if (r.state == RunState::kRunning || r.state == RunState::kStopping) {
        v.running.push_back(r.id);
      }
    }
  }
  return pools;
}

// The pools for GET /status: this machine's first, then each configured one.
Json Daemon::PoolsJson() const {
  Json out = Json::array();
  out.push_back({{"name", std::string(run::kLocalPool)},
                 {"backend", std::string(backend_->Name())},
                 {"capabilities", exec::CapabilitiesToJson(backend_->Caps())}});
  for (const auto& [name, b] : opts_.pools) {
    out.push_back({{"name", name},
                   {"backend", std::string(b->Name())},
                   {"capabilities", exec::CapabilitiesToJson(b->Caps())}});
  }
  return out;
}

}  // namespace lathe::daemon

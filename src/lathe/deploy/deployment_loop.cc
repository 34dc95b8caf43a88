// The deployments' loop: observe each deployment's replicas and what the
// front says of them, let Reconcile decide, carry the decision out,
// and write the front's routes (deployments.h).
#include <grp.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <set>

#include "lathe/common/i18n.h"
#include "lathe/common/ids.h"
#include "lathe/common/owned_name.h"
#include "lathe/common/units.h"
#include "lathe/daemon/run_checkpoints.h"
#include "lathe/daemon/secret_files.h"
#include "lathe/deploy/deployments.h"
#include "lathe/deploy/reconcile.h"
#include "lathe/os/command.h"
#include "lathe/os/files.h"
#include "lathe/os/identity.h"
#include "lathe/os/users.h"
#include "lathe/run/event_text.h"
#include "lathe/run/log_reader.h"

namespace lathe::deploy {
namespace {

// The last line a replica printed (about its last 4 KiB), at most 300
// bytes; "" when it printed nothing. Replicas run on this machine, where
// their log is <run dir>/log (exec/local_backend.cc).
std::string LastLogLine(const std::string& log_path) {
  auto text = run::RenderLogEnd(log_path, 4096);
  if (!text.ok()) return "";
  std::string_view t = *text;
  while (!t.empty() && (t.back() == '\n' || t.back() == ' ' || t.back() == '\r'))
    t.remove_suffix(1);
  const size_t nl = t.rfind('\n');
  std::string line(nl == std::string_view::npos ? t : t.substr(nl + 1));
  constexpr size_t kMax = 300;
  if (line.size() > kMax) line = line.substr(0, kMax) + "...";
  return line;
}

// Ended replicas are looked at for this long after their end (a rollout's
// failure, a replacement); older ones are history.
constexpr int64_t kEndedLookbackMs = 10 * 60 * 1000;
constexpr const char* kHealthPath = "/v2/health/ready";
constexpr const char* kMetricsPath = "/metrics";
constexpr int64_t kHoldMs = 60'000;  // scale from zero: how long the front holds a request
constexpr int kMaxHeld = 100;

daemon::Caller OwnerOf(const state::DeploymentRecord& d) {
  return daemon::Caller{d.uid, d.user, false};
}

// The model's name as its replicas serve it: "digits/3", "alice/digits/3",
// "digits@prod" -> "digits".
std::string ModelOfVersion(const std::string& version) {
  std::string_view v = version;
  if (size_t at = v.find('@'); at != std::string_view::npos) {
    v = v.substr(0, at);
  } else if (size_t slash = v.rfind('/');
             slash != std::string_view::npos && PositiveNumber(v.substr(slash + 1))) {
    v = v.substr(0, slash);
  }
  return std::string(ShortName(v));
}

// The front's figures of one replica / deployment by id, from its /status.
struct FrontView {
  std::map<std::string, Json> replicas;
  std::map<std::string, Json> deployments;
};

FrontView ViewOf(const Json& status) {
  FrontView v;
  if (!status.is_object() || !status.contains("deployments")) return v;
  for (const auto& d : status["deployments"]) {
    v.deployments[d.value("name", "")] = d;
    if (!d.contains("replicas")) continue;
    for (const auto& r : d["replicas"]) v.replicas[r.value("id", "")] = r;
  }
  return v;
}

Goal GoalOf(const DeploymentSpec& spec, const std::string& version, const Json& plan,
            int free_slots, int64_t held, int64_t drain_timeout_ms) {
  Goal g;
  g.version = version;
  g.min_replicas = spec.min_replicas;
  g.max_replicas = spec.max_replicas;
  g.canary_percent = spec.canary_percent;
  g.promoted = plan.value("promoted", false);
  g.target_ongoing = spec.target_ongoing;
  g.upscale_delay_ms = spec.upscale_delay_ms;
  g.downscale_delay_ms = spec.downscale_delay_ms;
  g.zero_grace_ms = spec.zero_grace_ms;
  g.ready_timeout_ms = spec.ready_timeout_ms;
  g.drain_timeout_ms = drain_timeout_ms;
  g.free_slots = free_slots;
  g.held_requests = held;
  return g;
}

}  // namespace

GatewayConfig Deployments::GatewayConfigFor() {
  GatewayConfig c;
  c.dir = runs_.paths().home + "/deployments/gateway";
  c.self_exe = runs_.self_exe();
  c.listen = opts_.listen;
  c.tls_cert = opts_.tls_cert;
  c.tls_key = opts_.tls_key;
  if (os::IsRoot()) {
    // The front runs unprivileged, as a system user of its own: the
    // replicas' socket directories let its group in and nobody else.
    auto u = os::LookupUserByName(opts_.gateway_user);
    if (!u.ok()) {
      auto made =
          os::RunCommand({"useradd", "--system", "--user-group", "--no-create-home", "--home-dir",
                          "/nonexistent", "--shell", "/usr/sbin/nologin", opts_.gateway_user},
                         30'000);
      if (made.ok() && made->exit_code == 0) {
        spdlog::info("created the system user {} for the deployments' front", opts_.gateway_user);
      }
      u = os::LookupUserByName(opts_.gateway_user);
    }
    if (u.ok()) {
      c.uid = u->uid;
      c.gid = u->gid;
    } else {
      spdlog::warn("deployments: no user {} for the front ({}); it runs as nobody",
                   opts_.gateway_user, u.status().ToString());
      c.uid = 65534;
      c.gid = 65534;
    }
  }
  return c;
}

void Deployments::Loop() {
  MutexLock lock(&mu_);
  while (!stopping_) {
    // A tick every tick_ms, or at once when kicked (what wait_for with a
    // predicate does, spelled out: the analysis does not see mu_ held in a lambda).
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::milliseconds(opts_.tick_ms);
    while (!stopping_ && !kicked_) {
      if (!cv_.WaitUntil(&mu_, deadline)) break;
    }
    if (stopping_) break;
    kicked_ = false;
    const int64_t kicks = kicks_;
    lock.Unlock();
    Tick();
    lock.Lock();
    kicks_served_ = kicks;
    cv_.SignalAll();  // SyncFront
  }
}

namespace {

// How many more replicas of `spec` this machine could place now.
int FreeSlots(const DeploymentSpec& spec, const daemon::GpuSlots& gpus) {
  if (spec.resources.gpus <= 0) return kMaxReplicas;
  return gpus.free / spec.resources.gpus;
}

}  // namespace

void Deployments::Tick() {
  std::vector<state::DeploymentRecord> all;
  {
    MutexLock lock(&mu_);
    auto l = store_->List();
    if (!l.ok()) {
      spdlog::warn("deployments: {}", l.status().ToString());
      return;
    }
    all = std::move(*l);
  }
  if (all.empty() && !gateway_) return;  // no deployment yet: no front, no user for it
  if (!gateway_) {
    // The first deployment: the front's user is looked up (made) now.
    std::unique_ptr<FrontControl> gw = opts_.make_front
                                           ? opts_.make_front()
                                           : std::make_unique<GatewayControl>(GatewayConfigFor());
    MutexLock lock(&mu_);
    gateway_ = std::move(gw);
  }
  Json status = Json::object();
  Status front_up;
  if (!all.empty()) {
    front_up = gateway_->Ensure();
    bool new_reason = false;
    {
      MutexLock lock(&mu_);
      new_reason = front_up.message() != front_error_.message();
    }
    if (!front_up.ok() && new_reason) {
      spdlog::warn("deployments: the front: {}", front_up.ToString());  // once per new reason
    }
    auto s = front_up.ok() ? gateway_->FrontStatus() : Result<Json>(front_up);
    if (s.ok()) status = *s;
  }
  FrontView front = ViewOf(status);
  Json routes = {{"version", 1}, {"deployments", Json::array()}};
  const daemon::GpuSlots gpus = runs_.FreeGpuSlots();
  for (auto& d : all) {
    auto f = front.deployments.find(d.name);
    Json route = ReconcileOne(d, front.replicas,
                              f == front.deployments.end() ? Json::object() : f->second, gpus);
    if (!route.is_null()) routes["deployments"].push_back(std::move(route));
  }
  if (!all.empty() || gateway_->Running()) {
    if (Status w = gateway_->WriteRoutes(routes); !w.ok()) {
      spdlog::warn("deployments: routes: {}", w.ToString());
    }
  }
  MutexLock lock(&mu_);
  last_status_ = std::move(status);
  front_error_ = front_up;
}

Json Deployments::ReconcileOne(state::DeploymentRecord& d, const std::map<std::string, Json>& front,
                               const Json& front_deployment, const daemon::GpuSlots& gpus) {
  const int64_t now = clock_.NowMs();
  auto spec = DeploymentSpecFromJson(d.spec);
  if (!spec.ok()) {
    spdlog::warn("deployment {}: stored spec: {}", d.name, spec.status().ToString());
    return nullptr;
  }
  // 1. Observe: the replicas, what the front says of them, the version wanted.
  auto seen = Observe(d, *spec, front, now);
  if (!seen.ok()) return nullptr;
  RecordSignatures(seen->signatures);
  std::vector<const state::RunRecord*> live;
  for (const auto& r : seen->runs)
    if (!run::IsTerminal(r.state)) live.push_back(&r);
  if (d.removing) return Remove(d, live, front);
  // 2. Decide (the pure reconciler) and apply: start, drain, stop, events.
  auto state = StateFromJson(d.plan.value("state", Json::object()));
  if (state.ok()) {
    // What the reconciler drained stays draining, across daemon restarts too.
    for (auto& o : seen->obs) {
      if (o.phase != ReplicaObs::Phase::kEnded && state->drained.count(o.run)) {
        o.phase = ReplicaObs::Phase::kDraining;
      }
    }
  }
  Decision dec = Reconcile(GoalOf(*spec, seen->want, d.plan, FreeSlots(*spec, gpus),
                                  front_deployment.value("held", 0), opts_.drain_timeout_ms),
                           seen->obs, state.ok() ? *state : State(), now);
  Apply(d, *spec, dec, now);
  // 3. Persist what the reconciler keeps; then the route.
  const std::string serving = Persist(d, dec, seen->want, now);
  Json traffic = dec.traffic;
  if (traffic.empty() && !serving.empty()) traffic[serving] = 100;
  return RouteOf(d, *spec, live, traffic, dec.next.desired);
}

Result<Deployments::Observed> Deployments::Observe(const state::DeploymentRecord& d,
                                                   const DeploymentSpec& spec,
                                                   const std::map<std::string, Json>& front,
                                                   int64_t now) {
  Observed seen;
  ASSIGN_OR_RETURN(seen.runs, runs_.ReplicasOf(d.name, now - kEndedLookbackMs));
  // The version wanted: the alias followed now.
  seen.want = d.version;
  if (spec.is_command()) {
    seen.want = spec.revision_version();
  } else if (auto v = registry_.ResolveVersion(OwnerOf(d), spec.model); v.ok()) {
    seen.want = v->model + "/" + std::to_string(v->version);
  }
  // Why queued replicas wait (the daemon's lock: asked before ours is taken).
  std::map<std::string, std::string> waiting;
  for (const auto& r : seen.runs) {
    if (r.state == run::RunState::kQueued) waiting[r.id] = runs_.WaitingWhy(r.id);
  }
  MutexLock lock(&mu_);
  for (const auto& r : seen.runs) {
    ReplicaObs o;
    o.run = r.id;
    o.version = r.spec.deployment_version;
    auto f = front.find(r.id);
    const bool healthy = f != front.end() && f->second.value("healthy", false);
    if (f != front.end()) {
      o.in_flight = f->second.value("in_flight", 0);
      // The replica's own figures (lathe serve's /metrics), when it has them.
      o.queued = f->second.value("queued", 0);
      o.running = f->second.value("running", 0);
    }
    using P = ReplicaObs::Phase;
    if (run::IsTerminal(r.state)) {
      if (!ended_seen_.insert(r.id).second || r.finished_at_ms < started_ms_) continue;
      o.phase = P::kEnded;
      o.end_reason = r.reason.empty() ? std::string(run::StateName(r.state)) : r.reason;
      // Why it failed in its own words (a handler's exception, a missing
      // module): the last line of its output, into the events.
      if (r.state == run::RunState::kFailed && r.stop_intent == run::StopIntent::kNone) {
        if (std::string last = LastLogLine(r.run_dir + "/log"); !last.empty()) {
          o.end_reason += ": " + last;
        }
      }
      o.preempted = r.state == run::RunState::kPreempted;
      // Stopped by hand (`lathe stop`): its exit status (143) is the stop's,
      // not a failure; the deployment replaces it without a backoff.
      o.stopped = !o.preempted && r.stop_intent == run::StopIntent::kUser;
      draining_.erase(r.id);
      seen_ready_.erase(r.id);
      RemoveSocketDir(r);
    } else if (r.state == run::RunState::kQueued || r.state == run::RunState::kStarting) {
      o.phase = P::kPending;
      o.preempted = r.preemptions > 0;
      if (auto w = waiting.find(r.id); w != waiting.end()) o.waiting = w->second;
    } else if (r.state == run::RunState::kStopping && r.stop_intent == run::StopIntent::kPreempt &&
               !draining_.count(r.id)) {
      // Being preempted: it is requeued the moment it has stopped, so it
      // is a pending replica already, not one to replace.
      o.phase = P::kPending;
      o.preempted = true;
    } else if (r.state == run::RunState::kStopping || draining_.count(r.id)) {
      o.phase = P::kDraining;
    } else if (healthy) {
      o.phase = P::kReady;
      seen_ready_.insert(r.id);
      const Json meta = f->second.value("metadata", Json());
      if (!spec.is_command() && meta.is_object() && !signature_seen_.count(o.version)) {
        seen.signatures.emplace(o.version, meta);
      }
    } else {
      o.phase = seen_ready_.count(r.id) ? P::kUnready : P::kStarting;
    }
    auto& since = phase_since_[r.id];
    if (since.first != static_cast<int>(o.phase) || since.second == 0) {
      since = {static_cast<int>(o.phase), now};
    }
    o.phase_since_ms = since.second;
    seen.obs.push_back(std::move(o));
  }
  return seen;
}

void Deployments::Apply(const state::DeploymentRecord& d, const DeploymentSpec& spec, Decision& dec,
                        int64_t now) {
  for (const auto& [version, n] : dec.start) {
    for (int i = 0; i < n; ++i) {
      Status s = StartReplica(d, spec, version);
      if (s.ok()) continue;
      // Refused before any replica ran: the version waits the crash-loop
      // backoff as after a crash, rather than being tried at every tick.
      const int64_t delay_ms = NoteRefusedStart(dec.next, version, s.message(), now);
      MutexLock lock(&mu_);
      // Best effort: an event only tells; what it tells of is stored already.
      (void)AddEvent(d.name, "warning", "deploy.start_refused",
                     {{"version", version},
                      {"detail", s.message()},
                      {"delay", FormatDuration(std::chrono::milliseconds(delay_ms))}});
      break;
    }
  }
  {
    MutexLock lock(&mu_);
    for (const auto& id : dec.drain) draining_.emplace(id, now);
    for (const auto& [id, at] : dec.next.drained) draining_.emplace(id, at);
    for (const auto& e : dec.events) {
      Json args = Json::object();
      for (const auto& a : e.args) args[a.key] = a.value;
      // Best effort: an event only tells; what it tells of is stored already.
      (void)AddEvent(d.name, e.level, e.msg_id, args);
    }
  }
  daemon::Caller daemon_caller{runs_.uid(), "deployment " + d.name, true};
  // Best effort: a replica that ended meanwhile needs no stop; the next tick looks again.
  for (const auto& id : dec.stop) (void)runs_.StopRun(daemon_caller, id);
}

std::string Deployments::Persist(state::DeploymentRecord& d, const Decision& dec,
                                 const std::string& want, int64_t now) {
  // What is kept: the reconciler's state, the traffic split, promotion, and
  // the version the spec names now (an alias followed), which differs from
  // the one serving while a rollout runs or after a rollback.
  Json reason_args = Json::object();
  for (const auto& a : dec.reason_args) reason_args[a.key] = a.value;
  Json next = {{"state", deploy::ToJson(dec.next)},
               {"promoted", d.plan.value("promoted", false)},
               {"traffic", dec.traffic},
               {"reason_id", dec.reason_id},
               {"reason_args", reason_args},
               {"wanted", want}};
  if (d.plan.contains("revisions")) next["revisions"] = d.plan["revisions"];
  std::string serving = dec.next.stable_version.empty() ? d.version : dec.next.stable_version;
  if (next == d.plan && dec.health == d.health && dec.reason == d.reason && serving == d.version) {
    return serving;
  }
  MutexLock lock(&mu_);
  // The API may have changed the record since this tick read it (a PATCH):
  // its spec and what it keeps in the plan are kept; the next tick acts on
  // them.
  if (auto fresh = store_->Get(d.name); fresh.ok() && fresh->has_value()) {
    for (const char* k : {"promoted", "revisions"}) {
      if ((*fresh)->plan.contains(k)) next[k] = (*fresh)->plan[k];
    }
    d.spec = (*fresh)->spec;
    d.removing = (*fresh)->removing;
  }
  d.plan = next;
  d.health = dec.health;
  d.reason = dec.reason;
  d.version = serving;
  d.updated_at_ms = now;
  if (Status u = store_->Update(d); !u.ok() && u.code() != Code::kNotFound) {
    spdlog::warn("deployment {}: {}", d.name, u.ToString());
  }
  return serving;
}

// A version's inputs and outputs, while the registry has none, from what a
// ready replica of it says (its KServe v2 model metadata, read by the front).
void Deployments::RecordSignatures(const std::map<std::string, Json>& signatures) {
  for (const auto& [version, meta] : signatures) {
    auto set = registry_.RecordSignature(version, meta.value("inputs", Json()),
                                         meta.value("outputs", Json()));
    if (!set.ok()) {
      spdlog::warn("model {}: signature: {}", version, set.status().ToString());
      continue;
    }
    MutexLock lock(&mu_);
    signature_seen_.insert(version);
  }
}

Json Deployments::RouteOf(const state::DeploymentRecord& d, const DeploymentSpec& spec,
                          const std::vector<const state::RunRecord*>& live, const Json& traffic,
                          int desired) {
  Json keys = Json::array();
  MutexLock lock(&mu_);
  if (auto ks = keys_->List({state::CredentialKind::kDeployKey, std::nullopt, d.name, 0});
      ks.ok()) {
    for (const auto& k : *ks) {
      if (!k.LiveAt(clock_.NowMs())) continue;
      // A shared user's key opens it while the share (or the project) lasts.
      if (k.uid != d.uid && RoleOn(daemon::Caller{k.uid, k.user, false}, d) < daemon::Role::kUse)
        continue;
      keys.push_back({{"id", k.id}, {"sha256", k.secret_hash}, {"expires_ms", k.expires_at_ms}});
    }
  }
  Json replicas = Json::array();
  for (const auto* r : live) {
    if (r->state != run::RunState::kRunning && r->state != run::RunState::kStopping) continue;
    replicas.push_back(
        {{"id", r->id},
         {"socket", r->spec.deployment_socket},
         {"uid", r->uid},
         {"version", r->spec.deployment_version},
         {"draining", r->state == run::RunState::kStopping || draining_.count(r->id) > 0}});
    // The model's KServe v2 metadata, read by the front once the replica is
    // ready: the version's signature (RecordSignatures).
    if (!spec.is_command() && !r->spec.deployment_version.empty()) {
      replicas.back()["metadata_path"] = "/v2/models/" + ModelOfVersion(r->spec.deployment_version);
    }
  }
  return Json{{"name", d.name},
              {"ref", RefOf(d)},
              {"uid", d.uid},
              {"public", spec.is_public},
              {"keys", keys},
              {"idempotent", true},
              {"health_path", spec.is_command() ? spec.ready : kHealthPath},
              {"replicas_wanted", std::max(0, desired)},
              {"hold", spec.min_replicas == 0},
              {"hold_ms", kHoldMs},
              {"max_held", kMaxHeld},
              // lathe serve's queue depth; a command's program has no such figure.
              {"metrics_path", spec.is_command() ? "" : kMetricsPath},
              {"traffic", traffic.is_object() ? traffic : Json::object()},
              {"replicas", replicas}};
}

// A deployment being removed: drain its replicas, stop them once idle (or
// after the drain timeout), and when none is left forget it and its keys.
Json Deployments::Remove(state::DeploymentRecord& d,
                         const std::vector<const state::RunRecord*>& live,
                         const std::map<std::string, Json>& front) {
  const int64_t mono = clock_.MonotonicMs();
  daemon::Caller daemon_caller{runs_.uid(), "deployment " + d.name, true};
  std::vector<std::string> to_stop;
  {
    MutexLock lock(&mu_);
    for (const auto* r : live) {
      auto [it, fresh] = draining_.emplace(r->id, mono);
      auto f = front.find(r->id);
      int64_t in_flight = f == front.end() ? 0 : f->second.value("in_flight", 0);
      bool stop = r->state != run::RunState::kRunning || in_flight == 0 ||
                  mono - it->second > opts_.drain_timeout_ms;
      if (stop && r->state != run::RunState::kStopping) to_stop.push_back(r->id);
    }
  }
  // Best effort: a replica that ended meanwhile needs no stop; the next tick looks again.
  for (const auto& id : to_stop) (void)runs_.StopRun(daemon_caller, id);
  if (live.empty()) {
    PruneCache(d);
    MutexLock lock(&mu_);
    // Its keys before its record: keys left without their deployment would
    // pass for a later one of the same name. A failure keeps both for the next tick.
    if (auto k = keys_->DeleteScope(state::CredentialKind::kDeployKey, d.name); !k.ok()) {
      spdlog::warn("deployment {}: its keys: {}", d.name, k.status().ToString());
      return nullptr;
    }
    if (Status s = store_->Delete(d.name); !s.ok())
      spdlog::warn("deployment {}: {}", d.name, s.ToString());
    runs_.sharing().Forget("deployment", d.name);  // a new one of that name starts unshared
    spdlog::info("deployment {} removed", d.name);
    return nullptr;
  }
  auto spec = DeploymentSpecFromJson(d.spec);
  return RouteOf(d, *spec, live, d.plan.value("traffic", Json::object()), 0);
}

// Where `u`'s model cache (models/) and deployment repositories (repos/)
// live: ~/.lathe/deployments in a home directory of theirs; without one (no
// such directory, "/", or not theirs) the daemon's UserCacheDir, made now
// when `make` (root's directories 0711 up to it; it the user's, 0700) and
// refused when something else than their own directory is there.
Result<std::string> Deployments::CacheBase(const os::UserInfo& u, bool make) {
  bool home_is_theirs = false;
  if (!u.home.empty() && u.home != "/") {
    // Best effort: the body only looks: what it finds is in the variables it sets.
    (void)os::WithAccess(daemon::ActingAs(u.uid, u.gid), [&] {
      auto st = os::StatFile(u.home);
      home_is_theirs = st.ok() && S_ISDIR(st->mode) && st->uid == u.uid;
      return Status::OK();
    });
  }
  if (home_is_theirs) return u.home + "/.lathe/deployments";
  const std::string dir = runs_.UserCacheDir(u.uid);
  if (!make) return dir;
  const std::string users = dir.substr(0, dir.rfind('/'));
  RETURN_IF_ERROR(os::MakeDirs(users, 0711));
  RETURN_IF_ERROR(os::Chmod(runs_.paths().home + "/deployments", 0711));
  RETURN_IF_ERROR(os::Chmod(users, 0711));
  if (Status made = os::MakeDir(dir, 0700); !made.ok() && made.code() != Code::kAlreadyExists) {
    return made;
  }
  ASSIGN_OR_RETURN(os::FileStamp st, os::LstatFile(dir));
  if (!S_ISDIR(st.mode)) return ErrnoStatus(dir, ENOTDIR);
  if (st.uid != u.uid) {
    // Made just now by root (or left by a user since removed): the user's.
    if (!os::IsRoot() || st.uid != 0) return ErrnoStatus(dir, EPERM);
    RETURN_IF_ERROR(os::Chown(dir, u.uid, u.gid));
  }
  RETURN_IF_ERROR(os::Chmod(dir, 0700));
  return dir;
}

// The removed deployment's versions leave the owner's cache unless another
// of their deployments serves or wants them.
void Deployments::PruneCache(const state::DeploymentRecord& d) {
  auto versions_of = [](const state::DeploymentRecord& x) {
    std::set<std::string> v = {x.version};
    const Json st = x.plan.value("state", Json::object());
    for (const char* k : {"stable_version", "rolling_to", "goal_version"}) {
      if (st.contains(k) && st[k].is_string()) v.insert(st[k].get<std::string>());
    }
    v.erase("");
    return v;
  };
  std::set<std::string> mine = versions_of(d);
  {
    MutexLock lock(&mu_);
    auto all = store_->List();
    if (!all.ok()) return;
    for (const auto& other : *all) {
      if (other.name == d.name || other.uid != d.uid) continue;
      for (const auto& v : versions_of(other)) mine.erase(v);
    }
  }
  auto u = os::LookupUser(d.uid);
  if (!u.ok() || mine.empty()) return;
  auto base = CacheBase(*u, false);
  if (!base.ok()) return;
  const std::string root = *base + "/models";
  // Best effort: the body only looks: what it finds is in the variables it sets.
  (void)os::WithAccess(daemon::ActingAs(d.uid, u->gid), [&] {
    auto names = os::ListDir(root);
    if (!names.ok()) return Status::OK();
    // The deployment's own batching repositories (BatchingRepo).
    const std::string repos = root.substr(0, root.rfind('/')) + "/repos";
    if (auto own = os::ListDir(repos); own.ok()) {
      for (const auto& n : *own) {
        // Best effort: clean-up: what stays is removed again at the next start or sweep.
        if (n.rfind(FileSafeName(d.name) + "-", 0) == 0) (void)os::RemoveAll(repos + "/" + n);
      }
    }
    for (const auto& v : mine) {
      // <model>-<N>-<snapshot>: the version's entries whatever the snapshot.
      std::string prefix = ModelOfVersion(v) + "-" + v.substr(v.rfind('/') + 1) + "-";
      for (const auto& n : *names) {
        // Best effort: clean-up: what stays is removed again at the next start or sweep.
        if (n.rfind(prefix, 0) == 0) (void)os::RemoveAll(root + "/" + n);
      }
    }
    return Status::OK();
  });
}

std::string Deployments::SocketRoot() const { return runs_.paths().home + "/deployments/sockets"; }

void Deployments::ReclaimSocketDirs() {
  auto live = runs_.LiveReplicaSockets();
  auto names = os::ListDir(SocketRoot());
  if (!live.ok() || !names.ok()) return;  // none yet, or unreadable: nothing to reclaim
  std::set<std::string> kept;
  for (const auto& sock : *live) kept.insert(sock.substr(0, sock.rfind('/')));
  size_t removed = 0;
  for (const auto& name : *names) {
    const std::string dir = SocketRoot() + "/" + name;
    if (kept.count(dir) || !daemon::RemoveDaemonTree(dir).ok()) continue;
    ++removed;
  }
  if (removed > 0) spdlog::info("leftovers: removed {} replica socket directories", removed);
}

void Deployments::RemoveSocketDir(const state::RunRecord& r) {
  const std::string& sock = r.spec.deployment_socket;
  if (sock.rfind(SocketRoot() + "/", 0) != 0) return;  // only ours
  // Best effort: clean-up: what stays is removed again at the next start or sweep.
  (void)daemon::RemoveDaemonTree(
      sock.substr(0, sock.rfind('/')));  // the owner's socket, as the owner
}

Result<std::string> Deployments::EnsureCache(const state::DeploymentRecord& d,
                                             const std::string& version) {
  ASSIGN_OR_RETURN(os::UserInfo u, os::LookupUser(d.uid));
  const std::string model = ModelOfVersion(version);
  const std::string n = version.substr(version.rfind('/') + 1);
  // Named by the version's snapshot too: the bytes, whatever daemon (or
  // home) gave the version its number.
  ASSIGN_OR_RETURN(state::ModelVersionRecord v, registry_.ResolveVersion(OwnerOf(d), version));
  const std::string snapshot = v.snapshot.substr(0, 12);
  // In the owner's home (or, without one, their directory in the daemon's):
  // restored with their identity, into a directory of theirs.
  ASSIGN_OR_RETURN(std::string base, CacheBase(u, true));
  const std::string root = base + "/models";
  const std::string repo = root + "/" + model + "-" + n + "-" + snapshot;
  const std::string done = repo + "/.complete";
  const os::AccessAs as = daemon::ActingAs(d.uid, u.gid);
  bool have = false;
  RETURN_IF_ERROR(os::WithAccess(as, [&] {
    have = os::Exists(done);
    return have ? Status::OK() : os::MakeDirs(repo, 0755);
  }));
  if (have) return repo;
  RETURN_IF_ERROR(registry_.Export(OwnerOf(d), version, repo, /*force=*/true).status());
  RETURN_IF_ERROR(
      os::WithAccess(as, [&] { return os::WriteFileAtomic(done, version + "\n", 0444); }));
  return repo;
}

Result<std::string> Deployments::MakeSocketDir(const state::DeploymentRecord& d,
                                               const std::string& base) {
  const std::string dir = SocketRoot() + "/" + base;
  const GatewayConfig& gw = gateway_->config();
  RETURN_IF_ERROR(os::MakeDirs(SocketRoot(), 0711));
  RETURN_IF_ERROR(os::Chmod(runs_.paths().home + "/deployments", 0711));
  RETURN_IF_ERROR(os::Chmod(SocketRoot(), 0711));
  RETURN_IF_ERROR(os::MakeDir(dir, 0700));
  if (gw.uid) {
    // The owner creates the socket in it; the front's group may enter it
    // (setgid: the socket gets that group); nobody else can.
    RETURN_IF_ERROR(os::Chown(dir, d.uid, gw.gid));
    RETURN_IF_ERROR(os::Chmod(dir, 02750));
  } else if (os::IsRoot() && d.uid != 0) {
    RETURN_IF_ERROR(os::Chown(dir, d.uid, static_cast<gid_t>(-1)));
  }
  return dir;
}

// The deployment's own batching or device over a shared version: a
// repository of its own (as the owner, beside the cache) whose config.yaml is
// the version's plus the deployment's batching and instances, and whose
// version directory is a link to the cache's (no second copy of the files).
Result<std::string> Deployments::BatchingRepo(const state::DeploymentRecord& d,
                                              const DeploymentSpec& spec,
                                              const std::string& version,
                                              const std::string& cache) {
  ASSIGN_OR_RETURN(os::UserInfo u, os::LookupUser(d.uid));
  const std::string model = ModelOfVersion(version);
  const std::string n = version.substr(version.rfind('/') + 1);
  const std::string repo = cache.substr(0, cache.rfind('/')) + "/../repos/" + FileSafeName(d.name) +
                           "-" + cache.substr(cache.rfind('/') + 1);
  const std::string model_dir = repo + "/" + model;
  RETURN_IF_ERROR(os::WithAccess(daemon::ActingAs(d.uid, u.gid), [&]() -> Status {
    ASSIGN_OR_RETURN(std::string config,
                     os::ReadFileUpTo(cache + "/" + model + "/config.yaml", 1 << 20));
    if (spec.max_batch_size > 0) {
      config += "\n# The deployment's batching (lathe deploy --batching).\n";
      config += "max_batch_size: " + std::to_string(spec.max_batch_size) + "\n";
      config +=
          "dynamic_batching:\n  max_queue_delay_us: " + std::to_string(spec.max_queue_delay_us) +
          "\n";
    }
    if (!spec.device.empty()) {
      config += "\n# The deployment's device (lathe deploy --device).\n";
      config += "instances: [{count: 1, device: " + spec.device + "}]\n";
    }
    RETURN_IF_ERROR(os::MakeDirs(model_dir, 0755));
    RETURN_IF_ERROR(os::WriteFileAtomic(model_dir + "/config.yaml", config, 0644));
    const std::string link = model_dir + "/" + n;
    const std::string target = cache + "/" + model + "/" + n;
    std::error_code ec;
    if (std::filesystem::read_symlink(link, ec).string() == target) return Status::OK();
    (void)os::RemoveFileIfPresent(link);  // an older link; MakeSymlink says if one stays
    return os::MakeSymlink(target, link);
  }));
  return std::filesystem::path(repo).lexically_normal().string();
}

// What every replica's run has, whatever it runs: kind service, the
// deployment's resources and priority, requeued after preemption, its
// deployment, version and socket; submitted as the owner. `run` has the
// rest (name, command, env, ...). Its socket directory goes if it is refused.
Status Deployments::SubmitReplica(const state::DeploymentRecord& d, const DeploymentSpec& spec,
                                  const std::string& version, const std::string& dir,
                                  const std::string& socket, run::RunSpec run) {
  run.type = run::RunKind::kService;
  run.profile = spec.resources.profile;
  run.gpus = spec.resources.gpus;
  run.gpu_type = spec.resources.gpu_type;
  run.priority = spec.resources.priority;
  run.preemptible = spec.resources.preemptible;
  run.requeue = true;
  run.deployment = d.name;
  run.project = spec.project;  // its members reach it, its quotas count it
  run.deployment_version = version;
  run.deployment_socket = socket;
  run.cpus = std::max(0.0, spec.resources.cpus);
  run.memory_bytes = spec.resources.memory_bytes;
  auto sub = runs_.Submit(OwnerOf(d), std::move(run), daemon::SubmitOptions{"", /*replica=*/true});
  if (!sub.ok()) {
    // Best effort: clean-up: what stays is removed again at the next start or sweep.
    (void)os::RemoveAll(dir);
    return sub.status();
  }
  spdlog::info("deployment {}: replica {} of {} queued", d.name, sub->run.id, version);
  return Status::OK();
}

Status Deployments::StartReplica(const state::DeploymentRecord& d, const DeploymentSpec& spec,
                                 const std::string& version) {
  if (spec.is_command()) return StartCommandReplica(d, spec, version);
  ASSIGN_OR_RETURN(std::string repo, EnsureCache(d, version));
  if (spec.max_batch_size > 0 || !spec.device.empty()) {
    ASSIGN_OR_RETURN(repo, BatchingRepo(d, spec, version, repo));
  }
  const std::string base =
      std::string(ShortName(d.name)).substr(0, 56) + "-" + NewId("").substr(0, 6);
  ASSIGN_OR_RETURN(std::string dir, MakeSocketDir(d, base));
  const std::string socket = dir + "/serve.sock";
  run::RunSpec run;
  run.name = base;
  run.command = {runs_.self_exe(), "serve", "--repository", repo, "--socket", socket};
  run.workdir = repo;
  run.env = {{"LATHE_DEPLOYMENT", RefOf(d)}, {"LATHE_MODEL_VERSION_REF", version}};
  return SubmitReplica(d, spec, version, dir, socket, std::move(run));
}

Status Deployments::StartCommandReplica(const state::DeploymentRecord& d,
                                        const DeploymentSpec& spec, const std::string& version) {
  // The revision's own program: an older one's from the plan (a replica
  // replaced during a rollout, or after a rollback).
  DeploymentSpec rev = spec;
  if (version != spec.revision_version()) {
    const Json revs = d.plan.value("revisions", Json::object());
    if (!revs.contains(version)) {
      return Status::Msg(Code::kNotFound, "deploy.no_revision",
                         {{"name", d.name}, {"version", version}});
    }
    RETURN_IF_ERROR(RevisionFromJson(revs[version], rev));
  }
  const std::string base =
      std::string(ShortName(d.name)).substr(0, 56) + "-" + NewId("").substr(0, 6);
  ASSIGN_OR_RETURN(std::string dir, MakeSocketDir(d, base));
  const std::string socket = dir + "/serve.sock";
  run::RunSpec run;
  run.name = base;
  if (rev.image_id.empty()) {
    run.command = {runs_.self_exe(), "__relay", "--socket", socket, "--"};
    run.command.insert(run.command.end(), rev.command.begin(), rev.command.end());
  } else {
    // In an image the command is the container's; the relay (Lathe's, not
    // in the image) runs beside it, in the run's network (daemon.cc RequestFor).
    run.command = rev.command;
    run.image = rev.image;
    run.image_id = rev.image_id;
  }
  run.env = rev.env;
  run.env["LATHE_DEPLOYMENT"] = RefOf(d);
  run.env["LATHE_DEPLOYMENT_REVISION"] = version;
  // Isolated, the program's port exists only in the run's own network
  // namespace: nobody reaches it but through the relay's socket (a file,
  // shared across namespaces) and the front. A user-mode daemon cannot make
  // one: the port is then a free loopback port, reachable locally.
  run.ports = {run::PortSpec{"app", rev.port, ""}};
  run.network = runs_.CanIsolateNetwork() ? run::Network::kIsolated : run::Network::kHost;
  run.workdir = rev.workdir;
  return SubmitReplica(d, spec, version, dir, socket, std::move(run));
}

// The front's last word on deployment `name` ({} when it has no route for it).
Json Deployments::FrontStatusOf(const std::string& name) const {
  if (!last_status_.contains("deployments")) return Json::object();
  for (const auto& x : last_status_["deployments"]) {
    if (x.value("name", "") == name) return x;
  }
  return Json::object();
}

// The replicas' list, each with what the front says of it; `ready` counts
// the healthy ones not being drained.
Json Deployments::ReplicasJson(const state::DeploymentRecord& d, const Json& front, bool full,
                               int& ready) {
  std::map<std::string, Json> seen;
  if (front.contains("replicas")) {
    for (const auto& r : front["replicas"]) seen[r.value("id", "")] = r;
  }
  auto runs = runs_.ReplicasOf(d.name, full ? clock_.NowMs() - kEndedLookbackMs : clock_.NowMs());
  Json replicas = Json::array();
  ready = 0;
  if (!runs.ok()) return replicas;
  for (const auto& r : *runs) {
    auto f = seen.find(r.id);
    bool healthy =
        f != seen.end() && f->second.value("healthy", false) && r.state == run::RunState::kRunning;
    ready += healthy && !draining_.count(r.id) ? 1 : 0;
    Json x = {{"run", r.id},
              {"name", r.name},
              {"version", r.spec.deployment_version},
              {"state", std::string(run::StateName(r.state))},
              {"healthy", healthy},
              {"draining", draining_.count(r.id) > 0},
              {"gpus", r.gpus},
              {"reason", r.reason},
              {"reason_text", {{"en", r.reason}, {"zh", run::ReasonText(r.reason, Lang::kZh)}}}};
    if (f != seen.end()) {
      for (const char* k : {"in_flight", "queued", "running", "requests", "errors", "last_error"}) {
        if (f->second.contains(k)) x[k] = f->second[k];
      }
    }
    if (full || !run::IsTerminal(r.state)) replicas.push_back(std::move(x));
  }
  return replicas;
}

// A curl line that calls the deployment ("" while the front has no port).
std::string Deployments::CurlOf(const state::DeploymentRecord& d) {
  std::string model = ModelOfVersion(d.version.empty() ? d.spec.value("model", "") : d.version);
  std::string auth =
      d.spec.value("public", false) ? "" : "-H \"Authorization: Bearer $LATHE_DEPLOY_KEY\" ";
  const std::string ready_path = d.spec.value("ready", "/");
  const std::string url = UrlOf(d.name);
  return url.empty()                  ? ""
         : d.spec.contains("command") ? "curl " + auth + url + ready_path.substr(1)
                                      : "curl " + auth + url + "v2/models/" + model;
}

Result<Json> Deployments::ToJson(const state::DeploymentRecord& d, bool full) {
  auto spec = DeploymentSpecFromJson(d.spec);
  Json j = {{"name", std::string(ShortName(d.name))},
            {"ref", RefOf(d)},
            {"owner", d.user},
            {"uid", d.uid},
            {"model", d.spec.value("model", "")},
            {"command", d.spec.value("command", Json::array())},
            {"version", d.version},
            {"health", d.health},
            {"reason", d.reason},
            {"reason_id", d.plan.value("reason_id", "")},
            {"reason_args", d.plan.value("reason_args", Json::object())},
            {"public", d.spec.value("public", false)},
            {"removing", d.removing},
            {"url", UrlOf(d.name)},
            {"spec", d.spec},
            {"traffic", d.plan.value("traffic", Json::object())},
            {"created_at_ms", d.created_at_ms},
            {"updated_at_ms", d.updated_at_ms}};
  // The health's reason in both languages, for the web UI.
  const std::string reason_id = j.value("reason_id", "");
  j["reason_text"] = reason_id.empty() ? Json{{"en", d.reason}, {"zh", d.reason}}
                                       : BothTexts(reason_id, j["reason_args"]);
  if (!front_error_.ok() && !d.removing) {
    j["reason_text"] = {{"en", Localize(front_error_, Lang::kEn)},
                        {"zh", Localize(front_error_, Lang::kZh)}};
    // No front, no endpoint: that is the deployment's health, said at once
    // (a `deploy create --wait` ends with it rather than after its timeout).
    j["health"] = "failed";
    j["reason"] = front_error_.message();
    j["reason_id"] = front_error_.msg_id();
  }
  const Json& st = d.plan.value("state", Json::object());
  // What the spec names now (an alias followed) beside what serves: they
  // differ during a rollout and after a rollback, which says why.
  j["wanted"] = d.plan.value("wanted", d.version);
  const Json failed = st.value("failed_versions", Json::array());
  if (failed.is_array() && !failed.empty() && j["wanted"] != Json(d.version) &&
      std::find(failed.begin(), failed.end(), j["wanted"]) != failed.end()) {
    j["rolled_back"] = {{"version", j["wanted"]}, {"reason", st.value("failed_reason", "")}};
  }
  int desired = st.value("desired", -1);
  if (desired < 0 && spec.ok()) desired = spec->min_replicas;
  const Json front = FrontStatusOf(d.name);
  // The front has its route: the endpoint answers (before, it says 404).
  j["routed"] = !front.empty();
  for (const char* k : {"requests", "errors", "in_flight", "held", "rps", "p50_ms", "p99_ms"}) {
    if (front.contains(k)) j[k] = front[k];
  }
  int ready = 0;
  Json replicas = ReplicasJson(d, front, full, ready);
  if (d.removing) {
    // Being removed: what it served is no longer wanted, whatever the last
    // pass said of it.
    int live = 0;
    for (const auto& r : replicas) {
      live +=
          run::IsTerminal(run::StateFromName(r.value("state", "")).value_or(run::RunState::kQueued))
              ? 0
              : 1;
    }
    desired = 0;
    j["health"] = "removing";
    j["reason_id"] = "deploy.health.removing";
    j["reason_args"] = {{"live", std::to_string(live)}};
    j["reason"] = Tr("deploy.health.removing", Lang::kEn, MsgArgsFromJson(j["reason_args"]));
    j["reason_text"] = BothTexts("deploy.health.removing", j["reason_args"]);
  }
  j["replicas"] = {{"wanted", std::max(0, desired)}, {"ready", ready}, {"list", replicas}};
  j["curl"] = CurlOf(d);
  return j;
}

}  // namespace lathe::deploy

// Quotas and fair share in the daemon: what each user holds and has used,
// from the runs and the gpu_attempts ledger, handed to sched::Schedule
// (which decides, without I/O); the submission check; the status figures.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <set>

#include "lathe/common/i18n.h"
#include "lathe/common/units.h"
#include "lathe/daemon/daemon.h"
#include "lathe/daemon/disk_shares.h"
#include "lathe/os/disk_space.h"
#include "lathe/os/users.h"
#include "lathe/run/event_text.h"
#include "lathe/sched/usage.h"

namespace lathe::daemon {

using run::RunState;
using state::RunRecord;

namespace {

constexpr int64_t kGroupsTtlMs = 60'000;      // a user's groups, looked up again after
constexpr int64_t kLedgerRefreshMs = 60'000;  // the ledger, re-read at least this often
constexpr int64_t kProjectWindowMs = 30LL * 24 * 3600 * 1000;  // a project's usage shown
constexpr int kProjectWindowDays = 30;

std::string Number(double v) { return fmt::format("{:g}", v); }

std::string Hours(double h) { return fmt::format("{:.1f}", h); }

Json LimitJson(const std::optional<int>& v) { return v ? Json(*v) : Json(nullptr); }

sched::AttemptUsage UsageOf(const state::GpuAttempt& g) {
  return {g.user, g.gpus, g.started_at_ms,
          g.ended_at_ms > 0 ? std::optional<int64_t>(g.ended_at_ms) : std::nullopt};
}

}  // namespace

bool IsNotebook(const RunRecord& r) {
  return r.spec.type == run::RunKind::kNotebook || r.kind == run::RunKind::kNotebook;
}

sched::QueuedJob QueuedJobOf(const RunRecord& r) {
  sched::QueuedJob j;
  j.id = r.id;
  j.priority = static_cast<int>(r.spec.priority);
  j.seq = r.seq;
  j.req = {r.spec.gpus, r.spec.cpus, r.spec.memory_bytes, r.spec.gpu_type};
  j.user = r.user;
  j.notebook = IsNotebook(r);
  j.project = r.spec.project;
  if (r.spec.max_duration_ms > 0) j.max_duration_ms = r.spec.max_duration_ms;
  return j;
}

int64_t Daemon::UsageLookbackMs() const {
  const QuotaConfig& c = live_.quotas;
  // Project usage is shown over kProjectWindowMs whatever the quotas say.
  int64_t back = std::max(c.half_life_ms * sched::kFairShareHorizon, kProjectWindowMs);
  auto period = [&](const QuotaEntry& e) {
    if (e.gpu_hours) back = std::max(back, e.period_ms.value_or(kDefaultQuotaPeriodMs));
  };
  if (c.default_entry) period(*c.default_entry);
  for (const auto& [u, e] : c.users) period(e);
  for (const auto& [g, e] : c.groups) period(e);
  for (const auto& [p, e] : c.projects) period(e);
  return back;
}

const std::vector<state::GpuAttempt>& Daemon::GpuAttempts() {
  const int64_t mono = clock_.MonotonicMs();
  if (!gpu_attempts_stale_ && mono - gpu_attempts_at_ms_ < kLedgerRefreshMs) return gpu_attempts_;
  const int64_t back = UsageLookbackMs();
  if (back <= 0) {
    gpu_attempts_.clear();
  } else if (auto rows = store_->GpuAttemptsSince(clock_.NowMs() - back); rows.ok()) {
    gpu_attempts_ = std::move(rows).value();
  } else {
    spdlog::warn("quotas: {}", rows.status().ToString());  // the last figures stay
  }
  gpu_attempts_stale_ = false;
  gpu_attempts_at_ms_ = mono;
  return gpu_attempts_;
}

ResolvedQuota Daemon::QuotaOf(uid_t uid, const std::string& user) {
  const int64_t mono = clock_.MonotonicMs();
  auto it = groups_.find(uid);
  if (it == groups_.end() || mono - it->second.at_ms > kGroupsTtlMs) {
    GroupsSeen seen;
    seen.at_ms = mono;
    if (!live_.quotas.groups.empty()) {
      if (auto info = os::LookupUser(uid); info.ok()) seen.names = os::GroupNamesOf(*info);
    }
    it = groups_.insert_or_assign(uid, std::move(seen)).first;
  }
  return ResolveQuota(live_.quotas, user, it->second.names);
}

sched::Accounts Daemon::AccountsFor(const std::vector<const RunRecord*>& queued,
                                    const std::vector<RunRecord>& active) {
  const QuotaConfig& c = live_.quotas;
  sched::Accounts accounts;
  if (!c.HasLimits() && c.half_life_ms <= 0) return accounts;  // FIFO, no limits
  for (const RunRecord* r : queued) {
    if (accounts.count(r->user)) continue;
    accounts[r->user].limits = QuotaOf(r->uid, r->user).limits;
  }
  for (const RunRecord& r : active) {
    auto it = accounts.find(r.user);
    if (it == accounts.end()) continue;  // nothing of theirs waits
    it->second.gpus_held += r.spec.gpus;
    it->second.runs_held += 1;
    it->second.notebooks_held += IsNotebook(r) ? 1 : 0;
  }
  const int64_t now = clock_.NowMs();
  for (const state::GpuAttempt& g : GpuAttempts()) {
    auto it = accounts.find(g.user);
    if (it == accounts.end()) continue;
    const sched::AttemptUsage a = UsageOf(g);
    sched::Account& acc = it->second;
    if (acc.limits.gpu_hours) acc.gpu_hours_used += sched::GpuHoursIn(a, now, acc.limits.period_ms);
    if (c.half_life_ms > 0) acc.share_usage += sched::DecayedGpuHours(a, now, c.half_life_ms);
  }
  return accounts;
}

sched::Accounts Daemon::ProjectAccountsFor(const std::vector<const RunRecord*>& queued,
                                           const std::vector<RunRecord>& active) {
  const QuotaConfig& c = live_.quotas;
  sched::Accounts projects;
  if (c.projects.empty()) return projects;
  for (const RunRecord* r : queued) {
    const std::string& p = r->spec.project;
    if (p.empty() || projects.count(p) || !c.projects.count(p)) continue;
    projects[p].limits = ProjectQuota(c, p);
  }
  if (projects.empty()) return projects;
  for (const RunRecord& r : active) {
    auto it = r.spec.project.empty() ? projects.end() : projects.find(r.spec.project);
    if (it == projects.end()) continue;
    it->second.gpus_held += r.spec.gpus;
    it->second.runs_held += 1;
    it->second.notebooks_held += IsNotebook(r) ? 1 : 0;
  }
  const int64_t now = clock_.NowMs();
  for (const state::GpuAttempt& g : GpuAttempts()) {
    auto it = g.project.empty() ? projects.end() : projects.find(g.project);
    if (it == projects.end() || !it->second.limits.gpu_hours) continue;
    it->second.gpu_hours_used += sched::GpuHoursIn(UsageOf(g), now, it->second.limits.period_ms);
  }
  return projects;
}

void Daemon::NoteWaiting(const sched::Decision& d) {
  waiting_why_.clear();
  std::set<std::string> on_quota;
  for (const sched::Waiting& w : d.waiting) {
    if (!w.quota) {
      waiting_why_[w.id] = {w.detail, sched::WaitReasonName(w.reason), ""};
      continue;
    }
    const sched::QuotaHit& h = *w.quota;
    // A project's limit has texts of its own (quota.wait.project_gpus, ...).
    const std::string kind =
        (h.project.empty() ? "" : "project_") + std::string(sched::QuotaKindName(h.kind));
    MsgArgs args{{"user", h.user},
                 {"project", h.project},
                 {"held", h.kind == sched::QuotaKind::kGpuHours ? Hours(h.held) : Number(h.held)},
                 {"limit", Number(h.limit)},
                 {"asked", Number(h.asked)},
                 {"period", FormatDuration(std::chrono::milliseconds(h.period_ms))}};
    std::string why = Tr("quota.wait." + kind, Lang::kEn, args);
    waiting_why_[w.id] = {why, sched::WaitReasonName(w.reason), h.user};
    on_quota.insert(w.id);
    auto noted = quota_noted_.find(w.id);
    if (noted != quota_noted_.end() && noted->second == kind) continue;
    quota_noted_[w.id] = kind;
    run::EventMessage m =
        run::MakeEventMessage("event.quota_wait", {{"reason", why}},
                              Json{{"quota", std::string(sched::QuotaKindName(h.kind))},
                                   {"held", h.held},
                                   {"limit", h.limit}});
    if (!h.project.empty()) m.data["project"] = h.project;
    // The reason nested in msg_args is rendered from the catalog in turn.
    m.data["msg_args"]["reason"] =
        Json{{"msg_id", "quota.wait." + kind}, {"msg_args", Json::object()}};
    for (const auto& a : args) m.data["msg_args"]["reason"]["msg_args"][a.key] = a.value;
    // Best effort: an event only tells; what it tells of is stored already.
    (void)store_->AddEvent(w.id, "info", m.message, m.data, clock_.NowMs());
    Notify();
  }
  for (auto it = quota_noted_.begin(); it != quota_noted_.end();) {
    it = on_quota.count(it->first) ? std::next(it) : quota_noted_.erase(it);
  }
}

namespace {

// The first of limits `l` that request `spec` could never fit, as
// too_big(field, what it asks, the limit); OK when it could fit them all.
// The same for a user's limits and a project's.
template <typename TooBig>
Status CheckLimitsFit(const run::RunSpec& spec, const sched::QuotaLimits& l, TooBig too_big) {
  if (l.gpus && spec.gpus > *l.gpus) {
    return too_big("gpus", fmt::format("{} GPUs", spec.gpus), fmt::format("{} at once", *l.gpus));
  }
  if (l.runs && *l.runs == 0) return too_big("runs", "1 run", "0 runs");
  if (l.notebooks && *l.notebooks == 0 && spec.type == run::RunKind::kNotebook) {
    return too_big("notebooks", "1 notebook", "0 notebooks");
  }
  if (l.gpu_hours && *l.gpu_hours <= 0 && spec.gpus > 0) {
    return too_big("gpu_hours", fmt::format("{} GPUs", spec.gpus), "0 GPU-hours");
  }
  return Status::OK();
}

// A request project `project`'s limits `l` could never let start.
Status CheckProjectFits(const run::RunSpec& spec, const std::string& project,
                        const sched::QuotaLimits& l) {
  return CheckLimitsFit(
      spec, l, [&](const char* field, const std::string& requested, const std::string& limit) {
        return Status::Msg(
            Code::kInvalidArgument, "quota.too_big_project",
            {{"field", field}, {"requested", requested}, {"project", project}, {"limit", limit}});
      });
}

}  // namespace

Status Daemon::CheckQuotaFits(const run::RunSpec& spec, const Caller& caller) {
  if (!live_.quotas.HasLimits()) return Status::OK();
  ResolvedQuota q = QuotaOf(caller.uid, caller.user);
  const sched::QuotaLimits& l = q.limits;
  auto too_big = [&](const char* field, const std::string& requested, const std::string& limit) {
    return Status::Msg(Code::kInvalidArgument, "quota.too_big",
                       {{"field", field},
                        {"requested", requested},
                        {"user", caller.user},
                        {"limit", limit},
                        {"entry", q.source[field]}});
  };
  RETURN_IF_ERROR(CheckLimitsFit(spec, l, too_big));
  if (q.disk_bytes) {  // the last count's figure (disk_shares.h): never a walk here
    const uint64_t used = disk_->Get().BytesOf(caller.uid);
    if (used >= *q.disk_bytes) {
      return Status::Msg(Code::kResourceExhausted, "quota.disk_full",
                         {{"user", caller.user},
                          {"used", FormatBytes(used)},
                          {"limit", FormatBytes(*q.disk_bytes)},
                          {"entry", q.source["disk"]}});
    }
  }
  if (spec.project.empty()) return Status::OK();
  return CheckProjectFits(spec, spec.project, ProjectQuota(live_.quotas, spec.project));
}

Json Daemon::QuotaJson(const Caller& caller) {
  const DiskShare disk = disk_->Get();
  MutexLock lock(&mu_);
  const QuotaConfig& c = live_.quotas;
  struct Row {
    uid_t uid = 0;
    int gpus = 0, runs = 0, notebooks = 0, queued = 0;
  };
  std::map<std::string, Row> users;
  if (!caller.admin) users[caller.user].uid = caller.uid;
  auto live = store_->InStates(
      {RunState::kQueued, RunState::kStarting, RunState::kRunning, RunState::kStopping});
  if (live.ok()) {
    for (const RunRecord& r : *live) {
      if (!caller.admin && r.uid != caller.uid) continue;
      Row& row = users[r.user];
      row.uid = r.uid;
      if (r.state == RunState::kQueued) {
        row.queued++;
        continue;
      }
      row.gpus += r.spec.gpus;
      row.runs++;
      row.notebooks += IsNotebook(r) ? 1 : 0;
    }
  }
  const std::vector<state::GpuAttempt>& attempts = GpuAttempts();
  if (caller.admin) {
    for (const auto& g : attempts) {
      if (!users.count(g.user)) users[g.user].uid = g.uid;
    }
    for (const auto& [name, e] : c.users) {
      if (users.count(name)) continue;
      auto info = os::LookupUserByName(name);
      users[name].uid = info.ok() ? info->uid : 0;
    }
  }
  const int64_t now = clock_.NowMs();
  Json out = Json::array();
  for (const auto& [user, row] : users) {
    ResolvedQuota q = QuotaOf(row.uid, user);
    double hours = 0, share = 0;
    for (const auto& g : attempts) {
      if (g.user != user) continue;
      const sched::AttemptUsage a = UsageOf(g);
      hours += sched::GpuHoursIn(a, now,
                                 q.limits.gpu_hours ? q.limits.period_ms : kDefaultQuotaPeriodMs);
      if (c.half_life_ms > 0) share += sched::DecayedGpuHours(a, now, c.half_life_ms);
    }
    int waiting = 0;
    for (const auto& [id, note] : waiting_why_) waiting += note.on == "quota" && note.user == user;
    Json sources = Json::object();
    for (const auto& [field, from] : q.source) sources[field] = from;
    out.push_back(
        Json{{"user", user},
             {"limits",
              {{"gpus", LimitJson(q.limits.gpus)},
               {"runs", LimitJson(q.limits.runs)},
               {"notebooks", LimitJson(q.limits.notebooks)},
               {"gpu_hours", q.limits.gpu_hours ? Json(*q.limits.gpu_hours) : Json(nullptr)},
               {"period_ms", q.limits.gpu_hours ? q.limits.period_ms : kDefaultQuotaPeriodMs},
               {"disk_bytes", q.disk_bytes ? Json(*q.disk_bytes) : Json(nullptr)}}},
             {"sources", sources},
             {"usage",
              {{"gpus", row.gpus},
               {"runs", row.runs},
               {"notebooks", row.notebooks},
               {"gpu_hours", hours},
               {"fair_share_gpu_hours", share},
               {"disk_bytes", disk.BytesOf(row.uid)}}},
             {"queued", row.queued},
             {"waiting_on_quota", waiting}});
  }
  return Json{{"fair_share", {{"half_life_ms", c.half_life_ms}}},
              {"limited", c.HasLimits()},
              {"users", out}};
}

Json Daemon::DiskJson(const Caller& caller) {
  Json out{{"home", paths_.home}};
  if (auto fs = os::StatFilesystem(paths_.home); fs.ok()) {
    out["size_bytes"] = fs->size_bytes;
    out["available_bytes"] = fs->available_bytes;
  }
  const DiskShare d = disk_->Get();
  out["counted_at_ms"] = d.at_ms;  // 0: the first count is not done yet
  Json users = Json::array();
  for (const auto& [uid, bytes] : d.bytes) {
    if (!caller.admin && uid != caller.uid) continue;
    auto info = os::LookupUser(uid);
    users.push_back(Json{
        {"uid", uid}, {"user", info.ok() ? info->name : std::to_string(uid)}, {"bytes", bytes}});
  }
  if (!caller.admin && users.empty() && d.at_ms > 0) {
    users.push_back(Json{{"uid", caller.uid}, {"user", caller.user}, {"bytes", 0}});
  }
  out["users"] = std::move(users);
  return out;
}

}  // namespace lathe::daemon

namespace lathe::daemon {

// What a project's runs hold now and used, per member: from the active runs
// and the cached ledger (GpuAttempts), as a user's quota figures are. Called
// for each of the caller's projects by every GET /status (the web UI's
// Overview polls it), so it reads no finished run.
Json Daemon::ProjectUsage(const std::string& project) {
  MutexLock lock(&mu_);
  const int64_t now = clock_.NowMs();
  int runs_active = 0, gpus_held = 0, notebooks_active = 0;
  if (auto active =
          store_->InStates({RunState::kStarting, RunState::kRunning, RunState::kStopping});
      active.ok()) {
    for (const RunRecord& r : *active) {
      if (r.spec.project != project) continue;
      ++runs_active;
      gpus_held += r.spec.gpus;
      notebooks_active += IsNotebook(r) ? 1 : 0;
    }
  }
  const sched::QuotaLimits limits = ProjectQuota(live_.quotas, project);
  const int64_t period_ms = limits.gpu_hours ? limits.period_ms : kDefaultQuotaPeriodMs;
  double gpu_hours = 0, in_period = 0;
  std::map<std::string, double> by_user;
  for (const state::GpuAttempt& g : GpuAttempts()) {
    if (g.project != project) continue;
    const sched::AttemptUsage a = UsageOf(g);
    const double h = sched::GpuHoursIn(a, now, kProjectWindowMs);
    gpu_hours += h;
    by_user[g.user] += h;
    in_period += sched::GpuHoursIn(a, now, period_ms);
  }
  Json users = Json::object();
  for (const auto& [u, h] : by_user) users[u] = h;
  return Json{{"window_days", kProjectWindowDays},    {"gpu_hours", gpu_hours},
              {"gpu_hours_by_user", users},           {"period_ms", period_ms},
              {"period_gpu_hours", in_period},        {"runs_active", runs_active},
              {"notebooks_active", notebooks_active}, {"gpus_held", gpus_held}};
}

Json Daemon::ProjectLimits(const std::string& project) {
  MutexLock lock(&mu_);
  const sched::QuotaLimits l = ProjectQuota(live_.quotas, project);
  return Json{{"gpus", LimitJson(l.gpus)},
              {"runs", LimitJson(l.runs)},
              {"notebooks", LimitJson(l.notebooks)},
              {"gpu_hours", l.gpu_hours ? Json(*l.gpu_hours) : Json(nullptr)},
              {"period_ms", l.gpu_hours ? l.period_ms : kDefaultQuotaPeriodMs}};
}

}  // namespace lathe::daemon

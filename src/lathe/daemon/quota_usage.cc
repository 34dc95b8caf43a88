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

std::string Number(double v) { return fmt::format("{:g}", v); }

std::string Hours(double h) { return fmt::format("{:.1f}", h); }

Json LimitJson(const std::optional<int>& v) { return v ? Json(*v) : Json(nullptr); }

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
  if (r.spec.max_duration_ms > 0) j.max_duration_ms = r.spec.max_duration_ms;
  return j;
}

int64_t Daemon::UsageLookbackMs() const {
  const QuotaConfig& c = live_.quotas;
  int64_t back = c.half_life_ms * sched::kFairShareHorizon;
  auto period = [&](const QuotaEntry& e) {
    if (e.gpu_hours) back = std::max(back, e.period_ms.value_or(kDefaultQuotaPeriodMs));
  };
  if (c.default_entry) period(*c.default_entry);
  for (const auto& [u, e] : c.users) period(e);
  for (const auto& [g, e] : c.groups) period(e);
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
    sched::AttemptUsage a{g.user, g.gpus, g.started_at_ms,
                          g.ended_at_ms > 0 ? std::optional<int64_t>(g.ended_at_ms) : std::nullopt};
    sched::Account& acc = it->second;
    if (acc.limits.gpu_hours) acc.gpu_hours_used += sched::GpuHoursIn(a, now, acc.limits.period_ms);
    if (c.half_life_ms > 0) acc.share_usage += sched::DecayedGpuHours(a, now, c.half_life_ms);
  }
  return accounts;
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
    const std::string kind = sched::QuotaKindName(h.kind);
    MsgArgs args{{"user", h.user},
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
                              Json{{"quota", kind}, {"held", h.held}, {"limit", h.limit}});
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
  return Status::OK();
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
      sched::AttemptUsage a{
          g.user, g.gpus, g.started_at_ms,
          g.ended_at_ms > 0 ? std::optional<int64_t>(g.ended_at_ms) : std::nullopt};
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

// What a project's runs hold now and used in the last 30 days, per member:
// from the runs and the gpu_attempts ledger, as a user's quota figures are.
Json Daemon::ProjectUsage(const std::string& project) {
  constexpr int64_t kWindowMs = 30LL * 24 * 3600 * 1000;
  MutexLock lock(&mu_);
  const int64_t now = clock_.NowMs();
  int runs_active = 0, gpus_held = 0;
  if (auto live = store_->List(false, 100'000); live.ok()) {
    for (const RunRecord& r : *live) {
      if (r.spec.project != project || !run::IsActive(r.state)) continue;
      ++runs_active;
      if (r.state == RunState::kRunning) gpus_held += r.spec.gpus;
    }
  }
  double gpu_hours = 0;
  std::map<std::string, double> by_user;
  std::map<std::string, bool> in_project;  // run id -> whether it names `project`
  if (auto rows = store_->GpuAttemptsSince(now - kWindowMs); rows.ok()) {
    for (const state::GpuAttempt& g : *rows) {
      auto it = in_project.find(g.run_id);
      if (it == in_project.end()) {
        auto r = store_->Get(g.run_id);
        it = in_project.emplace(g.run_id, r.ok() && r->spec.project == project).first;
      }
      if (!it->second) continue;
      sched::AttemptUsage a{
          g.user, g.gpus, g.started_at_ms,
          g.ended_at_ms > 0 ? std::optional<int64_t>(g.ended_at_ms) : std::nullopt};
      const double h = sched::GpuHoursIn(a, now, kWindowMs);
      gpu_hours += h;
      by_user[g.user] += h;
    }
  }
  Json users = Json::object();
  for (const auto& [u, h] : by_user) users[u] = h;
  return Json{{"window_days", 30},
              {"gpu_hours", gpu_hours},
              {"gpu_hours_by_user", users},
              {"runs_active", runs_active},
              {"gpus_held", gpus_held}};
}

}  // namespace lathe::daemon

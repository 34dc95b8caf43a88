#include "lathe/sched/scheduler.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <iterator>
#include <tuple>

#include "lathe/common/units.h"
#include "lathe/sched/pool.h"
#include "lathe/sched/preempt.h"
#include "lathe/sched/reservation.h"

namespace lathe::sched {
namespace {

// The working state of one Schedule call.
struct Book {
  Accounts accounts;  // the input's, plus this Decision's starts and claims
  Accounts projects;  // likewise, by project
  FreePool free;
  Amount releasing;             // unclaimed resources of stopping runs and victims
  std::vector<Holder> holders;  // running (not stopping, not victims) + started now
};

std::set<int> UsableGpus(const NodeState& node) {
  std::set<int> usable;
  for (int g = 0; g < node.gpu_count; ++g) usable.insert(g);
  for (int g : node.unavailable_gpus) usable.erase(g);
  return usable;
}

// What a running run holds. Each usable GPU counts for one run only (the first
// by id) even if the input lists it twice; cpus and memory are clamped at 0.
Amount Held(const RunningJob& r, const std::set<int>& usable, std::set<int>& owned) {
  Amount a = ToAmount(r.req);
  a.gpus = 0;
  for (int g : r.gpu_indices) {
    if (usable.count(g) && owned.insert(g).second) ++a.gpus;
  }
  return ClampNonNegative(a);
}

// Step 2: free pool, releasing pool and holders from the running runs.
Book MakeBook(const NodeState& node, const std::vector<RunningJob>& running) {
  std::vector<const RunningJob*> by_id;
  for (const RunningJob& r : running) by_id.push_back(&r);
  std::sort(by_id.begin(), by_id.end(), [](auto* a, auto* b) { return a->id < b->id; });

  Book b;
  b.free.gpus = UsableGpus(node);
  b.free.gpu_names = node.gpu_names;
  Amount total = ToAmount(Resources{0, node.cpus, node.memory_bytes});
  b.free.cpus = total.cpus;
  b.free.memory_bytes = total.memory_bytes;
  std::set<int> owned;
  for (const RunningJob* r : by_id) {
    Amount held = Held(*r, b.free.gpus, owned);
    b.free.cpus -= held.cpus;
    b.free.memory_bytes -= held.memory_bytes;
    if (r->stopping) {
      b.releasing += held;
    } else {
      b.holders.push_back(
          {r->id, r->priority, r->started_ms, r->preemptible, held, r->deadline_ms});
    }
  }
  for (int g : owned) b.free.gpus.erase(g);
  return b;
}

double ShareUsage(const Accounts& accounts, const std::string& user) {
  auto it = accounts.find(user);
  return it == accounts.end() ? 0.0 : it->second.share_usage;
}

// Step 1: sort by (priority desc, fair-share usage, seq, id); move impossible
// requests out.
std::vector<QueuedJob> SortAndFilter(const NodeState& node, std::vector<QueuedJob> queued,
                                     const Accounts& accounts, Decision* d) {
  std::sort(queued.begin(), queued.end(), [&](const QueuedJob& a, const QueuedJob& b) {
    double ua = ShareUsage(accounts, a.user), ub = ShareUsage(accounts, b.user);
    return std::tie(b.priority, ua, a.seq, a.id) < std::tie(a.priority, ub, b.seq, b.id);
  });
  std::vector<QueuedJob> ok;
  for (QueuedJob& j : queued) {
    Status st = Validate(node, j.req);
    if (st.ok()) {
      ok.push_back(std::move(j));
    } else {
      d->impossible.push_back({j.id, st.message()});
    }
  }
  return ok;
}

// What `j` starting (or claiming) adds to its user's and its project's accounts.
void Charge(const QueuedJob& j, Book& b) {
  auto add = [&](Accounts& accounts, const std::string& key) {
    auto it = accounts.find(key);
    if (key.empty() || it == accounts.end()) return;
    it->second.gpus_held += std::max(0, j.req.gpus);
    it->second.runs_held += 1;
    if (j.notebook) it->second.notebooks_held += 1;
  };
  add(b.accounts, j.user);
  add(b.projects, j.project);
}

std::string ProjectQuotaDetail(const QuotaHit& h) {
  switch (h.kind) {
    case QuotaKind::kGpus:
      return fmt::format("project {} holds {:g} of its {:g} GPUs; this run needs {:g}", h.project,
                         h.held, h.limit, h.asked);
    case QuotaKind::kRuns:
      return fmt::format("project {} has {:g} of its {:g} runs active", h.project, h.held, h.limit);
    case QuotaKind::kNotebooks:
      return fmt::format("project {} has {:g} of its {:g} notebooks running", h.project, h.held,
                         h.limit);
    case QuotaKind::kGpuHours:
      return fmt::format("project {} used {:.1f} of its {:g} GPU-hours in the last {}", h.project,
                         h.held, h.limit, FormatDuration(std::chrono::milliseconds(h.period_ms)));
  }
  return "";
}

std::string QuotaDetail(const QuotaHit& h) {
  if (!h.project.empty()) return ProjectQuotaDetail(h);
  switch (h.kind) {
    case QuotaKind::kGpus:
      return fmt::format("{} holds {:g} of their {:g} GPUs; this run needs {:g}", h.user, h.held,
                         h.limit, h.asked);
    case QuotaKind::kRuns:
      return fmt::format("{} has {:g} of their {:g} runs active", h.user, h.held, h.limit);
    case QuotaKind::kNotebooks:
      return fmt::format("{} has {:g} of their {:g} notebooks running", h.user, h.held, h.limit);
    case QuotaKind::kGpuHours:
      return fmt::format("{} used {:.1f} of their {:g} GPU-hours in the last {}", h.user, h.held,
                         h.limit, FormatDuration(std::chrono::milliseconds(h.period_ms)));
  }
  return "";
}

// Before every step: true (and `j` waits kQuota) when its quota holds it back.
bool HeldByQuota(const QueuedJob& j, const Book& b, Decision* d) {
  std::optional<QuotaHit> hit;
  if (auto it = b.accounts.find(j.user); it != b.accounts.end()) hit = CheckQuota(j, it->second);
  auto p = j.project.empty() ? b.projects.end() : b.projects.find(j.project);
  if (!hit && p != b.projects.end()) {
    hit = CheckQuota(j, p->second);
    if (hit) hit->project = j.project;
  }
  if (!hit) return false;
  d->waiting.push_back({j.id, WaitReason::kQuota, QuotaDetail(*hit), {}, hit});
  return true;
}

// `low` becomes `priority` when that is lower (Headroom's lowest priorities).
void KeepLowest(std::optional<int>& low, int priority) {
  if (!low || priority < *low) low = priority;
}

void Start(const QueuedJob& j, Book& b, int64_t now_ms, Decision* d) {
  Charge(j, b);
  d->start.push_back({j.id, b.free.Take(j.req)});
  b.holders.push_back(
      {j.id, j.priority, now_ms, false, ToAmount(j.req), EndTime(now_ms, j.max_duration_ms)});
  // Not a victim in this Decision, but it may be one once it runs.
  KeepLowest(d->headroom.lowest_preemptible, j.priority);
}

// Takes `need` out of releasing first, the rest out of the free pool.
// Requires free + releasing to cover `need`.
void Claim(const Amount& need, Book& b) {
  Amount rel = ClampNonNegative(b.releasing);
  Amount from_rel{std::min(rel.gpus, need.gpus), std::min(rel.cpus, need.cpus),
                  std::min(rel.memory_bytes, need.memory_bytes)};
  b.releasing -= from_rel;
  Amount rest = need - from_rel;
  for (int g : PickGpus(b.free.gpus, static_cast<int>(rest.gpus))) b.free.gpus.erase(g);
  b.free.cpus -= rest.cpus;
  b.free.memory_bytes -= rest.memory_bytes;
}

// Chooses victims for `j` and moves their resources to releasing. Returns
// their ids; empty when preemption cannot cover `j`.
std::vector<std::string> Preempt(const QueuedJob& j, Book& b, Decision* d) {
  Amount deficit = Shortfall(ToAmount(j.req), b.free.amount() + b.releasing);
  std::vector<size_t> victims = ChooseVictims(b.holders, j.priority, deficit);
  std::vector<std::string> ids;
  for (size_t i : victims) {
    ids.push_back(b.holders[i].id);
    b.releasing += b.holders[i].held;
  }
  std::sort(victims.rbegin(), victims.rend());
  for (size_t i : victims) b.holders.erase(b.holders.begin() + static_cast<std::ptrdiff_t>(i));
  d->preempt.insert(d->preempt.end(), ids.begin(), ids.end());
  return ids;
}

// Step 3 for one job. False when it can neither start nor claim: the head.
bool StartOrClaim(const QueuedJob& j, Book& b, int64_t now_ms, Decision* d) {
  if (b.free.Fits(j.req)) {
    Start(j, b, now_ms, d);
    return true;
  }
  Amount need = ToAmount(j.req);
  if (!j.req.gpu_type.empty() && j.req.gpus > 0) {  // typed: waits for its own GPUs only
    std::string detail = fmt::format("needs {} {} GPU{}, {} free", j.req.gpus, j.req.gpu_type,
                                     j.req.gpus == 1 ? "" : "s", b.free.GpusFor(j.req).size());
    Amount rest = need;
    rest.gpus = 0;
    if (std::string more = DescribeShortfall(rest, b.free.amount()); !more.empty()) {
      detail += "; " + more;
    }
    d->waiting.push_back({j.id, WaitReason::kResources, detail, {}, std::nullopt});
    return true;
  }
  if (Covers(b.free.amount() + b.releasing, need)) {
    Claim(need, b);
    Charge(j, b);
    d->waiting.push_back(
        {j.id,
         WaitReason::kReleasing,
         fmt::format("claimed {}; waiting for stopping runs to exit", Describe(need)),
         {},
         std::nullopt});
    KeepLowest(d->headroom.contested_priority, j.priority);  // a job sorted before it takes it
    return true;
  }
  std::vector<std::string> victims = Preempt(j, b, d);
  if (victims.empty()) return false;
  Claim(need, b);
  Charge(j, b);
  d->waiting.push_back({j.id, WaitReason::kPreempting,
                        fmt::format("preempting {}", fmt::join(victims, ", ")), victims,
                        std::nullopt});
  KeepLowest(d->headroom.contested_priority, j.priority);
  return true;
}

std::string HeadDetail(const Amount& need, const Amount& avail, const Shadow& s, int64_t now_ms) {
  std::string out = DescribeShortfall(need, avail);
  if (!s.waiting_on.empty()) {
    out += fmt::format("; waiting for {}", fmt::join(s.waiting_on, ", "));
  }
  if (s.shadow_ms) {
    out += fmt::format("; starts within {}",
                       FormatDuration(std::chrono::milliseconds(*s.shadow_ms - now_ms)));
  }
  return out;
}

// Step 4: the head's reservation.
Shadow Reserve(const QueuedJob& head, const Book& b, int64_t now_ms, Decision* d) {
  Amount need = ToAmount(head.req);
  Amount avail = b.free.amount() + b.releasing;
  Shadow s = ComputeShadow(need, avail, b.holders, now_ms);
  d->waiting.push_back(
      {head.id, WaitReason::kReserved, HeadDetail(need, avail, s, now_ms), {}, std::nullopt});
  return s;
}

// Step 5 for one job after the head.
void Backfill(const QueuedJob& j, const QueuedJob& head, Book& b, Shadow& s, int64_t now_ms,
              Decision* d) {
  if (HeldByQuota(j, b, d)) return;
  if (!b.free.Fits(j.req)) {
    d->waiting.push_back({j.id,
                          WaitReason::kResources,
                          DescribeShortfall(ToAmount(j.req), b.free.amount()),
                          {},
                          std::nullopt});
    return;
  }
  switch (CheckBackfill(j, s, now_ms)) {
    case BackfillVerdict::kUsesExtra:
      s.extra -= ToAmount(j.req);
      s.extra = ClampNonNegative(s.extra);
      [[fallthrough]];
    case BackfillVerdict::kEndsBeforeShadow:
      Start(j, b, now_ms, d);
      return;
    case BackfillVerdict::kWouldDelay:
      d->waiting.push_back({j.id,
                            WaitReason::kReservation,
                            fmt::format("behind the reservation for {}", head.id),
                            {},
                            std::nullopt});
      KeepLowest(d->headroom.contested_priority, head.priority);
      return;
  }
}

}  // namespace

const char* WaitReasonName(WaitReason r) {
  switch (r) {
    case WaitReason::kReserved:
      return "reserved";
    case WaitReason::kReleasing:
      return "releasing";
    case WaitReason::kPreempting:
      return "preempting";
    case WaitReason::kResources:
      return "resources";
    case WaitReason::kReservation:
      return "reservation";
    case WaitReason::kQuota:
      return "quota";
  }
  return "unknown";
}

const char* QuotaKindName(QuotaKind k) {
  switch (k) {
    case QuotaKind::kGpus:
      return "gpus";
    case QuotaKind::kRuns:
      return "runs";
    case QuotaKind::kNotebooks:
      return "notebooks";
    case QuotaKind::kGpuHours:
      return "gpu_hours";
  }
  return "unknown";
}

std::optional<QuotaHit> CheckQuota(const QueuedJob& j, const Account& a) {
  const QuotaLimits& l = a.limits;
  const int gpus = std::max(0, j.req.gpus);
  if (l.gpus && gpus > 0 && a.gpus_held + gpus > *l.gpus) {
    return QuotaHit{j.user,          QuotaKind::kGpus, double(a.gpus_held),
                    double(*l.gpus), double(gpus),     0};
  }
  if (l.runs && a.runs_held + 1 > *l.runs) {
    return QuotaHit{j.user, QuotaKind::kRuns, double(a.runs_held), double(*l.runs), 1, 0};
  }
  if (l.notebooks && j.notebook && a.notebooks_held + 1 > *l.notebooks) {
    return QuotaHit{
        j.user, QuotaKind::kNotebooks, double(a.notebooks_held), double(*l.notebooks), 1, 0};
  }
  if (l.gpu_hours && gpus > 0 && a.gpu_hours_used >= *l.gpu_hours) {
    return QuotaHit{j.user, QuotaKind::kGpuHours, a.gpu_hours_used, *l.gpu_hours, 0, l.period_ms};
  }
  return std::nullopt;
}

Decision Schedule(const NodeState& node, std::vector<QueuedJob> queued,
                  const std::vector<RunningJob>& running, int64_t now_ms, const Accounts& accounts,
                  const Accounts& projects) {
  Decision d;
  std::vector<QueuedJob> q = SortAndFilter(node, std::move(queued), accounts, &d);  // 1
  Book b = MakeBook(node, running);                                                 // 2
  b.accounts = accounts;
  b.projects = projects;
  size_t i = 0;
  for (; i < q.size(); ++i) {  // 3
    if (HeldByQuota(q[i], b, &d)) continue;
    if (!StartOrClaim(q[i], b, now_ms, &d)) break;
  }
  if (i < q.size()) {
    const QueuedJob& head = q[i];
    Shadow s = Reserve(head, b, now_ms, &d);                                           // 4
    for (size_t k = i + 1; k < q.size(); ++k) Backfill(q[k], head, b, s, now_ms, &d);  // 5
    d.reservation = Reservation{head.id, s.shadow_ms, ToResources(s.extra), s.waiting_on};
  }
  const Amount left = b.free.amount() + b.releasing;
  d.headroom.free_gpus = left.gpus;
  d.headroom.free_cpus = left.cpus;
  d.headroom.free_memory_bytes = left.memory_bytes;
  for (const Holder& h : b.holders) {
    if (h.preemptible) KeepLowest(d.headroom.lowest_preemptible, h.priority);
  }
  return d;
}

bool MightChange(const Headroom& h, const QueuedJob& j) {
  const Amount free{h.free_gpus, h.free_cpus, h.free_memory_bytes};
  if (Covers(free, ToAmount(j.req))) return true;  // starts, or claims what is released
  if (h.lowest_preemptible && j.priority > *h.lowest_preemptible) return true;  // preempts
  // Sorted before a claim, a preemption or the head (fair share may put an
  // equal priority first), it would take it over.
  if (h.contested_priority && j.priority >= *h.contested_priority) return true;
  return false;
}

std::string ShortfallFor(const Headroom& h, const QueuedJob& j) {
  return DescribeShortfall(ToAmount(j.req),
                           ClampNonNegative(Amount{h.free_gpus, h.free_cpus, h.free_memory_bytes}));
}

bool GpuTypeMatches(std::string_view gpu_name, std::string_view type) {
  auto lower = [](unsigned char c) { return static_cast<char>(std::tolower(c)); };
  std::string name, want;
  std::transform(gpu_name.begin(), gpu_name.end(), std::back_inserter(name), lower);
  std::transform(type.begin(), type.end(), std::back_inserter(want), lower);
  return name.find(want) != std::string::npos;
}

std::vector<int> MatchingGpus(const NodeState& node, std::string_view type) {
  std::vector<int> out;
  for (int g : UsableGpus(node)) {
    if (static_cast<size_t>(g) < node.gpu_names.size() &&
        GpuTypeMatches(node.gpu_names[static_cast<size_t>(g)], type)) {
      out.push_back(g);
    }
  }
  return out;
}

Status Validate(const NodeState& node, const Resources& req) {
  std::vector<std::string> errs;
  int usable = static_cast<int>(UsableGpus(node).size());
  if (req.gpus > 0 && !req.gpu_type.empty() && req.gpus <= usable) {
    size_t matching = MatchingGpus(node, req.gpu_type).size();
    if (matching < static_cast<size_t>(req.gpus)) {
      errs.push_back(fmt::format("gpu_type: requested {} {} GPU{}, this machine has {}", req.gpus,
                                 req.gpu_type, req.gpus == 1 ? "" : "s", matching));
    }
  }
  if (req.gpus < 0) {
    errs.push_back(fmt::format("gpus: must be 0 or more, got {}", req.gpus));
  } else if (req.gpus > node.gpu_count) {
    errs.push_back(
        fmt::format("gpus: requested {}, this machine has {}", req.gpus, node.gpu_count));
  } else if (req.gpus > usable) {
    errs.push_back(
        fmt::format("gpus: requested {}, this machine has {} but only {} usable ({} unavailable)",
                    req.gpus, node.gpu_count, usable, node.gpu_count - usable));
  }
  if (!std::isfinite(req.cpus) || req.cpus < 0) {
    errs.push_back(fmt::format("cpus: must be a number 0 or more, got {}", req.cpus));
  } else if (req.cpus > node.cpus + kCpuEpsilon) {
    errs.push_back(fmt::format("cpus: requested {:g}, this machine has {:g}", req.cpus, node.cpus));
  }
  if (req.memory_bytes > node.memory_bytes) {
    errs.push_back(fmt::format("memory: requested {}, this machine has {}",
                               FormatBytes(req.memory_bytes), FormatBytes(node.memory_bytes)));
  }
  if (errs.empty()) return Status::OK();
  return Status::InvalidArgument(fmt::format("{}", fmt::join(errs, "; ")));
}

std::string WhyWaiting(const Decision& d, const std::string& id) {
  for (const Waiting& w : d.waiting) {
    if (w.id == id) return w.detail;
  }
  for (const Unschedulable& u : d.impossible) {
    if (u.id == id) return u.reason;
  }
  return "";
}

}  // namespace lathe::sched

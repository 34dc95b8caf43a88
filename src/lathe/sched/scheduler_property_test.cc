// Randomized checks of the invariants stated in scheduler.h, on a few
// thousand generated states (fixed seed), and a multi-round simulation that
// checks the queue drains. The checks recompute resources with their own
// arithmetic (doubles), not with pool.h.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <set>

#include "lathe/sched/scheduler.h"
#include "lathe/sched/test_util/builders.h"

namespace lathe::sched {
namespace {

using namespace lathe::sched::testing;  // NOLINT

constexpr int64_t kNow = 10 * 60'000;
constexpr double kEps = 1e-6;

// ---------------------------------------------------------------- generator

class Gen {
 public:
  explicit Gen(uint32_t seed) : rng_(seed) {}

  int Int(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  bool Chance(double p) { return std::uniform_real_distribution<double>(0, 1)(rng_) < p; }
  template <typename T>
  T Pick(const std::vector<T>& v) {
    return v[static_cast<size_t>(Int(0, static_cast<int>(v.size()) - 1))];
  }

  NodeState Node() {
    NodeState n;
    n.gpu_count = Int(0, 8);
    for (int g = 0; g < n.gpu_count; ++g) {
      if (Chance(0.1)) n.unavailable_gpus.push_back(g);
    }
    if (Chance(0.05)) n.unavailable_gpus.push_back(n.gpu_count + 3);
    n.cpus = Pick<double>({0, 2, 8, 16, 64, 7.5});
    n.memory_bytes = Pick<uint64_t>({0, 16 * kGiB, 64 * kGiB, 256 * kGiB});
    return n;
  }

  Resources Req(const NodeState& n, double scale) {
    Resources r;
    r.gpus = Chance(0.3) ? 0 : Int(0, std::max(1, n.gpu_count / 2 + 1));
    if (Chance(0.05)) r.gpus = n.gpu_count + 1;  // impossible
    r.cpus =
        Chance(0.4) ? 0 : std::round(n.cpus * scale * Int(1, 10)) / 10.0 + Pick<double>({0, 0.5});
    r.memory_bytes =
        Chance(0.4)
            ? 0
            : static_cast<uint64_t>(static_cast<double>(n.memory_bytes) * scale * Int(1, 10) / 10);
    return r;
  }

  std::vector<RunningJob> Running(const NodeState& n) {
    std::vector<int> gpus;
    for (int g = 0; g < n.gpu_count; ++g) gpus.push_back(g);
    std::shuffle(gpus.begin(), gpus.end(), rng_);
    std::vector<RunningJob> out;
    int count = Int(0, 6);
    for (int i = 0; i < count; ++i) {
      RunningJob r;
      r.id = fmt::format("r{}", i);
      r.priority = Int(-1, 3);
      r.started_ms = Int(0, static_cast<int>(kNow));
      int k = std::min(static_cast<int>(gpus.size()), Int(0, 3));
      r.gpu_indices.assign(gpus.end() - k, gpus.end());
      gpus.resize(gpus.size() - static_cast<size_t>(k));
      r.req = Req(n, Chance(0.1) ? 0.6 : 0.25);  // sometimes over-committed
      r.req.gpus = k;
      if (Chance(0.6)) r.deadline_ms = kNow + Int(-5, 60) * kMinute;
      r.preemptible = Chance(0.8);
      r.stopping = Chance(0.2);
      out.push_back(r);
    }
    return out;
  }

  std::vector<QueuedJob> Queued(const NodeState& n) {
    std::vector<QueuedJob> out;
    int count = Int(0, 8);
    for (int i = 0; i < count; ++i) {
      QueuedJob j;
      j.id = fmt::format("q{}", i);
      j.priority = Int(-1, 3);
      j.seq = Int(0, 20);
      j.req = Req(n, 0.3);
      if (Chance(0.5)) j.max_duration_ms = Int(1, 60) * kMinute;
      j.user = Pick<std::string>({"", "u0", "u1", "u2"});
      j.notebook = Chance(0.2);
      out.push_back(j);
    }
    return out;
  }

  // Half the time none (no quotas, FIFO within a priority); else some users
  // with limits, what they hold and their fair-share usage.
  Accounts MakeAccounts() {
    Accounts out;
    if (Chance(0.5)) return out;
    for (const char* u : {"u0", "u1", "u2"}) {
      if (Chance(0.2)) continue;
      Account a;
      if (Chance(0.5)) a.limits.gpus = Int(0, 6);
      if (Chance(0.4)) a.limits.runs = Int(0, 4);
      if (Chance(0.3)) a.limits.notebooks = Int(0, 2);
      if (Chance(0.2)) {
        a.limits.gpu_hours = Int(0, 10);
        a.limits.period_ms = 7 * 24 * 60 * kMinute;
        a.gpu_hours_used = Int(0, 12);
      }
      a.gpus_held = Int(0, 4);
      a.runs_held = Int(0, 3);
      a.notebooks_held = Int(0, 1);
      a.share_usage = Pick<double>({0, 0.5, 3, 3, 40});
      out[u] = a;
    }
    return out;
  }

  std::mt19937& rng() { return rng_; }

 private:
  std::mt19937 rng_;
};

// ---------------------------------------------------------------- independent arithmetic

struct Vec {
  double gpus = 0, cpus = 0, mem = 0;
  Vec& operator+=(const Vec& o) {
    gpus += o.gpus, cpus += o.cpus, mem += o.mem;
    return *this;
  }
  Vec& operator-=(const Vec& o) {
    gpus -= o.gpus, cpus -= o.cpus, mem -= o.mem;
    return *this;
  }
};
Vec operator+(Vec a, const Vec& b) { return a += b; }
Vec operator-(Vec a, const Vec& b) { return a -= b; }

Vec Of(const Resources& r) { return {double(r.gpus), r.cpus, double(r.memory_bytes)}; }

// Every component asked for (> 0) is available.
bool Fits(const Vec& have, const Vec& need) {
  return (need.gpus <= 0 || have.gpus >= need.gpus) &&
         (need.cpus <= kEps || have.cpus + kEps >= need.cpus) &&
         (need.mem <= 0 || have.mem >= need.mem);
}

// Everything the checks need to know about one input.
struct World {
  NodeState node;
  std::vector<QueuedJob> queued;
  std::vector<RunningJob> running;
  int64_t now;
  std::set<int> usable;
  std::map<std::string, const QueuedJob*> job;
  std::map<std::string, const RunningJob*> run;

  Accounts accounts;

  World(NodeState n, std::vector<QueuedJob> q, std::vector<RunningJob> r, int64_t now_ms,
        Accounts a = {})
      : node(std::move(n)),
        queued(std::move(q)),
        running(std::move(r)),
        now(now_ms),
        accounts(std::move(a)) {
    for (int g = 0; g < node.gpu_count; ++g) usable.insert(g);
    for (int g : node.unavailable_gpus) usable.erase(g);
    for (const QueuedJob& j : queued) job[j.id] = &j;
    for (const RunningJob& x : running) run[x.id] = &x;
  }

  Vec Held(const RunningJob& r) const {
    Vec v{0, r.req.cpus, double(r.req.memory_bytes)};
    for (int g : r.gpu_indices) v.gpus += usable.count(g);
    return v;
  }
  // Free now: usable GPUs nobody holds, cpus and memory nobody uses.
  Vec FreeNow() const {
    Vec v{double(usable.size()), node.cpus, double(node.memory_bytes)};
    for (const RunningJob& r : running) v -= Held(r);
    return v;
  }
  Vec StoppingNow() const {
    Vec v;
    for (const RunningJob& r : running) {
      if (r.stopping) v += Held(r);
    }
    return v;
  }
  double Usage(const QueuedJob& j) const {
    auto it = accounts.find(j.user);
    return it == accounts.end() ? 0 : it->second.share_usage;
  }
  // The queue order: priority desc, fair-share usage, seq, id; impossible
  // ones left out.
  std::vector<const QueuedJob*> Order() const {
    std::vector<const QueuedJob*> out;
    for (const QueuedJob& j : queued) {
      if (Validate(node, j.req).ok()) out.push_back(&j);
    }
    std::sort(out.begin(), out.end(), [&](auto* a, auto* b) {
      if (a->priority != b->priority) return a->priority > b->priority;
      if (Usage(*a) != Usage(*b)) return Usage(*a) < Usage(*b);
      if (a->seq != b->seq) return a->seq < b->seq;
      return a->id < b->id;
    });
    return out;
  }
};

std::map<std::string, const Waiting*> WaitMap(const Decision& d) {
  std::map<std::string, const Waiting*> m;
  for (const Waiting& w : d.waiting) m[w.id] = &w;
  return m;
}

bool IsClaim(const Waiting* w) {
  return w && (w->reason == WaitReason::kReleasing || w->reason == WaitReason::kPreempting);
}

bool IsQuota(const Waiting* w) { return w && w->reason == WaitReason::kQuota; }

// ---------------------------------------------------------------- invariants

// Every queued job is in exactly one list; impossible means Validate fails.
void CheckPartition(const World& w, const Decision& d) {
  std::map<std::string, int> seen;
  for (const Placement& p : d.start) ++seen[p.id];
  for (const Waiting& x : d.waiting) ++seen[x.id];
  for (const Unschedulable& u : d.impossible) {
    ++seen[u.id];
    EXPECT_FALSE(Validate(w.node, w.job.at(u.id)->req).ok()) << u.id;
  }
  EXPECT_EQ(seen.size(), w.queued.size());
  for (const QueuedJob& j : w.queued) {
    EXPECT_EQ(seen[j.id], 1) << j.id;
    if (!Validate(w.node, j.req).ok()) {
      EXPECT_TRUE(std::any_of(d.impossible.begin(), d.impossible.end(),
                              [&](auto& u) { return u.id == j.id; }));
    }
  }
}

// GPUs: exact count, usable, not held by any running run, not shared.
void CheckGpus(const World& w, const Decision& d) {
  std::set<int> taken;
  for (const RunningJob& r : w.running) taken.insert(r.gpu_indices.begin(), r.gpu_indices.end());
  for (const Placement& p : d.start) {
    EXPECT_EQ(static_cast<int>(p.gpu_indices.size()), w.job.at(p.id)->req.gpus) << p.id;
    EXPECT_TRUE(std::is_sorted(p.gpu_indices.begin(), p.gpu_indices.end()));
    for (int g : p.gpu_indices) {
      EXPECT_TRUE(w.usable.count(g)) << p.id << " got unusable GPU " << g;
      EXPECT_TRUE(taken.insert(g).second) << p.id << " got taken GPU " << g;
    }
  }
}

// cpus and memory: starts that ask for some never exceed what is free.
void CheckCapacity(const World& w, const Decision& d) {
  Vec free = w.FreeNow();
  Vec started;
  for (const Placement& p : d.start) started += Of(w.job.at(p.id)->req);
  if (started.cpus > kEps) {
    EXPECT_LE(started.cpus, free.cpus + kEps);
  }
  if (started.mem > 0) {
    EXPECT_LE(started.mem, free.mem);
  }
}

// Victims: running, preemptible, not stopping, listed once, strictly below the
// job they were taken for, which could not start or claim without them; each
// victim set is irredundant.
void CheckVictims(const World& w, const Decision& d) {
  std::set<std::string> listed(d.preempt.begin(), d.preempt.end());
  EXPECT_EQ(listed.size(), d.preempt.size());
  std::set<std::string> attributed;
  for (const Waiting& x : d.waiting) {
    if (x.reason != WaitReason::kPreempting) {
      EXPECT_TRUE(x.victims.empty());
      continue;
    }
    EXPECT_FALSE(x.victims.empty());
    for (const std::string& v : x.victims) {
      ASSERT_TRUE(w.run.count(v)) << v;
      const RunningJob& r = *w.run.at(v);
      EXPECT_TRUE(r.preemptible && !r.stopping) << v;
      EXPECT_LT(r.priority, w.job.at(x.id)->priority) << v;
      EXPECT_TRUE(listed.count(v)) << v;
      EXPECT_TRUE(attributed.insert(v).second) << v << " preempted twice";
    }
  }
  EXPECT_EQ(attributed, listed);
}

// Walks the queue order and checks the claim/reservation/backfill structure,
// with its own bookkeeping of what is available "soon" (free + stopping +
// victims − starts − claims).
void CheckOrder(const World& w, const Decision& d) {
  auto waits = WaitMap(d);
  std::set<std::string> started;
  for (const Placement& p : d.start) started.insert(p.id);
  std::vector<const QueuedJob*> order = w.Order();
  Vec soon = w.FreeNow() + w.StoppingNow();
  std::set<std::string> victims(d.preempt.begin(), d.preempt.end());
  size_t i = 0;
  // Before the head: every job started or claimed, and it was coverable.
  for (; i < order.size(); ++i) {
    const QueuedJob& j = *order[i];
    const Waiting* x = waits.count(j.id) ? waits[j.id] : nullptr;
    if (x && x->reason == WaitReason::kReserved) break;
    if (IsQuota(x)) continue;  // as if it were not there
    ASSERT_TRUE(started.count(j.id) || IsClaim(x))
        << j.id << " ahead of the head neither started nor claimed";
    if (x && x->reason == WaitReason::kPreempting) {
      Vec with;
      for (const std::string& v : x->victims) with += w.Held(*w.run.at(v));
      EXPECT_FALSE(Fits(soon, Of(j.req))) << j.id << " preempted although covered";
      EXPECT_TRUE(Fits(soon + with, Of(j.req))) << j.id;
      for (const std::string& v : x->victims) {
        EXPECT_FALSE(Fits(soon + with - w.Held(*w.run.at(v)), Of(j.req)))
            << j.id << ": " << v << " not needed";
      }
      soon += with;
    }
    if (x && x->reason == WaitReason::kReleasing) {
      EXPECT_TRUE(Fits(soon, Of(j.req))) << j.id;
    }
    soon -= Of(j.req);
  }
  if (i == order.size()) {
    EXPECT_FALSE(d.reservation);
    return;
  }
  // The head: it could not claim, even with every eligible victim.
  const QueuedJob& head = *order[i];
  ASSERT_TRUE(d.reservation);
  EXPECT_EQ(d.reservation->id, head.id);
  EXPECT_FALSE(Fits(soon, Of(head.req))) << head.id;
  Vec all = soon;
  for (const RunningJob& r : w.running) {
    if (!r.stopping && r.preemptible && !victims.count(r.id) && r.priority < head.priority)
      all += w.Held(r);
  }
  EXPECT_FALSE(Fits(all, Of(head.req))) << head.id << " could have preempted";
  // Behind the head: nothing claims, and no job outranks the head.
  for (size_t k = i + 1; k < order.size(); ++k) {
    const QueuedJob& j = *order[k];
    EXPECT_LE(j.priority, head.priority);
    if (!started.count(j.id)) {
      WaitReason r = waits.at(j.id)->reason;
      EXPECT_TRUE(r == WaitReason::kResources || r == WaitReason::kReservation ||
                  r == WaitReason::kQuota)
          << j.id;
    }
  }
}

// The head still gets what it needs: at the shadow time when it is known,
// otherwise out of what was free or releasing once backfill is done.
void CheckHeadGuarantee(const World& w, const Decision& d) {
  if (!d.reservation) return;
  const Reservation& res = *d.reservation;
  const QueuedJob& head = *w.job.at(res.id);
  std::set<std::string> victims(d.preempt.begin(), d.preempt.end());
  Vec avail = w.FreeNow() + w.StoppingNow();
  for (const std::string& v : victims) avail += w.Held(*w.run.at(v));
  for (const Waiting& x : d.waiting) {
    if (IsClaim(&x)) avail -= Of(w.job.at(x.id)->req);
  }
  Vec before_backfill = avail;
  auto waits = WaitMap(d);
  std::vector<const QueuedJob*> order = w.Order();
  bool behind = false;
  for (const QueuedJob* j : order) {
    if (j->id == head.id) behind = true;
    if (std::none_of(d.start.begin(), d.start.end(), [&](auto& p) { return p.id == j->id; }))
      continue;
    if (!behind) before_backfill -= Of(j->req);
    std::optional<int64_t> end;
    if (j->max_duration_ms && *j->max_duration_ms > 0) end = w.now + *j->max_duration_ms;
    bool gone_by_shadow = res.shadow_ms && end && *end <= *res.shadow_ms;
    if (!gone_by_shadow) avail -= Of(j->req);
  }
  if (res.shadow_ms) {
    EXPECT_GE(*res.shadow_ms, w.now);
    for (const RunningJob& r : w.running) {
      if (r.stopping || victims.count(r.id)) continue;
      if (r.deadline_ms && std::max(*r.deadline_ms, w.now) <= *res.shadow_ms) avail += w.Held(r);
    }
    EXPECT_TRUE(Fits(avail, Of(head.req))) << head.id << " delayed past its shadow time";
  } else {
    Vec need = Of(head.req);
    Vec claim{std::min(need.gpus, std::max(before_backfill.gpus, 0.0)),
              std::min(need.cpus, std::max(before_backfill.cpus, 0.0)),
              std::min(need.mem, std::max(before_backfill.mem, 0.0))};
    EXPECT_TRUE(Fits(avail, claim)) << head.id << " lost its first claim to a backfill";
  }
}

// A started job never jumps a waiting job ahead of it in the order (higher
// priority, or the same priority and less fair-share usage, or the same of
// both and submitted earlier), unless that job holds a claim or is over its
// quota, or both are behind the head (EASY backfill).
void CheckPriority(const World& w, const Decision& d) {
  auto waits = WaitMap(d);
  std::vector<const QueuedJob*> order = w.Order();
  std::map<std::string, size_t> pos;
  for (size_t i = 0; i < order.size(); ++i) pos[order[i]->id] = i;
  size_t head_pos = d.reservation ? pos.at(d.reservation->id) : order.size();
  for (const Placement& p : d.start) {
    const QueuedJob& k = *w.job.at(p.id);
    for (const Waiting& x : d.waiting) {
      const QueuedJob& j = *w.job.at(x.id);
      if (pos.at(j.id) >= pos.at(k.id) || IsClaim(&x) || IsQuota(&x)) continue;
      EXPECT_GE(pos.at(j.id), head_pos) << k.id << " jumped " << j.id;
      EXPECT_GT(pos.at(k.id), head_pos) << k.id << " jumped " << j.id;
    }
  }
}

// Quotas: with everything this Decision started or claimed charged, no
// user is past a limit that one of those jobs was checked against; every
// job waiting kQuota would be past one.
void CheckQuotas(const World& w, const Decision& d) {
  Accounts after = w.accounts;
  std::map<std::string, std::vector<const QueuedJob*>> took;  // by user
  auto charge = [&](const std::string& id) {
    const QueuedJob& j = *w.job.at(id);
    auto it = after.find(j.user);
    if (it == after.end()) return;
    it->second.gpus_held += j.req.gpus;
    it->second.runs_held += 1;
    it->second.notebooks_held += j.notebook;
    took[j.user].push_back(&j);
  };
  for (const Placement& p : d.start) charge(p.id);
  for (const Waiting& x : d.waiting) {
    if (IsClaim(&x)) charge(x.id);
  }
  for (const auto& [user, jobs] : took) {
    const Account& a = after.at(user);
    const QuotaLimits& l = a.limits;
    for (const QueuedJob* j : jobs) {
      if (l.gpus && j->req.gpus > 0) {
        EXPECT_LE(a.gpus_held, *l.gpus) << user << " " << j->id;
      }
      if (l.runs) {
        EXPECT_LE(a.runs_held, *l.runs) << user << " " << j->id;
      }
      if (l.notebooks && j->notebook) {
        EXPECT_LE(a.notebooks_held, *l.notebooks) << user;
      }
      if (l.gpu_hours && j->req.gpus > 0) {
        EXPECT_LT(a.gpu_hours_used, *l.gpu_hours) << user;
      }
    }
  }
  for (const Waiting& x : d.waiting) {
    if (!IsQuota(&x)) continue;
    const QueuedJob& j = *w.job.at(x.id);
    ASSERT_TRUE(after.count(j.user)) << j.id;
    ASSERT_TRUE(x.quota) << j.id;
    EXPECT_EQ(x.quota->user, j.user);
    // Starts only add to what is held: over then, over now.
    QueuedJob alone = j;
    EXPECT_TRUE(CheckQuota(alone, after.at(j.user))) << j.id << " waited on a quota it fits";
  }
}

void CheckAll(const World& w, const Decision& d) {
  CheckQuotas(w, d);
  CheckPartition(w, d);
  CheckGpus(w, d);
  CheckCapacity(w, d);
  CheckVictims(w, d);
  CheckOrder(w, d);
  CheckHeadGuarantee(w, d);
  CheckPriority(w, d);
}

TEST(ScheduleProperty, InvariantsHoldOnRandomStates) {
  constexpr int kStates = 4000;
  Gen gen(20240611);
  int started = 0, preempted = 0, reserved = 0, impossible = 0, claimed = 0, quota = 0;
  for (int n = 0; n < kStates; ++n) {
    NodeState node = gen.Node();
    std::vector<QueuedJob> queued = gen.Queued(node);
    std::vector<RunningJob> running = gen.Running(node);
    World w(node, queued, running, kNow, gen.MakeAccounts());
    Decision d = Schedule(w.node, w.queued, w.running, w.now, w.accounts);
    SCOPED_TRACE(fmt::format("state {}\n{}", n, Dump(d)));
    CheckAll(w, d);
    // Determinism: the order of the inputs does not matter.
    std::vector<QueuedJob> q = w.queued;
    std::vector<RunningJob> r = w.running;
    std::shuffle(q.begin(), q.end(), gen.rng());
    std::shuffle(r.begin(), r.end(), gen.rng());
    EXPECT_EQ(Dump(Schedule(w.node, q, r, kNow, w.accounts)), Dump(d));
    started += static_cast<int>(d.start.size());
    preempted += static_cast<int>(d.preempt.size());
    reserved += d.reservation.has_value();
    impossible += static_cast<int>(d.impossible.size());
    for (const Waiting& x : d.waiting) claimed += IsClaim(&x);
    for (const Waiting& x : d.waiting) quota += IsQuota(&x);
    if (HasFailure()) break;
  }
  // The generator must exercise every path, not just the easy one.
  EXPECT_GT(started, kStates / 2);
  EXPECT_GT(preempted, kStates / 20);
  EXPECT_GT(reserved, kStates / 4);
  EXPECT_GT(impossible, kStates / 20);
  EXPECT_GT(claimed, kStates / 20);
  EXPECT_GT(quota, kStates / 20);
}

// What the daemon does with a Decision: its starts run, its victims stop,
// its impossible jobs leave the queue.
void CarryOut(const Decision& d, std::vector<QueuedJob>& queued, std::vector<RunningJob>& running,
              Gen& gen) {
  for (RunningJob& r : running) {
    if (std::find(d.preempt.begin(), d.preempt.end(), r.id) != d.preempt.end()) r.stopping = true;
  }
  std::set<std::string> gone;
  for (const Unschedulable& u : d.impossible) gone.insert(u.id);
  for (const Placement& p : d.start) {
    gone.insert(p.id);
    for (const QueuedJob& j : queued) {
      if (j.id != p.id) continue;
      RunningJob r;
      r.id = j.id;
      r.priority = j.priority;
      r.started_ms = kNow;
      r.gpu_indices = p.gpu_indices;
      r.req = j.req;
      if (j.max_duration_ms) r.deadline_ms = kNow + *j.max_duration_ms;
      r.preemptible = gen.Chance(0.7);
      running.push_back(r);
    }
  }
  std::erase_if(queued, [&](const QueuedJob& j) { return gone.count(j.id) > 0; });
}

// MightChange: a job it says cannot change anything, queued once the last
// decision was carried out, leaves the next decision's starts, preemptions
// and impossible jobs exactly as they would be without it (the daemon skips
// the pass for it). And it is neither always true nor always false.
TEST(ScheduleProperty, AJobMightChangeDeniesChangesNothing) {
  constexpr int kStates = 6000;
  Gen gen(20261206);
  int skipped = 0, flagged = 0;
  for (int n = 0; n < kStates; ++n) {
    NodeState node = gen.Node();
    std::vector<QueuedJob> queued = gen.Queued(node);
    std::vector<RunningJob> running = gen.Running(node);
    Accounts accounts = gen.MakeAccounts();
    Decision first = Schedule(node, queued, running, kNow, accounts);
    CarryOut(first, queued, running, gen);
    std::vector<QueuedJob> extra = gen.Queued(node);
    if (extra.empty()) continue;
    QueuedJob j = extra.front();
    j.id = "new";
    j.seq = 100;                                // submitted after every job of the queue
    if (!Validate(node, j.req).ok()) continue;  // refused at submission
    if (MightChange(first.headroom, j)) {
      ++flagged;
      continue;
    }
    ++skipped;
    Decision without = Schedule(node, queued, running, kNow, accounts);
    queued.push_back(j);
    Decision with = Schedule(node, queued, running, kNow, accounts);
    SCOPED_TRACE(fmt::format("state {}\nfirst:\n{}\nwithout:\n{}\nwith:\n{}", n, Dump(first),
                             Dump(without), Dump(with)));
    EXPECT_EQ(Started(with), Started(without));
    EXPECT_EQ(with.preempt, without.preempt);
    EXPECT_EQ(ImpossibleIds(with), ImpossibleIds(without));
    for (const Placement& p : without.start) EXPECT_EQ(GpusOf(with, p.id), p.gpu_indices);
    if (HasFailure()) break;
  }
  EXPECT_GT(skipped, kStates / 10);
  EXPECT_GT(flagged, kStates / 10);
}

// Two users, one priority, whole-GPU jobs: while the user with less recent
// usage has a job waiting (not over a quota), no job of the other user of
// that priority starts; a higher priority still goes first whatever the
// usage; and fair share never preempts.
TEST(ScheduleProperty, FairShareLighterUserNeverWaitsBehindTheHeavierOne) {
  constexpr int kStates = 3000;
  Gen gen(99);
  int checked = 0;
  for (int n = 0; n < kStates; ++n) {
    NodeState node{gen.Int(1, 8), {}, 0, 0};
    Accounts acc;
    acc["light"].share_usage = gen.Pick<double>({0, 1, 2});
    acc["heavy"].share_usage = acc["light"].share_usage + gen.Pick<double>({0.001, 5, 500});
    std::vector<RunningJob> running;
    int busy = gen.Int(0, node.gpu_count);
    for (int g = 0; g < busy; ++g) running.push_back(R(fmt::format("r{}", g), {g}));
    std::vector<QueuedJob> q;
    int seq = 0;
    for (int i = gen.Int(0, 30); i > 0; --i) {  // the heavy user queues first, many
      q.push_back(
          ByUser(Q(fmt::format("h{}", i), seq++, 1, gen.Int(0, 1)), "heavy"));  // low|normal
    }
    for (int i = gen.Int(1, 3); i > 0; --i) {
      q.push_back(ByUser(Q(fmt::format("l{}", i), seq++, 1, gen.Int(0, 1)), "light"));
    }
    World w(node, q, running, kNow, acc);
    Decision d = Schedule(node, q, running, kNow, acc);
    SCOPED_TRACE(fmt::format("state {}\n{}", n, Dump(d)));
    CheckAll(w, d);
    // The running jobs are of normal priority: the low queued ones cannot
    // preempt them, the normal ones may not (same priority, whatever the usage).
    EXPECT_TRUE(d.preempt.empty());
    std::vector<std::string> ids = Started(d);
    std::set<std::string> started(ids.begin(), ids.end());
    for (const QueuedJob& waiting : q) {
      if (started.count(waiting.id)) continue;
      for (const QueuedJob& s : q) {
        if (!started.count(s.id) || s.priority > waiting.priority) continue;
        if (s.priority < waiting.priority) {
          ADD_FAILURE() << s.id << " started while higher-priority " << waiting.id << " waits";
        } else if (waiting.user == "light" && s.user == "heavy") {
          ADD_FAILURE() << s.id << " (heavy) started while " << waiting.id << " (light) waits";
        }
        ++checked;
      }
    }
    if (HasFailure()) break;
  }
  EXPECT_GT(checked, kStates / 10);
}

// Multi-round: jobs arrive, run their max_duration, get preempted and requeued.
// Every round's decision satisfies the invariants, and once arrivals stop the
// queue drains: no job waits forever, no preemption ping-pong.
TEST(ScheduleProperty, SimulationDrainsTheQueue) {
  Gen gen(7);
  for (int sim_no = 0; sim_no < 150; ++sim_no) {
    NodeState node = gen.Node();
    Sim sim(node);
    int n = 0;
    int64_t t = 0;
    for (int round = 0; round < 400; ++round, t += kMinute) {
      std::vector<std::string> done;
      for (const RunningJob& r : sim.running()) {
        if (!r.stopping && r.deadline_ms && *r.deadline_ms <= t) done.push_back(r.id);
      }
      for (const std::string& id : done) sim.Finish(id);
      if (round < 40 && gen.Chance(0.6)) {
        QueuedJob j;
        j.id = fmt::format("j{}", n++);
        j.priority = gen.Int(0, 2);
        j.req = gen.Req(node, 0.3);
        j.max_duration_ms = gen.Int(1, 10) * kMinute;
        sim.Submit(j);
      }
      sim.ExitStopping();
      World w(node, sim.queued(), sim.running(), t);
      Decision d = Schedule(w.node, w.queued, w.running, t);
      sim.Apply(d, t);
      SCOPED_TRACE(fmt::format("sim {} round {}\n{}", sim_no, round, Dump(d)));
      CheckAll(w, d);
      if (HasFailure()) return;
      bool all_impossible = std::all_of(sim.queued().begin(), sim.queued().end(),
                                        [&](auto& q) { return !Validate(node, q.req).ok(); });
      if (round >= 40 && all_impossible && sim.running().empty()) break;
    }
    EXPECT_TRUE(std::all_of(sim.queued().begin(), sim.queued().end(),
                            [&](auto& q) { return !Validate(node, q.req).ok(); }))
        << "sim " << sim_no << ": " << sim.queued().size() << " jobs never started";
    EXPECT_TRUE(sim.running().empty()) << "sim " << sim_no;
  }
}

}  // namespace
}  // namespace lathe::sched

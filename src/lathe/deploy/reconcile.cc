#include "lathe/deploy/reconcile.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <set>

#include "lathe/common/i18n.h"
#include "lathe/common/units.h"
#include "lathe/deploy/autoscaler.h"

namespace lathe::deploy {
namespace {

using Phase = ReplicaObs::Phase;

// At most this many run ids are named in a health reason, of at most
// kMaxRememberedRuns preempted ones remembered.
constexpr size_t kMaxNamedRuns = 3;
constexpr size_t kMaxRememberedRuns = 10;

bool Contains(const std::vector<std::string>& v, const std::string& x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}
bool AddOnce(std::vector<std::string>& v, const std::string& x) {
  if (Contains(v, x)) return false;
  v.push_back(x);
  return true;
}
// AddOnce, keeping only the newest kMaxRememberedRuns.
bool AddRecent(std::vector<std::string>& v, const std::string& x) {
  if (!AddOnce(v, x)) return false;
  if (v.size() > kMaxRememberedRuns) v.erase(v.begin());
  return true;
}
std::string Ms(int64_t ms) { return FormatDuration(std::chrono::milliseconds(ms)); }
std::string Str(int64_t n) { return std::to_string(n); }

int64_t BackoffDelay(int failures) {
  int64_t d = kBackoffFirstMs;
  for (int i = 1; i < failures && d < kBackoffMaxMs; ++i) d *= 2;
  return std::min(d, kBackoffMaxMs);
}

// Percentages summing to 100 in proportion to `counts` (largest remainder;
// ties to the first in map order).
std::map<std::string, int> Split(const std::map<std::string, int>& counts, int total) {
  std::map<std::string, int> out;
  int sum = 0;
  for (const auto& [v, n] : counts) sum += n;
  if (sum == 0 || total <= 0) return out;
  std::vector<std::pair<int, std::string>> rest;
  int given = 0;
  for (const auto& [v, n] : counts) {
    out[v] = total * n / sum;
    given += out[v];
    rest.push_back({-(total * n % sum), v});
  }
  std::stable_sort(rest.begin(), rest.end());
  for (size_t i = 0; given < total; ++i, ++given) out[rest[i % rest.size()].second] += 1;
  return out;
}

// One call of Reconcile, step by step (Run numbers them).
class Tick {
 public:
  Tick(const Goal& goal, const std::vector<ReplicaObs>& obs, const State& state, int64_t now)
      : g_(goal), obs_(obs), now_(now) {
    d_.next = state;
  }
  Decision Run();

 private:
  State& s() { return d_.next; }
  void Remember();
  void ChooseTarget();
  void NoteEnded();
  void Timeouts();
  void Rollback(const std::string& reason_id, const MsgArgs& reason_args,
                const std::string& reason);
  void Scale();
  void PlanTarget();
  bool DrainOneForRoom();
  void ReplaceStableInCanary();
  void PlanOld();
  void StopDrained();
  void Finish();
  void SetTraffic();
  void SetHealth();

  // What a replica is now, counting this call's decisions.
  bool Ended(const ReplicaObs& r) const { return r.phase == Phase::kEnded; }
  bool Stopped(const ReplicaObs& r) const { return Contains(d_.next.stopped, r.run); }
  bool Draining(const ReplicaObs& r) const {
    return !Ended(r) && !Stopped(r) &&
           (r.phase == Phase::kDraining || d_.next.drained.count(r.run) > 0);
  }
  bool Live(const ReplicaObs& r) const { return !Ended(r) && !Stopped(r) && !Draining(r); }
  bool Ready(const ReplicaObs& r) const { return Live(r) && r.phase == Phase::kReady; }
  bool Failed(const std::string& v) const { return Contains(d_.next.failed_versions, v); }
  std::vector<const ReplicaObs*> LiveOf(bool target) const;
  int ReadyCount(bool target) const;
  int ReadyTotal() const { return ReadyCount(true) + ReadyCount(false); }
  int LiveTotal() const;
  int InProgress(const std::string& version) const;

  void Drain(const ReplicaObs& r);
  void Stop(const ReplicaObs& r);
  // Takes `n` of `pool` away: never-ready ones are stopped first, then ready
  // ones with the fewest requests in flight are drained; unless `to_zero`,
  // the last ready replica of the deployment stays.
  void Remove(std::vector<const ReplicaObs*> pool, int n, bool to_zero);
  void Fail(const std::string& version, const std::string& reason);
  void Emit(std::string level, std::string id, MsgArgs args) {
    d_.events.push_back(Event{std::move(level), std::move(id), std::move(args)});
  }
  void SetReason(std::string health, std::string id, MsgArgs args) {
    d_.health = std::move(health);
    d_.reason_id = std::move(id);
    d_.reason_args = std::move(args);
  }

  const Goal& g_;
  const std::vector<ReplicaObs>& obs_;
  const int64_t now_;
  Decision d_;

  std::string target_;    // the version this call converges to
  bool rolling_ = false;  // target_ differs from the stable version
  bool canary_ = false;   // ...and holds at the canary share
  bool waiting_slot_ = false;
  std::string rollback_reason_;  // a new replica ended before it was ever ready
};

Decision Tick::Run() {
  Remember();      // 1. goal change, memory pruned to the runs observed
  ChooseTarget();  // 2. which version to converge to; rollouts start or are cancelled
  NoteEnded();     // 3. ended runs: crashes (backoff), preemptions
  Timeouts();      // 4. not ready in time: rollback, or stop and back off
  Scale();         // 5. the autoscaler
  PlanTarget();    // 6. start or remove replicas of the target version
  PlanOld();       // 7. drain the other versions as the target's ready ones cover them
  StopDrained();   // 8. stop what is drained
  Finish();        // 9. a finished rollout makes the target stable
  SetTraffic();    // 10.
  SetHealth();     // 11.
  d_.reason = Catalog::Default().Format(d_.reason_id, Lang::kEn, d_.reason_args);
  return std::move(d_);
}

void Tick::Remember() {
  State& st = s();
  if (st.goal_version != g_.version) {
    // A new goal is a new request: a version that failed before may be tried again.
    std::erase(st.failed_versions, g_.version);
    st.goal_version = g_.version;
  }
  std::set<std::string> seen;
  for (const ReplicaObs& r : obs_) seen.insert(r.run);
  auto gone = [&](const std::string& run) { return seen.count(run) == 0; };
  std::erase_if(st.stopped, gone);
  std::erase_if(st.noted_ended, gone);
  std::erase_if(st.ready_seen, gone);
  std::erase_if(st.drained, [&](const auto& kv) { return gone(kv.first); });
  for (const ReplicaObs& r : obs_) {
    if (r.phase == Phase::kReady) AddOnce(st.ready_seen, r.run);
  }
  // A stable version lost with the state: the version most replicas serve.
  if (st.stable_version.empty()) {
    std::map<std::string, int> ready;
    for (const ReplicaObs& r : obs_) {
      if (r.phase == Phase::kReady && r.version != g_.version) ready[r.version]++;
    }
    int best = 0;
    for (const auto& [v, n] : ready) {
      if (n > best) best = n, st.stable_version = v;
    }
  }
}

void Tick::ChooseTarget() {
  State& st = s();
  const bool goal_failed = !st.stable_version.empty() && Failed(g_.version);
  target_ = goal_failed ? st.stable_version : g_.version;
  rolling_ = !st.stable_version.empty() && target_ != st.stable_version;
  canary_ = rolling_ && g_.canary_percent > 0 && !g_.promoted;
  if (!st.rolling_to.empty() && st.rolling_to != target_) {
    if (target_ == st.stable_version) {
      Emit("info", "deploy.rollout_cancelled",
           {{"version", st.rolling_to}, {"stable", st.stable_version}});
    }
    st.rolling_to.clear();
    st.canary = false;
  }
  if (rolling_ && st.rolling_to.empty()) {
    st.rolling_to = target_;
    if (g_.canary_percent > 0 && !g_.promoted) {
      Emit(
          "info", "deploy.canary_started",
          {{"version", target_}, {"from", st.stable_version}, {"percent", Str(g_.canary_percent)}});
    } else {
      Emit("info", "deploy.rollout_started",
           {{"version", target_},
            {"from", st.stable_version},
            {"surge", Str(std::max(0, g_.free_slots))}});
    }
  }
}

void Tick::Fail(const std::string& version, const std::string& reason) {
  Backoff& b = s().backoff[version];
  b.failures++;
  b.next_start_ms = now_ + BackoffDelay(b.failures);
  b.reason = reason;
}

void Tick::NoteEnded() {
  State& st = s();
  for (const ReplicaObs& r : obs_) {
    if (r.phase == Phase::kPending && r.preempted && AddRecent(st.preempted, r.run)) {
      Emit("warning", "deploy.replica_preempted", {{"run", r.run}, {"version", r.version}});
    }
    if (!Ended(r) || !AddOnce(st.noted_ended, r.run)) continue;
    const bool ours = Contains(st.stopped, r.run) || st.drained.count(r.run) > 0;
    if (ours) continue;
    if (r.preempted) {
      if (AddRecent(st.preempted, r.run)) {
        Emit("warning", "deploy.replica_preempted", {{"run", r.run}, {"version", r.version}});
      }
    } else if (r.stopped || r.end_reason == "stopped") {
      Emit("info", "deploy.replica_ended",
           {{"run", r.run}, {"version", r.version}, {"reason", r.end_reason}});
    } else if (rolling_ && r.version == target_ && !Contains(st.ready_seen, r.run)) {
      if (rollback_reason_.empty()) rollback_reason_ = r.end_reason;
      Emit("warning", "deploy.replica_ended",
           {{"run", r.run}, {"version", r.version}, {"reason", r.end_reason}});
    } else if (r.version != target_ && !(canary_ && r.version == st.stable_version)) {
      // A version on its way out: it is not started again, so no backoff.
      Emit("warning", "deploy.replica_ended",
           {{"run", r.run}, {"version", r.version}, {"reason", r.end_reason}});
    } else {
      Fail(r.version, r.end_reason);
      const Backoff& b = st.backoff[r.version];
      Emit("warning", "deploy.replica_crashed",
           {{"run", r.run},
            {"version", r.version},
            {"reason", r.end_reason},
            {"count", Str(b.failures)},
            {"delay", Ms(b.next_start_ms - now_)}});
    }
  }
}

void Tick::Rollback(const std::string& reason_id, const MsgArgs& reason_args,
                    const std::string& reason) {
  State& st = s();
  MsgArgs args = {{"version", target_}, {"stable", st.stable_version}};
  args.insert(args.end(), reason_args.begin(), reason_args.end());
  Emit("error", reason_id, args);
  AddOnce(st.failed_versions, target_);
  st.failed_reason = reason;
  st.rolling_to.clear();
  st.canary = false;
  st.backoff.erase(target_);
  target_ = st.stable_version;
  rolling_ = false;
  canary_ = false;
}

void Tick::Timeouts() {
  if (rolling_ && !rollback_reason_.empty()) {
    Rollback("deploy.rolled_back", {{"reason", rollback_reason_}}, rollback_reason_);
  }
  for (const ReplicaObs& r : obs_) {
    if (!Live(r) || r.version != target_) continue;
    const int64_t for_ms = now_ - r.phase_since_ms;
    if (for_ms < g_.ready_timeout_ms) continue;
    const std::string after = Ms(g_.ready_timeout_ms);
    if (r.phase == Phase::kStarting && rolling_) {
      Rollback("deploy.rolled_back_not_ready", {{"duration", after}},
               fmt::format("not ready after {}", after));
      return;  // the new version's replicas are now the old ones
    }
    if (r.phase == Phase::kStarting || r.phase == Phase::kUnready) {
      Stop(r);
      Fail(r.version, fmt::format("not ready after {}", after));
      Emit("warning",
           r.phase == Phase::kStarting ? "deploy.replica_not_ready" : "deploy.replica_unhealthy",
           {{"run", r.run}, {"version", r.version}, {"duration", Ms(for_ms)}});
    }
  }
}

void Tick::Scale() {
  LoadFigures f;
  f.held = std::max<int64_t>(0, g_.held_requests);
  f.load = f.any_work = f.held;
  for (const ReplicaObs& r : obs_) {
    if (Ended(r) || Stopped(r)) continue;
    // The front's count and the replica's own describe the same requests.
    const int64_t queued = std::max<int64_t>(0, r.queued);
    const int64_t work =
        std::max(std::max<int64_t>(0, r.in_flight), std::max<int64_t>(0, r.running) + queued);
    f.any_work += work;
    if (Ready(r)) {
      f.ready++;
      f.load += work;
      f.queued += queued;
    }
  }
  Autoscale(g_, f, s(), now_, d_.events);
}

std::vector<const ReplicaObs*> Tick::LiveOf(bool target) const {
  std::vector<const ReplicaObs*> out;
  for (const ReplicaObs& r : obs_) {
    if (Live(r) && (r.version == target_) == target) out.push_back(&r);
  }
  return out;
}
int Tick::ReadyCount(bool target) const {
  int n = 0;
  for (const ReplicaObs& r : obs_) n += Ready(r) && (r.version == target_) == target;
  return n;
}
int Tick::LiveTotal() const {
  return static_cast<int>(
      std::count_if(obs_.begin(), obs_.end(), [&](const ReplicaObs& r) { return Live(r); }));
}
int Tick::InProgress(const std::string& version) const {
  int n = 0;
  for (const ReplicaObs& r : obs_) {
    n += Live(r) && r.version == version &&
         (r.phase == Phase::kPending || r.phase == Phase::kStarting);
  }
  return n;
}

void Tick::Drain(const ReplicaObs& r) {
  d_.drain.push_back(r.run);
  s().drained[r.run] = now_;
  Emit("info", "deploy.replica_draining", {{"run", r.run}, {"version", r.version}});
}
void Tick::Stop(const ReplicaObs& r) {
  d_.stop.push_back(r.run);
  AddOnce(s().stopped, r.run);
}

void Tick::Remove(std::vector<const ReplicaObs*> pool, int n, bool to_zero) {
  auto rank = [&](const ReplicaObs* r) {
    // Other versions than the stable one first, then the least useful phase.
    int phase = r->phase == Phase::kPending    ? 0
                : r->phase == Phase::kStarting ? 1
                : r->phase == Phase::kUnready  ? 2
                                               : 3;
    return std::make_tuple(r->version == s().stable_version, phase, r->in_flight, r->run);
  };
  std::sort(pool.begin(), pool.end(), [&](auto* a, auto* b) { return rank(a) < rank(b); });
  for (const ReplicaObs* r : pool) {
    if (n <= 0) break;
    if (r->phase == Phase::kPending || r->phase == Phase::kStarting) {
      Stop(*r);
    } else {
      if (r->phase == Phase::kReady && !to_zero && ReadyTotal() <= 1) continue;
      Drain(*r);
    }
    --n;
  }
}

void Tick::PlanTarget() {
  State& st = s();
  const int want_total = st.desired;
  if (st.canary && rolling_ && !canary_) {
    Emit("info", "deploy.canary_promoted",
         {{"version", target_}, {"percent", Str(g_.canary_percent)}});
  }
  st.canary = canary_;
  int target_count = want_total;
  if (canary_ && want_total > 0) {
    target_count = std::clamp(
        static_cast<int>(std::ceil(want_total * std::min(100, g_.canary_percent) / 100.0)), 1,
        want_total);
  }
  // 1. Too many: the surplus goes (scaling down, or to zero).
  std::vector<const ReplicaObs*> live = LiveOf(true);
  int have = static_cast<int>(live.size());
  if (have > target_count) Remove(live, have - target_count, want_total == 0);
  int want = target_count - have;
  if (want <= 0) return;
  // 2. A version that keeps failing waits for its backoff.
  auto b = st.backoff.find(target_);
  if (b != st.backoff.end() && b->second.next_start_ms > now_) return;
  // 3. Room: beside other versions' replicas, only within the free slots
  //    (surge) — with none, one old replica is drained to make room.
  const int others = static_cast<int>(LiveOf(false).size());
  auto room = [&] {
    return others == 0 ? want : std::max(g_.free_slots, want_total - LiveTotal());
  };
  if (room() <= 0 && g_.free_slots <= 0 && InProgress(target_) == 0) {
    if (!DrainOneForRoom()) waiting_slot_ = true;
  }
  const int cap = std::max(0, g_.max_replicas + std::max(0, g_.free_slots) - LiveTotal());
  const int n = std::min({want, room(), cap});
  if (n <= 0) return;
  d_.start.push_back({target_, n});
  Emit("info", "deploy.starting",
       {{"count", Str(n)},
        {"version", target_},
        {"live", Str(have)},
        {"desired", Str(target_count)}});
}

// One at a time: drains the least useful replica of another version, as long
// as another ready replica serves on and none is already draining for room.
bool Tick::DrainOneForRoom() {
  for (const ReplicaObs& r : obs_) {
    if (Draining(r) && r.version != target_ && s().drained.count(r.run)) return true;
  }
  std::vector<const ReplicaObs*> old = LiveOf(false);
  std::erase_if(
      old, [&](const ReplicaObs* r) { return r->phase == Phase::kReady && ReadyTotal() <= 1; });
  if (old.empty()) return false;
  Remove(old, 1, false);
  return true;
}

void Tick::ReplaceStableInCanary() {
  State& st = s();
  int stable_live = 0;
  for (const ReplicaObs* r : LiveOf(false)) stable_live += r->version == st.stable_version;
  const int want = st.desired - stable_live - static_cast<int>(LiveOf(true).size());
  auto b = st.backoff.find(st.stable_version);
  if (want <= 0 || (b != st.backoff.end() && b->second.next_start_ms > now_)) return;
  d_.start.push_back({st.stable_version, want});
  Emit("info", "deploy.starting",
       {{"count", Str(want)},
        {"version", st.stable_version},
        {"live", Str(stable_live)},
        {"desired", Str(st.desired)}});
}

void Tick::PlanOld() {
  if (canary_) {
    ReplaceStableInCanary();
    return;  // the stable version keeps its replicas while the canary runs
  }
  // 1. A failed version's replicas go; its ready ones serve until another is ready.
  std::vector<const ReplicaObs*> failed, rest;
  for (const ReplicaObs* r : LiveOf(false)) (Failed(r->version) ? failed : rest).push_back(r);
  const int ready_elsewhere =
      ReadyCount(true) +
      static_cast<int>(std::count_if(rest.begin(), rest.end(), [&](auto* r) { return Ready(*r); }));
  for (const ReplicaObs* r : failed) {
    if (r->phase == Phase::kPending || r->phase == Phase::kStarting) {
      Stop(*r);
    } else if (ready_elsewhere > 0 || r->phase != Phase::kReady || s().desired == 0) {
      Drain(*r);
    }
  }
  // 2. The others go as the target's ready replicas cover the desired count.
  const int keep = std::max(0, s().desired - ReadyCount(true));
  const int have = static_cast<int>(rest.size());
  if (have > keep) Remove(rest, have - keep, s().desired == 0);
}

void Tick::StopDrained() {
  for (const ReplicaObs& r : obs_) {
    if (!Draining(r) || Contains(d_.drain, r.run)) continue;
    auto it = s().drained.find(r.run);
    const int64_t since = it != s().drained.end() ? it->second : r.phase_since_ms;
    const bool idle = r.phase == Phase::kDraining && r.in_flight <= 0;
    if (!idle && now_ - since < g_.drain_timeout_ms) continue;
    Stop(r);
    Emit("info", "deploy.replica_stopped",
         {{"run", r.run}, {"version", r.version}, {"in_flight", Str(r.in_flight)}});
  }
}

void Tick::Finish() {
  State& st = s();
  const int ready = ReadyCount(true);
  // Backoff is forgotten once a replica of its version has served a while.
  for (const ReplicaObs& r : obs_) {
    if (Ready(r) && now_ - r.phase_since_ms >= kBackoffResetMs) st.backoff.erase(r.version);
  }
  std::erase_if(st.backoff, [&](const auto& kv) {
    return kv.first != target_ && kv.first != st.stable_version;
  });
  if (st.stable_version.empty() && ready > 0) {
    st.stable_version = target_;
    Emit("info", "deploy.serving", {{"version", target_}, {"replicas", Str(ready)}});
  } else if (rolling_ && !canary_ && ready >= std::max(1, st.desired) && LiveOf(false).empty()) {
    Emit("info", "deploy.rolled_out",
         {{"version", target_}, {"from", st.stable_version}, {"replicas", Str(ready)}});
    st.stable_version = target_;
    st.rolling_to.clear();
    rolling_ = false;
  }
  if (ready >= st.desired) st.preempted.clear();
}

void Tick::SetTraffic() {
  std::map<std::string, int> good, bad;
  for (const ReplicaObs& r : obs_) {
    if (Ready(r)) (Failed(r.version) ? bad : good)[r.version]++;
  }
  if (good.empty()) good = bad;
  const auto t = good.find(target_);
  if (canary_ && t != good.end() && good.size() > 1) {
    const int pct = std::clamp(g_.canary_percent, 0, 100);
    good.erase(t);
    d_.traffic = Split(good, 100 - pct);
    d_.traffic[target_] = pct;
    return;
  }
  d_.traffic = Split(good, 100);
}

void Tick::SetHealth() {
  const State& st = s();
  const int ready = ReadyCount(true);
  const MsgArgs counts = {{"ready", Str(ready)}, {"desired", Str(st.desired)}};
  auto with = [&](MsgArgs more) {
    more.insert(more.begin(), counts.begin(), counts.end());
    return more;
  };
  const auto b = st.backoff.find(target_);
  const bool crashing = b != st.backoff.end() && b->second.failures > 0;
  // Why a replica not started yet waits (a quota, busy GPUs), as the scheduler says.
  std::string held_by;
  for (const ReplicaObs& r : obs_) {
    if (r.phase == ReplicaObs::Phase::kPending && !r.waiting.empty()) {
      held_by = r.waiting;
      break;
    }
  }
  auto crash_args = [&] {
    return with({{"version", target_},
                 {"reason", b->second.reason},
                 {"count", Str(b->second.failures)},
                 {"delay", Ms(std::max<int64_t>(0, b->second.next_start_ms - now_))}});
  };
  if (st.desired == 0 && ready == 0) {
    SetReason("scaled_to_zero", "deploy.health.scaled_to_zero", {});
  } else if (st.stable_version.empty() && ready == 0 && crashing) {
    SetReason("failed", "deploy.health.failed", crash_args());
  } else if (Failed(g_.version)) {
    SetReason("degraded", "deploy.health.rolled_back",
              with({{"version", g_.version},
                    {"reason", st.failed_reason},
                    {"stable", st.stable_version}}));
  } else if (!st.preempted.empty() && ready < st.desired) {
    // The newest few.
    std::vector<std::string> runs(st.preempted.end() - std::min(kMaxNamedRuns, st.preempted.size()),
                                  st.preempted.end());
    SetReason("degraded", "deploy.health.preempted",
              with({{"runs", fmt::format("{}", fmt::join(runs, ", "))}}));
  } else if (crashing && ready < st.desired) {
    SetReason("degraded", "deploy.health.crashing", crash_args());
  } else if (rolling_ && waiting_slot_) {
    SetReason("progressing", "deploy.health.waiting_slot",
              with({{"version", target_}, {"from", st.stable_version}}));
  } else if (canary_) {
    SetReason("progressing", "deploy.health.canary",
              with({{"version", target_},
                    {"from", st.stable_version},
                    {"percent", Str(g_.canary_percent)}}));
  } else if (rolling_) {
    SetReason("progressing", "deploy.health.rolling",
              with({{"version", target_}, {"from", st.stable_version}}));
  } else if (ready < st.desired && !held_by.empty()) {
    SetReason("progressing", "deploy.health.queued",
              with({{"version", target_}, {"why", held_by}}));
  } else if (ready < st.desired) {
    SetReason("progressing", "deploy.health.starting", with({{"version", target_}}));
  } else {
    SetReason("healthy", "deploy.health.serving", with({{"version", target_}}));
  }
}

// --- State as JSON ---

Json StringList(const std::vector<std::string>& v) { return Json(v); }

Status Bad(std::string_view field, std::string_view type) {
  return Status::Msg(Code::kInvalidArgument, "deploy.state_field",
                     {{"field", std::string(field)}, {"type", std::string(type)}});
}

Status ReadString(const Json& j, const char* field, std::string& out) {
  if (!j.contains(field)) return Status::OK();
  if (!j[field].is_string()) return Bad(field, "string");
  out = j[field].get<std::string>();
  return Status::OK();
}
template <typename Int>
Status ReadInt(const Json& j, const char* field, Int& out) {
  if (!j.contains(field)) return Status::OK();
  if (!j[field].is_number_integer()) return Bad(field, "integer");
  out = j[field].get<Int>();
  return Status::OK();
}
Status ReadList(const Json& j, const char* field, std::vector<std::string>& out) {
  if (!j.contains(field)) return Status::OK();
  if (!j[field].is_array()) return Bad(field, "list of strings");
  out.clear();
  for (const Json& e : j[field]) {
    if (!e.is_string()) return Bad(field, "list of strings");
    out.push_back(e.get<std::string>());
  }
  return Status::OK();
}

}  // namespace

Decision Reconcile(const Goal& goal, const std::vector<ReplicaObs>& replicas, const State& state,
                   int64_t now_ms) {
  return Tick(goal, replicas, state, now_ms).Run();
}

Json ToJson(const State& s) {
  Json backoff = Json::object();
  for (const auto& [v, b] : s.backoff) {
    backoff[v] = {
        {"failures", b.failures}, {"next_start_ms", b.next_start_ms}, {"reason", b.reason}};
  }
  Json drained = Json::object();
  for (const auto& [run, since] : s.drained) drained[run] = since;
  return Json{{"stable_version", s.stable_version},
              {"rolling_to", s.rolling_to},
              {"failed_versions", StringList(s.failed_versions)},
              {"failed_reason", s.failed_reason},
              {"desired", s.desired},
              {"above_since_ms", s.above_since_ms},
              {"below_since_ms", s.below_since_ms},
              {"idle_since_ms", s.idle_since_ms},
              {"goal_version", s.goal_version},
              {"canary", s.canary},
              {"backoff", backoff},
              {"drained", drained},
              {"stopped", StringList(s.stopped)},
              {"noted_ended", StringList(s.noted_ended)},
              {"ready_seen", StringList(s.ready_seen)},
              {"preempted", StringList(s.preempted)}};
}

Result<State> StateFromJson(const Json& j) {
  if (!j.is_object()) return Bad("state", "object");
  State s;
  RETURN_IF_ERROR(ReadString(j, "stable_version", s.stable_version));
  RETURN_IF_ERROR(ReadString(j, "rolling_to", s.rolling_to));
  RETURN_IF_ERROR(ReadList(j, "failed_versions", s.failed_versions));
  RETURN_IF_ERROR(ReadString(j, "failed_reason", s.failed_reason));
  RETURN_IF_ERROR(ReadInt(j, "desired", s.desired));
  RETURN_IF_ERROR(ReadInt(j, "above_since_ms", s.above_since_ms));
  RETURN_IF_ERROR(ReadInt(j, "below_since_ms", s.below_since_ms));
  RETURN_IF_ERROR(ReadInt(j, "idle_since_ms", s.idle_since_ms));
  RETURN_IF_ERROR(ReadString(j, "goal_version", s.goal_version));
  if (j.contains("canary")) {
    if (!j["canary"].is_boolean()) return Bad("canary", "boolean");
    s.canary = j["canary"].get<bool>();
  }
  if (j.contains("backoff")) {
    if (!j["backoff"].is_object()) return Bad("backoff", "object");
    for (const auto& [v, b] : j["backoff"].items()) {
      if (!b.is_object()) return Bad("backoff." + v, "object");
      Backoff& out = s.backoff[v];
      RETURN_IF_ERROR(ReadInt(b, "failures", out.failures));
      RETURN_IF_ERROR(ReadInt(b, "next_start_ms", out.next_start_ms));
      RETURN_IF_ERROR(ReadString(b, "reason", out.reason));
    }
  }
  if (j.contains("drained")) {
    if (!j["drained"].is_object()) return Bad("drained", "object");
    for (const auto& [run, since] : j["drained"].items()) {
      if (!since.is_number_integer()) return Bad("drained." + run, "integer");
      s.drained[run] = since.get<int64_t>();
    }
  }
  RETURN_IF_ERROR(ReadList(j, "stopped", s.stopped));
  RETURN_IF_ERROR(ReadList(j, "noted_ended", s.noted_ended));
  RETURN_IF_ERROR(ReadList(j, "ready_seen", s.ready_seen));
  RETURN_IF_ERROR(ReadList(j, "preempted", s.preempted));
  return s;
}

int64_t NoteRefusedStart(State& state, const std::string& version, const std::string& reason,
                         int64_t now_ms) {
  Backoff& b = state.backoff[version];
  b.failures++;
  const int64_t delay = BackoffDelay(b.failures);
  b.next_start_ms = now_ms + delay;
  b.reason = reason;
  return delay;
}

}  // namespace lathe::deploy

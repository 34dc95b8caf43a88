#include "lathe/deploy/test_util/fake_cluster.h"

#include <algorithm>

namespace lathe::deploy {

using Phase = ReplicaObs::Phase;

namespace {
bool OnGpu(const ReplicaObs& r) { return r.phase != Phase::kPending && r.phase != Phase::kEnded; }
}  // namespace

const Decision& FakeCluster::Tick(int64_t step_ms) {
  goal.free_slots = FreeSlots();
  const int free_before = goal.free_slots;
  last = Reconcile(goal, replicas, state, now);
  state = last.next;
  events.insert(events.end(), last.events.begin(), last.events.end());
  Apply(last, free_before);
  ++ticks;
  Advance(step_ms);
  return last;
}

void FakeCluster::Apply(const Decision& d, int free_before) {
  const int ready_before = Ready();
  for (const std::string& run : d.drain) {
    if (ReplicaObs* r = Find(run); r && r->phase != Phase::kEnded) {
      r->phase = Phase::kDraining;
      r->phase_since_ms = now;
    }
  }
  for (const std::string& run : d.stop) {
    if (ReplicaObs* r = Find(run); r && r->phase != Phase::kEnded) {
      r->phase = Phase::kEnded;
      r->phase_since_ms = now;
      r->end_reason = "stopped";
      r->in_flight = 0;
      ended_at_[run] = now;
    }
  }
  for (const auto& [version, n] : d.start) {
    for (int i = 0; i < n; ++i) {
      ReplicaObs r;
      r.run = "r" + std::to_string(++seq_);
      r.version = version;
      r.phase = Phase::kPending;
      r.phase_since_ms = now;
      replicas.push_back(r);
      started_[version]++;
    }
  }
  int live = 0, starts = 0;
  for (const ReplicaObs& r : replicas)
    live += r.phase != Phase::kEnded && r.phase != Phase::kDraining;
  for (const auto& [version, n] : d.start) starts += n;
  if (starts > 0) {
    max_live_over_limit = std::max(max_live_over_limit, live - (goal.max_replicas + free_before));
  }
  if (ready_before > 0 && Ready() == 0 && d.next.desired > 0) lost_last_ready = true;
}

void FakeCluster::Advance(int64_t step_ms) {
  now += step_ms;
  // Ended runs are reported once, then left out (as the daemon does after a while).
  std::erase_if(replicas, [&](const ReplicaObs& r) {
    auto it = ended_at_.find(r.run);
    return r.phase == Phase::kEnded && it != ended_at_.end() && it->second < now - step_ms;
  });
  int on_gpu = static_cast<int>(std::count_if(replicas.begin(), replicas.end(), OnGpu));
  for (ReplicaObs& r : replicas) {
    const VersionBehavior& b = behavior[r.version];
    if (r.phase == Phase::kPending && on_gpu < gpus_) {
      r.phase = Phase::kStarting;
      r.phase_since_ms = now;
      r.preempted = false;
      ++on_gpu;
    } else if (r.phase == Phase::kStarting && b.crash_after_ms >= 0 &&
               now - r.phase_since_ms >= b.crash_after_ms) {
      r.phase = Phase::kEnded;
      r.end_reason = b.end_reason;
      r.phase_since_ms = now;
      ended_at_[r.run] = now;
    } else if (r.phase == Phase::kStarting && !b.never_ready && b.crash_after_ms < 0 &&
               now - r.phase_since_ms >= b.ready_after_ms) {
      r.phase = Phase::kReady;
      r.phase_since_ms = now;
    } else if (r.phase == Phase::kDraining) {
      r.in_flight = 0;  // its last requests finished
    }
  }
  SpreadLoad();
}

void FakeCluster::SpreadLoad() {
  std::vector<ReplicaObs*> ready;
  for (ReplicaObs& r : replicas) {
    if (r.phase == Phase::kReady) ready.push_back(&r);
  }
  for (size_t i = 0; i < ready.size(); ++i) {
    const int64_t n = static_cast<int64_t>(ready.size());
    ready[i]->in_flight = load / n + (static_cast<int64_t>(i) < load % n ? 1 : 0);
  }
}

std::string FakeCluster::AddReady(const std::string& version) {
  ReplicaObs r;
  r.run = "r" + std::to_string(++seq_);
  r.version = version;
  r.phase = Phase::kReady;
  r.phase_since_ms = now - 3600000;
  replicas.push_back(r);
  SpreadLoad();
  return r.run;
}

void FakeCluster::Preempt(const std::string& run) {
  ReplicaObs* r = Find(run);
  r->phase = Phase::kEnded;
  r->preempted = true;
  r->end_reason = "preempted";
  r->phase_since_ms = now;
  r->in_flight = 0;
  ended_at_[run] = now;
  SpreadLoad();
}

void FakeCluster::Crash(const std::string& run, const std::string& reason) {
  ReplicaObs* r = Find(run);
  r->phase = Phase::kEnded;
  r->end_reason = reason;
  r->phase_since_ms = now;
  r->in_flight = 0;
  ended_at_[run] = now;
  SpreadLoad();
}

ReplicaObs* FakeCluster::Find(const std::string& run) {
  for (ReplicaObs& r : replicas) {
    if (r.run == run) return &r;
  }
  return nullptr;
}

int FakeCluster::Count(const std::string& version, Phase phase) const {
  return static_cast<int>(std::count_if(replicas.begin(), replicas.end(), [&](const auto& r) {
    return r.version == version && r.phase == phase;
  }));
}
int FakeCluster::Live(const std::string& version) const {
  return static_cast<int>(std::count_if(replicas.begin(), replicas.end(), [&](const auto& r) {
    return r.version == version && r.phase != Phase::kEnded && r.phase != Phase::kDraining;
  }));
}
int FakeCluster::Ready() const {
  return static_cast<int>(std::count_if(replicas.begin(), replicas.end(),
                                        [&](const auto& r) { return r.phase == Phase::kReady; }));
}
int FakeCluster::FreeSlots() const {
  int used = 0;
  for (const ReplicaObs& r : replicas) used += r.phase != Phase::kEnded;
  return std::max(0, gpus_ - used);
}
bool FakeCluster::Saw(const std::string& msg_id) const { return Seen(msg_id) > 0; }
int FakeCluster::Seen(const std::string& msg_id) const {
  return static_cast<int>(std::count_if(events.begin(), events.end(),
                                        [&](const Event& e) { return e.msg_id == msg_id; }));
}
const Event* FakeCluster::Last(const std::string& msg_id) const {
  for (auto it = events.rbegin(); it != events.rend(); ++it) {
    if (it->msg_id == msg_id) return &*it;
  }
  return nullptr;
}

}  // namespace lathe::deploy

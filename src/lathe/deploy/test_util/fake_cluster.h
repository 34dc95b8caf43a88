// A small simulated node for the reconciler's tests: it keeps replicas as the
// daemon would report them, carries out each Decision (starts as pending
// runs, drains, stops), places pending replicas on free GPUs, and moves them
// through starting → ready (or a crash) by a per-version behaviour, on a fake
// clock. Nothing sleeps: Tick(step) advances `now` by `step`.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "lathe/deploy/reconcile.h"

namespace lathe::deploy {

struct VersionBehavior {
  int64_t ready_after_ms = 2000;  // starting → ready after this
  int64_t crash_after_ms = -1;    // ≥ 0: starting → ended (end_reason) after this, before ready
  bool never_ready = false;       // stays starting
  std::string end_reason = "exit 1";
};

class FakeCluster {
 public:
  explicit FakeCluster(int gpus) : gpus_(gpus) {}
  void SetGpus(int gpus) { gpus_ = gpus; }
  // Sets the load and spreads it at once (else it is spread after the next tick).
  void SetLoad(int64_t n) {
    load = n;
    SpreadLoad();
  }

  // One tick: the observations go to Reconcile, its Decision is carried out,
  // then the clock advances by `step_ms` and the replicas move on.
  const Decision& Tick(int64_t step_ms = 1000);
  // Ticks until `done` holds (true) or `max_ticks` pass (false).
  template <typename Pred>
  bool TickUntil(Pred done, int max_ticks = 1000, int64_t step_ms = 1000) {
    for (int i = 0; i < max_ticks; ++i) {
      Tick(step_ms);
      if (done()) return true;
    }
    return false;
  }

  // A ready replica of `version`, as if it had been running a while.
  std::string AddReady(const std::string& version);
  void Preempt(const std::string& run);  // ends it, preempted
  void Crash(const std::string& run, const std::string& reason = "exit 1");
  ReplicaObs* Find(const std::string& run);

  // Counts over the replicas as they are now.
  int Count(const std::string& version, ReplicaObs::Phase phase) const;
  int Live(const std::string& version) const;  // neither ended nor draining
  int Ready() const;                           // ready, all versions
  int FreeSlots() const;
  bool Saw(const std::string& msg_id) const;  // in any Decision so far
  int Seen(const std::string& msg_id) const;
  const Event* Last(const std::string& msg_id) const;
  int Starts(const std::string& version) const { return started_[version]; }

  Goal goal;
  State state;
  int64_t now = 1000000;
  int64_t load = 0;  // requests in flight, spread over the ready replicas
  std::map<std::string, VersionBehavior> behavior;
  std::vector<ReplicaObs> replicas;
  Decision last;
  std::vector<Event> events;  // every Decision's, in order
  int ticks = 0;
  // After each Decision that started replicas: the live ones (neither
  // draining nor ended) beyond max_replicas + the free slots it was given.
  int max_live_over_limit = -1000;
  bool lost_last_ready = false;  // a Decision left no ready replica while one was and
                                 // the deployment wanted one

 private:
  void Apply(const Decision& d, int free_before);
  void Advance(int64_t step_ms);
  void SpreadLoad();

  int gpus_;
  int seq_ = 0;
  mutable std::map<std::string, int> started_;
  std::map<std::string, int64_t> ended_at_;
};

}  // namespace lathe::deploy

// Test helpers for sched/: terse builders for inputs, queries on a Decision,
// and a tiny simulator that applies Decisions round after round.
#pragma once

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "lathe/sched/scheduler.h"

namespace lathe::sched::testing {

inline constexpr uint64_t kGiB = uint64_t{1} << 30;
inline constexpr int64_t kMinute = 60'000;

inline NodeState Node(int gpus, double cpus = 64, uint64_t memory = 512 * kGiB,
                      std::vector<int> unavailable = {}) {
  return NodeState{gpus, std::move(unavailable), cpus, memory};
}

inline QueuedJob Q(std::string id, int64_t seq, int gpus, int priority = kPriorityNormal,
                   std::optional<int64_t> max_duration_ms = std::nullopt) {
  QueuedJob j;
  j.id = std::move(id);
  j.seq = seq;
  j.priority = priority;
  j.req.gpus = gpus;
  j.max_duration_ms = max_duration_ms;
  return j;
}

inline QueuedJob WithCpuMem(QueuedJob j, double cpus, uint64_t memory = 0) {
  j.req.cpus = cpus;
  j.req.memory_bytes = memory;
  return j;
}

inline QueuedJob ByUser(QueuedJob j, std::string user, bool notebook = false) {
  j.user = std::move(user);
  j.notebook = notebook;
  return j;
}

inline RunningJob R(std::string id, std::vector<int> gpus, int priority = kPriorityNormal,
                    int64_t started_ms = 0, std::optional<int64_t> deadline_ms = std::nullopt) {
  RunningJob r;
  r.id = std::move(id);
  r.priority = priority;
  r.started_ms = started_ms;
  r.req.gpus = static_cast<int>(gpus.size());
  r.gpu_indices = std::move(gpus);
  r.deadline_ms = deadline_ms;
  return r;
}

inline RunningJob Stopping(RunningJob r) {
  r.stopping = true;
  return r;
}

inline RunningJob Pinned(RunningJob r) {
  r.preemptible = false;
  return r;
}

inline RunningJob WithCpuMem(RunningJob r, double cpus, uint64_t memory = 0) {
  r.req.cpus = cpus;
  r.req.memory_bytes = memory;
  return r;
}

inline std::vector<std::string> Started(const Decision& d) {
  std::vector<std::string> ids;
  for (const Placement& p : d.start) ids.push_back(p.id);
  return ids;
}

inline std::optional<std::vector<int>> GpusOf(const Decision& d, const std::string& id) {
  for (const Placement& p : d.start) {
    if (p.id == id) return p.gpu_indices;
  }
  return std::nullopt;
}

inline std::optional<WaitReason> WaitOf(const Decision& d, const std::string& id) {
  for (const Waiting& w : d.waiting) {
    if (w.id == id) return w.reason;
  }
  return std::nullopt;
}

inline std::vector<std::string> ImpossibleIds(const Decision& d) {
  std::vector<std::string> ids;
  for (const Unschedulable& u : d.impossible) ids.push_back(u.id);
  return ids;
}

// A canonical text form: equal text means equal decisions.
inline std::string Dump(const Decision& d) {
  std::string s;
  for (const Placement& p : d.start)
    s += fmt::format("start {} [{}]\n", p.id, fmt::join(p.gpu_indices, ","));
  for (const std::string& v : d.preempt) s += fmt::format("preempt {}\n", v);
  for (const Unschedulable& u : d.impossible)
    s += fmt::format("impossible {}: {}\n", u.id, u.reason);
  for (const Waiting& w : d.waiting) {
    s += fmt::format("wait {} {}: {}\n", w.id, WaitReasonName(w.reason), w.detail);
  }
  if (d.reservation) {
    const Reservation& r = *d.reservation;
    s += fmt::format("reservation {} shadow={} extra={}/{}/{} on=[{}]\n", r.id,
                     r.shadow_ms ? std::to_string(*r.shadow_ms) : "none", r.extra.gpus,
                     r.extra.cpus, r.extra.memory_bytes, fmt::join(r.waiting_on, ","));
  }
  return s;
}

// Applies Decisions to an in-memory node, one round at a time: started jobs
// become running (deadline = now + max_duration), victims become stopping and
// go back to the queue once they have stopped (at the next round).
class Sim {
 public:
  explicit Sim(NodeState node) : node_(std::move(node)) {}

  void Submit(QueuedJob j) {
    j.seq = next_seq_++;
    queued_.push_back(std::move(j));
  }
  void AddRunning(RunningJob r) { running_.push_back(std::move(r)); }

  // Removes a running job (it finished). False when not running.
  bool Finish(const std::string& id) {
    auto it = std::find_if(running_.begin(), running_.end(), [&](auto& r) { return r.id == id; });
    if (it == running_.end()) return false;
    running_.erase(it);
    return true;
  }

  // One round: stopping jobs exit (and are requeued), then Schedule is applied.
  Decision Step(int64_t now_ms) {
    ExitStopping();
    Decision d = Schedule(node_, queued_, running_, now_ms);
    Apply(d, now_ms);
    return d;
  }

  // Stopping jobs exit and go back to the queue (with a new seq).
  void ExitStopping() {
    for (auto it = running_.begin(); it != running_.end();) {
      if (!it->stopping) {
        ++it;
        continue;
      }
      QueuedJob back;
      back.id = it->id;
      back.priority = it->priority;
      back.seq = next_seq_++;
      back.req = it->req;
      back.max_duration_ms = max_duration_[it->id];
      queued_.push_back(back);
      it = running_.erase(it);
    }
  }

  // Starts become running, victims become stopping.
  void Apply(const Decision& d, int64_t now_ms) {
    for (const Placement& p : d.start) Launch(p, now_ms);
    for (const std::string& v : d.preempt) {
      for (RunningJob& r : running_) {
        if (r.id == v) r.stopping = true;
      }
    }
  }

  const std::vector<QueuedJob>& queued() const { return queued_; }
  const std::vector<RunningJob>& running() const { return running_; }
  bool IsRunning(const std::string& id) const {
    return std::any_of(running_.begin(), running_.end(),
                       [&](auto& r) { return r.id == id && !r.stopping; });
  }

 private:
  void Launch(const Placement& p, int64_t now_ms) {
    auto it = std::find_if(queued_.begin(), queued_.end(), [&](auto& q) { return q.id == p.id; });
    RunningJob r;
    r.id = it->id;
    r.priority = it->priority;
    r.started_ms = now_ms;
    r.gpu_indices = p.gpu_indices;
    r.req = it->req;
    if (it->max_duration_ms) r.deadline_ms = now_ms + *it->max_duration_ms;
    max_duration_[r.id] = it->max_duration_ms;
    running_.push_back(r);
    queued_.erase(it);
  }

  NodeState node_;
  std::vector<QueuedJob> queued_;
  std::vector<RunningJob> running_;
  std::map<std::string, std::optional<int64_t>> max_duration_;
  int64_t next_seq_ = 1;
};

}  // namespace lathe::sched::testing

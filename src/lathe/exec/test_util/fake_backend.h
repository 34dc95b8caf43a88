// An ExecutionBackend that runs nothing: each launched attempt is a record
// the test drives (it exits with a code, is killed, vanishes). The fake is
// owned by the test and outlives the daemons it is given to, the way
// processes outlive a daemon that is restarted; Readopt then answers from
// what the test made of each attempt.
//
// Thread-safe (Launch runs on the daemon's start threads).
#pragma once

#include <atomic>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "lathe/exec/backend.h"

namespace lathe::exec {

class FakeBackend final : public ExecutionBackend {
 public:
  struct Attempt {
    LaunchRequest request;
    AttemptPhase phase = AttemptPhase::kRunning;
    ExitRecord exit;
    std::vector<StopSignal> signals;
    bool released = false;
    std::string note;                  // what Poll says while the attempt is held (kStarting)
    std::string cluster_end;           // AttemptStatus::cluster_end once it ended
    int64_t checkpoints_recorded = 0;  // AttemptStatus::checkpoints_recorded
  };

  // What the test may change before or between calls.
  Capabilities caps = [] {
    Capabilities c;
    c.memory_limit = c.cpu_limit = true;
    return c;
  }();
  Status check = Status::OK();      // what Check answers
  std::string start_error;          // non-empty: Launch reports this start error
  bool exit_on_signal = true;       // a signal ends the attempt (as most programs do)
  std::optional<Found> readopt_as;  // overrides what Readopt derives
  std::vector<Endpoint> endpoints;  // what every attempt reports
  // Non-empty: a launched attempt is held (a cluster's queue: kStarting,
  // with this note) until Begin.
  std::string hold_note;
  PoolDescription description;    // what Describe answers
  std::atomic<int> describes{0};  // how many times it was asked

  // ---- driving attempts (the latest attempt of `run_id`) ----
  void Exit(const std::string& run_id, int code) {
    Drive(run_id, [&](Attempt& a) {
      a.phase = AttemptPhase::kExited;
      a.exit.exit_code = code;
    });
  }
  void KillBySignal(const std::string& run_id, int signal) {
    Drive(run_id, [&](Attempt& a) {
      a.phase = AttemptPhase::kExited;
      a.exit.signal = signal;
    });
  }
  void Begin(const std::string& run_id) {
    Drive(run_id, [](Attempt& a) {
      a.phase = AttemptPhase::kRunning;
      a.note.clear();
    });
  }
  // Ended by the cluster (PREEMPTED, NODE_FAIL, TIMEOUT): the program got
  // SIGTERM; or, with `exit_code`, it exited with that code on its own as
  // the cluster was deciding.
  void EndByCluster(const std::string& run_id, const std::string& state,
                    std::optional<int> exit_code = std::nullopt) {
    Drive(run_id, [&](Attempt& a) {
      a.phase = AttemptPhase::kExited;
      if (exit_code) {
        a.exit.exit_code = exit_code;
      } else {
        a.exit.signal = 15;
        a.exit.stop_signal = 15;
      }
      a.cluster_end = state;
    });
  }
  // Its node recorded one more finished checkpoint (a cluster's pool).
  void RecordCheckpoint(const std::string& run_id) {
    Drive(run_id, [](Attempt& a) { ++a.checkpoints_recorded; });
  }
  void Vanish(const std::string& run_id) {
    Drive(run_id, [](Attempt& a) { a.phase = AttemptPhase::kGone; });
  }
  // Copies, for assertions.
  std::optional<Attempt> Get(const std::string& run_id, int attempt) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = attempts_.find({run_id, attempt});
    if (it == attempts_.end()) return std::nullopt;
    return it->second;
  }
  int Launches(const std::string& run_id) {
    std::lock_guard<std::mutex> lock(mu_);
    int n = 0;
    for (const auto& [key, a] : attempts_) n += key.first == run_id;
    return n;
  }

  // ---- ExecutionBackend ----
  std::string_view Name() const override { return "fake"; }
  Capabilities Caps() const override { return caps; }
  Status Check(const run::RunSpec&, const RunUser&) const override { return check; }
  Result<Json> Prepare(const LaunchRequest& request) override {
    return Json{{"prepared", request.run_id}};
  }
  Result<Launched> Launch(const LaunchRequest& request, const Json&) override {
    std::lock_guard<std::mutex> lock(mu_);
    Attempt& a = attempts_[{request.run_id, request.attempt}];
    a.request = request;
    Launched out;
    out.handle = Json{{"run", request.run_id}, {"attempt", request.attempt}};
    out.what = "fake " + request.run_id;
    if (!hold_note.empty()) {
      a.phase = AttemptPhase::kStarting;
      a.note = hold_note;
    }
    if (!start_error.empty()) {
      a.phase = AttemptPhase::kExited;
      a.exit.start_error = start_error;
      out.start_error = start_error;
    }
    return out;
  }
  std::vector<AttemptStatus> Poll(const std::vector<AttemptRef>& refs) override {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<AttemptStatus> out;
    for (const auto& ref : refs) {
      AttemptStatus s;
      auto it = attempts_.find({ref.run_id, ref.attempt});
      if (it == attempts_.end() || !ref.handle.contains("run")) {
        out.push_back(s);  // not launched yet
        continue;
      }
      s.phase = it->second.phase;
      s.exit = it->second.exit;
      s.note = it->second.note;
      s.cluster_end = it->second.cluster_end;
      s.checkpoints_recorded = it->second.checkpoints_recorded;
      if (s.phase == AttemptPhase::kGone) s.why = "the fake attempt vanished";
      out.push_back(s);
    }
    return out;
  }
  Status Signal(const AttemptRef& ref, StopSignal signal) override {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = attempts_.find({ref.run_id, ref.attempt});
    if (it == attempts_.end()) return Status::OK();
    Attempt& a = it->second;
    a.signals.push_back(signal);
    if (exit_on_signal && a.phase == AttemptPhase::kRunning) {
      a.phase = AttemptPhase::kExited;
      a.exit.signal = signal == StopSignal::kGraceful ? 15 : 9;
    }
    return Status::OK();
  }
  void Release(const AttemptRef& ref) override {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = attempts_.find({ref.run_id, ref.attempt});
    if (it != attempts_.end()) it->second.released = true;
  }
  Readoption Readopt(const AttemptRef& ref) override {
    std::lock_guard<std::mutex> lock(mu_);
    Readoption r;
    r.handle = ref.handle;
    auto it = attempts_.find({ref.run_id, ref.attempt});
    if (it == attempts_.end()) {
      r.what = Found::kNeverStarted;
    } else if (it->second.phase == AttemptPhase::kExited) {
      r.what = Found::kExited;
      r.exit = it->second.exit;
    } else if (it->second.phase == AttemptPhase::kRunning) {
      r.what = Found::kAlive;
    } else {
      r.what = Found::kGone;
      r.why = "the fake attempt vanished";
    }
    if (readopt_as) r.what = *readopt_as;
    return r;
  }
  std::vector<Endpoint> Endpoints(const AttemptRef&) override {
    std::lock_guard<std::mutex> lock(mu_);
    return endpoints;
  }
  std::string LogPath(const std::string& run_dir) const override { return run_dir + "/log"; }
  PoolDescription Describe() override {
    describes++;
    return description;
  }

 private:
  // Applies `change` to the latest attempt of `run_id`; a run never launched
  // is a mistake in the test, which then fails on what it expected.
  template <typename Change>
  void Drive(const std::string& run_id, Change change) {
    std::lock_guard<std::mutex> lock(mu_);
    Attempt* latest = nullptr;
    for (auto& [key, a] : attempts_) {
      if (key.first == run_id) latest = &a;  // ordered by attempt
    }
    if (latest != nullptr) change(*latest);
  }

  std::mutex mu_;
  std::map<std::pair<std::string, int>, Attempt> attempts_;
};

}  // namespace lathe::exec

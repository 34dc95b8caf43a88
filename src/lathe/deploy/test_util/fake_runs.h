// A run supervisor in memory for the deployment manager's tests
// (deployments_test.cc), as exec/test_util/fake_backend.h is for the
// supervisor's: Submit records the run queued, and the test moves runs
// through their states (SetState) as a scheduler and monitors would.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "lathe/daemon/runs.h"
#include "lathe/daemon/sharing.h"
#include "lathe/os/clock.h"
#include "lathe/run/profile.h"

namespace lathe::deploy {

class FakeRuns final : public daemon::Runs {
 public:
  explicit FakeRuns(const std::string& home) {
    paths_.home = home;
    paths_.db = home + "/lathe.db";
    paths_.runs = home + "/runs";
    sharing_ = std::make_unique<daemon::Sharing>(paths_.db, os::RealClock());
  }

  daemon::Sharing& sharing() override { return *sharing_; }

  const daemon::HomePaths& paths() const override { return paths_; }
  uid_t uid() const override { return ::geteuid(); }
  const std::string& self_exe() const override { return self_exe_; }
  std::string UserCacheDir(uid_t uid) const override {
    return paths_.home + "/deployments/users/" + std::to_string(uid);
  }
  bool CanIsolateNetwork() const override { return false; }
  Status CheckFitsNode(const run::RunSpec&) const override { return Status::OK(); }
  // Every image is known: its id is 64 'b's.
  Status ResolveImage(const daemon::Caller&, run::RunSpec& spec) override {
    if (!spec.image.empty() && spec.image_id.empty()) spec.image_id = std::string(64, 'b');
    return Status::OK();
  }
  daemon::GpuSlots FreeGpuSlots() override {
    std::lock_guard<std::mutex> lock(mu_);
    return gpus_;
  }
  Result<Json> ResolveProfile(const Json& spec_json,
                              std::vector<std::string>& filled) const override {
    return run::ResolveProfile(profiles_, spec_json, filled);
  }
  // Set before the manager runs.
  void SetProfiles(std::map<std::string, run::Profile> profiles) {
    profiles_ = std::move(profiles);
  }

  Result<daemon::Submission> Submit(const daemon::Caller& caller, run::RunSpec spec,
                                    const daemon::SubmitOptions& options) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (!refuse_.ok()) return refuse_;
    state::RunRecord r;
    r.id = "r" + std::to_string(++seq_);
    r.name = spec.name;
    r.uid = caller.uid;
    r.user = caller.user;
    r.kind = run::RunKind::kService;
    r.spec = std::move(spec);
    r.state = run::RunState::kQueued;
    r.seq = seq_;
    submitted_options_.push_back(options);
    runs_[r.id] = r;
    return daemon::Submission{r, false};
  }
  Result<state::RunRecord> StopRun(const daemon::Caller&, const std::string& ref) override {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = runs_.find(ref);
    if (it == runs_.end()) return Status::NotFound(ref);
    if (!run::IsTerminal(it->second.state)) it->second.state = run::RunState::kStopping;
    stopped_.push_back(ref);
    return it->second;
  }
  Result<state::RunRecord> Access(const daemon::Caller&, const std::string& ref,
                                  daemon::AccessAction) override {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = runs_.find(ref);
    if (it == runs_.end()) return Status::NotFound(ref);
    return it->second;
  }
  Result<std::vector<state::RunRecord>> ReplicasOf(const std::string& name,
                                                   int64_t ended_since_ms) override {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<state::RunRecord> out;
    for (const auto& [id, r] : runs_) {
      if (r.spec.deployment != name) continue;
      if (run::IsTerminal(r.state) && r.finished_at_ms < ended_since_ms) continue;
      out.push_back(r);
    }
    return out;
  }
  std::string WaitingWhy(const std::string& run_id) override {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = waiting_why_.find(run_id);
    return it == waiting_why_.end() ? "" : it->second;
  }
  Result<std::vector<std::string>> LiveReplicaSockets() override {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<std::string> out;
    for (const auto& [id, r] : runs_)
      if (!run::IsTerminal(r.state)) out.push_back(r.spec.deployment_socket);
    return out;
  }
  Result<snap::Store*> SnapshotStore() override {
    return Status::FailedPrecondition("no snapshot store in FakeRuns");
  }
  void SettleCheckpoints(const std::string&) override {}
  Result<os::AccessAs> CheckReadSource(const daemon::Caller&, const std::string&,
                                       const std::string&) override {
    return Status::FailedPrecondition("no paths in FakeRuns");
  }
  Result<daemon::Restored> RestoreSnapshotTo(const daemon::Caller&, const snap::SnapshotId&,
                                             const std::string&, bool) override {
    return Status::FailedPrecondition("no snapshots in FakeRuns");
  }
  Status CheckRestorePlace(const daemon::Caller&, const std::string&) override {
    return Status::FailedPrecondition("no restores in FakeRuns");
  }

  // --- the test's side ---
  // Moves run `id` to `to`; an ended state records `finished_at_ms` and `reason`.
  void SetState(const std::string& id, run::RunState to, int64_t finished_at_ms = 0,
                const std::string& reason = "") {
    std::lock_guard<std::mutex> lock(mu_);
    auto& r = runs_.at(id);
    r.state = to;
    if (run::IsTerminal(to)) {
      r.finished_at_ms = finished_at_ms;
      r.reason = reason;
    }
  }
  // Why run `id` is being stopped (`lathe stop`: kUser).
  void SetStopIntent(const std::string& id, run::StopIntent intent) {
    std::lock_guard<std::mutex> lock(mu_);
    runs_.at(id).stop_intent = intent;
  }
  // The runs of deployment `name` in `state`, oldest first.
  std::vector<state::RunRecord> In(const std::string& name, run::RunState state) {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<state::RunRecord> out;
    for (const auto& [id, r] : runs_)
      if (r.spec.deployment == name && r.state == state) out.push_back(r);
    std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.seq < b.seq; });
    return out;
  }
  std::vector<std::string> Stopped() {
    std::lock_guard<std::mutex> lock(mu_);
    return stopped_;
  }
  std::vector<daemon::SubmitOptions> SubmittedOptions() {
    std::lock_guard<std::mutex> lock(mu_);
    return submitted_options_;
  }
  // What the scheduler says a queued run waits for ("" clears it).
  void SetWaiting(const std::string& id, const std::string& why) {
    std::lock_guard<std::mutex> lock(mu_);
    waiting_why_[id] = why;
  }
  void SetGpus(int total, int free) {
    std::lock_guard<std::mutex> lock(mu_);
    gpus_ = {total, free};
  }

 private:
  daemon::HomePaths paths_;
  std::unique_ptr<daemon::Sharing> sharing_;
  const std::string self_exe_ = "/usr/bin/lathe";
  std::mutex mu_;
  std::map<std::string, state::RunRecord> runs_;
  std::vector<std::string> stopped_;
  std::map<std::string, std::string> waiting_why_;
  std::vector<daemon::SubmitOptions> submitted_options_;
  daemon::GpuSlots gpus_{0, 0};
  std::map<std::string, run::Profile> profiles_;
  Status refuse_;
  int64_t seq_ = 0;
};

}  // namespace lathe::deploy

// The two warnings telemetry gives about a run, each at most once per run:
//
//   idle       the run holds GPUs and every sample for `idle_ms` (default
//              10 min) found each of them under `idle_pct` (default 5 %)
//              utilization: GPUs allocated but idle. A sample whose
//              utilization is unknown ends the stretch (what cannot be seen
//              is not idle).
//   throttled  a GPU of the run was clock-throttled (any reason but the
//              benign gpu_idle) for at least `throttle_share_pct` (default
//              20 %) of the run's observed time, once at least
//              `throttle_min_ms` (default 5 min) has been observed; the
//              warning names the reasons, the longest first.
//
// Driven only by the samples' times, so tests feed a fake clock's. Not
// thread-safe: the sampler's thread alone calls it.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace lathe::telemetry {

struct WarningOptions {
  int idle_pct = 5;
  int64_t idle_ms = 600'000;
  int throttle_share_pct = 20;
  int64_t throttle_min_ms = 300'000;
};

// What one sample says of a run, as the warnings need it.
struct RunObservation {
  int64_t t_ms = 0;
  int gpus_held = 0;
  // The highest utilization among its GPUs; nullopt when any is unknown.
  std::optional<int> max_utilization_pct;
  // The run's totals so far (its summary): observed and throttled time, and
  // throttled time per reason name.
  int64_t observed_ms = 0;
  int64_t throttled_ms = 0;
  std::map<std::string, int64_t> reason_ms;
};

struct UsageWarning {
  enum class Kind { kIdle, kThrottled } kind = Kind::kIdle;
  std::string msg_id;  // telemetry.idle_gpus | telemetry.throttled
  std::map<std::string, std::string> args;
};

class UsageWarnings {
 public:
  explicit UsageWarnings(WarningOptions options = {}) : opts_(options) {}

  // The warnings `o` gives rise to for `run_id` now; `told_idle` and
  // `told_throttled` (what the run was already told, e.g. before a restart)
  // are updated.
  std::vector<UsageWarning> Observe(const std::string& run_id, const RunObservation& o,
                                    bool& told_idle, bool& told_throttled);
  // Forgets a run that ended.
  void Forget(const std::string& run_id) { idle_since_.erase(run_id); }
  const WarningOptions& options() const { return opts_; }

 private:
  const WarningOptions opts_;
  std::map<std::string, int64_t> idle_since_;  // run id → first sample of its idle stretch
};

}  // namespace lathe::telemetry

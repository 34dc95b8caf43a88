// Quotas and fair share, as config.yaml sets them (docs/quotas.md):
//
//   quotas:
//     default:              # every user without an entry of their own
//       gpus: 2             # GPUs held at once
//       runs: 4             # runs active at once (starting, running, stopping)
//       notebooks: 1        # runs of type notebook active at once
//       gpu_hours: 100      # GPU-hours per period, a rolling window
//       period: 7d          # of gpu_hours (default 7d)
//       disk: 50GiB         # the daemon's disk its runs' directories take (disk_shares.h);
//                           # a new run is refused once they take this much
//     alice: {gpus: 4}      # a user
//     "@students": {gpus: 1, gpu_hours: 20}   # each member of Unix group students
//     projects:             # projects (daemon/sharing.h), by name: one budget
//       vision: {gpus: 2, gpu_hours: 100}     # for all the runs naming the project
//   fair_share:
//     half_life: 7d         # how fast past usage is forgotten; 0: off (FIFO)
//
// Every field is a whole number 0 or more (gpu_hours: a number; disk: a size), or
// `unlimited`. A field is taken, one by one, from the user's own entry, else
// from the first "@group" entry in the file's order that sets it and whose
// group the user is in, else from `default`, else it is unlimited; `period`
// goes with the gpu_hours it came with. A group entry gives each member the
// limits (the group's members do not share them).
//
// A project's entry limits all the runs and notebooks whose spec names the
// project together, whoever submitted them, on top of each user's own
// limits: a run starts only when both allow it. Its fields are gpus, runs,
// notebooks, gpu_hours and period (no disk: the disk is counted per user);
// a field it leaves out is not limited for the project.
//
// Usage is counted from the state store's gpu_attempts (state/run_store.h)
// with sched/usage.h: GPU-hours in the window [now − period, now] and the
// decayed usage of fair share.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "lathe/common/status.h"
#include "lathe/sched/scheduler.h"

namespace YAML {
class Node;
}

namespace lathe::daemon {

inline constexpr int64_t kDefaultQuotaPeriodMs = 7LL * 24 * 3600 * 1000;
inline constexpr int64_t kDefaultHalfLifeMs = 7LL * 24 * 3600 * 1000;
inline constexpr int kUnlimited = -1;
inline constexpr double kUnlimitedHours = -1;

// One entry; unset fields inherit (see above), kUnlimited/kUnlimitedHours
// is an explicit `unlimited`.
struct QuotaEntry {
  std::optional<int> gpus;
  std::optional<int> runs;
  std::optional<int> notebooks;
  std::optional<double> gpu_hours;
  std::optional<int64_t> period_ms;
  std::optional<int64_t> disk_bytes;  // kUnlimited: `unlimited`
};

struct QuotaConfig {
  std::optional<QuotaEntry> default_entry;
  std::map<std::string, QuotaEntry> users;
  std::vector<std::pair<std::string, QuotaEntry>> groups;  // without '@', file order
  std::map<std::string, QuotaEntry> projects;              // `projects:`, by project name
  int64_t half_life_ms = kDefaultHalfLifeMs;               // 0: fair share off

  bool HasLimits() const {
    return default_entry || !users.empty() || !groups.empty() || !projects.empty();
  }
};

// A user's limits and, per field, the entry it came from ("alice",
// "@students", "default"; absent: unlimited).
struct ResolvedQuota {
  sched::QuotaLimits limits;
  std::optional<uint64_t> disk_bytes;         // not the scheduler's: checked at submission
  std::map<std::string, std::string> source;  // "gpus" -> "default"
};

ResolvedQuota ResolveQuota(const QuotaConfig& c, const std::string& user,
                           const std::vector<std::string>& groups);

// The limits of project `project`: its own entry's fields, nothing else
// (none when it has no entry); period_ms is set when gpu_hours is.
sched::QuotaLimits ProjectQuota(const QuotaConfig& c, const std::string& project);

// Parses `quotas:` into `c` (its entries); `file` names the file in errors
// (catalog ids quota.*, naming quotas.<entry>.<field>).
Status ParseQuotas(const YAML::Node& node, std::string_view file, QuotaConfig& c);
// Parses `fair_share:` into c.half_life_ms.
Status ParseFairShare(const YAML::Node& node, std::string_view file, QuotaConfig& c);

}  // namespace lathe::daemon

// The cluster group: for each Slurm pool of the daemon's config, the
// failures people hit first when a team moves to a cluster — the controller
// does not answer, munge does not round-trip, the clocks differ, the
// partition is wrong or has no GPUs, shared_dir is not writable or not
// really shared, the nodes do not find lathe_path. The facts come from
// cluster_probes.h; these functions only decide. Each multi check reports
// one finding per pool, or one skipped finding that says why there is
// nothing to check.
#pragma once

#include <cstdint>
#include <vector>

#include "lathe/doctor/check.h"

namespace lathe::doctor {

Finding CheckClusterPools(const SystemView& view, const Facts& facts);
std::vector<Finding> CheckClusterPing(const SystemView& view, const Facts& facts);
std::vector<Finding> CheckClusterMunge(const SystemView& view, const Facts& facts);
std::vector<Finding> CheckClusterClock(const SystemView& view, const Facts& facts);
std::vector<Finding> CheckClusterPartition(const SystemView& view, const Facts& facts);
std::vector<Finding> CheckClusterSharedDir(const SystemView& view, const Facts& facts);
std::vector<Finding> CheckClusterSharedJob(const SystemView& view, const Facts& facts);
std::vector<Finding> CheckClusterLathePath(const SystemView& view, const Facts& facts);

// Clock skew against the controller above which the check warns, and above
// which it fails (munge rejects credentials older than its TTL, 300 s by
// default, as expired, and ones from the future as rewound).
inline constexpr int64_t kClockSkewWarnMs = 5000;
inline constexpr int64_t kClockSkewFailMs = 120000;

}  // namespace lathe::doctor

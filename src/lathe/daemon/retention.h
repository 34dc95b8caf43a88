// Retention: which finished runs go, on request (`lathe rm --finished
// --older-than 30d`, POST /api/v1/runs/prune) and by the daemon's own policy
// (config.yaml `retention:`, applied by the supervisor loop every
// kRetentionEveryMs). The removal itself is Daemon::PruneRuns
// (retention.cc), which removes each selected run as DeleteRun does.
//
// A queued or active run is never selected: only a run in a terminal state
// (run::IsTerminal) that ended at least `older_than_ms` before now. A run
// whose end was never recorded (finished_at_ms 0, as an old Lathe may have
// left it) counts as ended when it was created.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <vector>

#include "lathe/state/run_store.h"

namespace lathe::daemon {

// The daemon's retention policy (config.yaml). 0 keeps every run forever,
// which is the default.
struct RetentionPolicy {
  int64_t finished_runs_ms = 0;  // remove finished runs that ended this long ago; 0: never
  bool snapshots = false;        // with them, their snapshots (else those stay in the store)
};

// How often the supervisor loop applies the policy (the first time when the
// daemon starts), and how many runs one pass removes at most: the loop does
// nothing else meanwhile, so a larger backlog goes in several passes, one per
// loop period.
inline constexpr int64_t kRetentionEveryMs = 3600 * 1000;
inline constexpr size_t kRetentionBatch = 200;

// What to remove. `uid` nullopt: every user's runs (only an admin may ask).
struct PruneRequest {
  int64_t older_than_ms = 0;  // ended at least this long ago; 0: every finished run
  std::optional<uid_t> uid;
  bool dry_run = false;    // select and answer, remove nothing
  bool snapshots = false;  // also the runs' snapshots (but those a model version pins)
  size_t limit = 0;        // at most this many, oldest first; 0: no limit
};

// When `r` ended, for retention (see above).
int64_t EndedAtMs(const state::RunRecord& r);

// The runs of `runs` that `req` selects at `now_ms`, oldest end first (ties by
// id), at most req.limit. Pure: no clock, no store.
std::vector<state::RunRecord> SelectForRemoval(const std::vector<state::RunRecord>& runs,
                                               const PruneRequest& req, int64_t now_ms);

}  // namespace lathe::daemon

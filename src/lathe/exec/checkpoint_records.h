// The checkpoint records of an attempt whose node is not the daemon's (a
// Slurm job): the daemon's inotify does not see writes another NFS client
// makes, so the monitor on the node watches the run's checkpoint directory
// where the run writes, and appends one line to
// <attempt dir>/checkpoints.jsonl per settled burst of finished files:
//   {"seq": 3, "at_ms": 1765000000000, "paths": ["ckpt_000150.pt"]}
// The backend counts the lines on each poll (AttemptStatus::
// checkpoints_recorded) and the daemon captures a snapshot of the directory,
// as the user, when the count grows. Only complete lines count: a line being
// written when the node died is not a record.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "lathe/common/json.h"
#include "lathe/common/status.h"

namespace lathe::exec {

struct CheckpointRecord {
  int64_t seq = 0;                 // 1, 2, ... within the attempt
  int64_t at_ms = 0;               // when the burst settled (the node's clock)
  std::vector<std::string> paths;  // what changed, relative to the checkpoint directory
};
Json CheckpointRecordToJson(const CheckpointRecord& r);

// Appends `r` as one line (O_APPEND, created 0600 when missing), then fsyncs:
// a record the daemon counts is one a crash of the node does not take back.
Status AppendCheckpointRecord(const std::string& path, const CheckpointRecord& r);

// The number of complete lines in `path`; 0 when it does not exist.
Result<int64_t> CountCheckpointRecords(const std::string& path);

}  // namespace lathe::exec

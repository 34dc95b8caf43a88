// What Slurm says about jobs, read into Lathe's terms: squeue's and sacct's
// output, a job state's meaning for an attempt, and the exit record Slurm's
// account of a job implies when the monitor left none. Pure functions.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "lathe/exec/attempt_records.h"

namespace lathe::exec {

// Where a Slurm job state puts an attempt.
enum class SlurmJobClass {
  kQueued,   // PENDING, CONFIGURING, REQUEUED, REQUEUE_HOLD/FED, RESV_DEL_HOLD: kStarting
  kRunning,  // RUNNING, COMPLETING, SUSPENDED, STOPPED, SIGNALING, RESIZING, STAGE_OUT: kRunning
  kEnded,    // COMPLETED, FAILED, CANCELLED, TIMEOUT, PREEMPTED, NODE_FAIL, OUT_OF_MEMORY,
             // BOOT_FAIL, DEADLINE, SPECIAL_EXIT, REVOKED
  kUnknown,  // anything else (a later Slurm's new state): treated as still there
};
// `state` as squeue (%T) or sacct print it; sacct's "CANCELLED by 1001" counts
// as CANCELLED. Case-sensitive, as Slurm prints them.
SlurmJobClass ClassifySlurmState(std::string_view state);

// One job in squeue's answer.
struct SlurmQueueEntry {
  std::string state;   // %T: "PENDING"
  std::string reason;  // %r: "Resources", "None"
};
// The format squeue is asked for, and its output read: one "id|state|reason"
// line per job; lines that do not parse are skipped.
inline constexpr char kSqueueFormat[] = "%i|%T|%r";
std::map<std::string, SlurmQueueEntry> ParseSqueue(std::string_view out);

// "PENDING (Resources)", "RUNNING"; a reason of "None" is left out.
std::string SlurmNote(const SlurmQueueEntry& e);

// How a job ended by Slurm's accounting.
struct SlurmJobEnd {
  std::string state;  // first word of sacct's State: "CANCELLED"
  int exit_code = 0;  // ExitCode's first half
  int signal = 0;     // ExitCode's second half
};
// `sacct -n -P --format=JobID,State,ExitCode` output: each job's own line
// (the steps' "ID.batch" lines are skipped).
std::map<std::string, SlurmJobEnd> ParseSacct(std::string_view out);

// The exit record of a job that ended (`end.state` classified kEnded)
// without an exit.json; nullopt for a state that has not ended.
// `run_started`: the monitor had started the run (monitor.json exists);
// when it had not, the record is a start error naming the state and
// `detail` (the end of Slurm's output file: "exec: lathe: not found"),
// except for CANCELLED (a job stopped while it was queued), which is a
// signal as below.
// COMPLETED and FAILED keep the exit code (FAILED without one: 1), a signal
// wins when there is one, OUT_OF_MEMORY is an OOM kill, the other ends are
// SIGTERM (what Slurm sends first) or SIGKILL (NODE_FAIL).
std::optional<ExitRecord> SlurmExitRecord(const SlurmJobEnd& end, bool run_started,
                                          std::string_view detail, int64_t now_ms);

}  // namespace lathe::exec

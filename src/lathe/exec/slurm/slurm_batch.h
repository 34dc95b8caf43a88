// What the Slurm backend writes and runs to submit one attempt, as pure
// functions of the pool's options and the launch request (golden-file tests
// in slurm_batch_test.cc hold them).
//
// On the shared file system, as the run's user:
//   <shared_dir>/<user>/                 0700, the user's (made if missing)
//   <shared_dir>/<user>/<run_id>/log     the run's log (CRI format), every attempt appends
//   <shared_dir>/<user>/<run_id>/<N>/    the attempt: launch.json, job.sh, slurm.out
//                                        (Slurm's own messages), monitor.json, exit.json,
//                                        checkpoints.jsonl (when the run has a checkpoint dir)
// <user> is the user's name, or the uid in digits without a passwd entry.
// The batch script only execs the monitor: everything about the run (argv,
// environment, identity, log) is in launch.json, never in shell text.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "lathe/exec/attempt_records.h"
#include "lathe/exec/backend.h"
#include "lathe/exec/slurm/slurm_options.h"

namespace lathe::exec {

struct SlurmAttemptPaths {
  std::string user_dir;   // <shared_dir>/<user>
  std::string run_dir;    // <user_dir>/<run_id>
  std::string log;        // <run_dir>/log
  std::string dir;        // <run_dir>/<attempt>
  std::string launch;     // <dir>/launch.json
  std::string script;     // <dir>/job.sh
  std::string slurm_out;  // <dir>/slurm.out: sbatch's --output and --error
  std::string monitor;    // <dir>/monitor.json
  std::string exit;       // <dir>/exit.json
  // <dir>/checkpoints.jsonl: one line per finished checkpoint, appended by
  // the monitor on the node (snap/checkpoint_records.h)
  std::string checkpoints;
};
// `user` is the user's directory name (SlurmUserDirName).
SlurmAttemptPaths SlurmPaths(const std::string& shared_dir, const std::string& user,
                             const std::string& run_id, int attempt);
// The user's name, or the uid in digits when there is none.
std::string SlurmUserDirName(uid_t uid, const std::string& name);

// `s` as one word for a POSIX shell: in single quotes, each ' as '\''.
std::string ShellQuote(std::string_view s);

// A path for sbatch's --output/--error, where Slurm expands %j, %u, ...:
// each % doubled so that the file is the one named. A path with a backslash
// is left as it is (Slurm expands nothing in such a path).
std::string SlurmFilenameLiteral(std::string_view path);

// The batch script: `exec <lathe_path> __monitor <launch> -`, every word
// quoted, after SLURM_EXPORT_ENV=ALL (which the run inherits with SLURM_*:
// an srun inside the run passes the run's environment on, not --export=NONE's).
std::string SlurmBatchScript(const std::string& lathe_path, const std::string& launch_path);

// What a job asks of Slurm beyond its files, derived once from the pool and
// the request: sbatch's options (SbatchArgv) and slurmrestd's job properties
// (slurm_rest.h) are two spellings of it.
struct SlurmJobShape {
  int nodes = 1;              // request.nodes, at least 1
  std::string partition;      // the request's, else the pool's; "" = the default
  std::string account, qos;   // the pool's; "" = none
  std::string gres;           // per node: "gpu:N" or "gpu:TYPE:N"; "" = none
  int64_t cpus_per_task = 0;  // whole CPUs, rounded up; 0 = not asked
  int64_t memory_mib = 0;     // rounded up; 0 = not asked
  int64_t time_minutes = 0;   // SlurmTimeLimitMinutes; 0 = no limit asked
};
SlurmJobShape SlurmJobShapeOf(const SlurmPoolOptions& pool, const LaunchRequest& request);

// sbatch's arguments, each its own argv element (no shell): `sbatch` is the
// command's path. --parsable, --job-name=lathe-<run_id>,
// --comment=lathe:<run_id>:<attempt>, --chdir, --output/--error,
// --no-requeue, --signal=B:USR1@<grace s> (at most half the time limit),
// --export=ALL (of the clean environment sbatch runs with), the pool's
// partition/account/qos, --nodes=M (request.nodes; with more than one,
// --ntasks-per-node=1), --gres=gpu:N (per node), --cpus-per-task,
// --mem=<MiB>M and --time=<minutes> when asked for, then the script.
std::vector<std::string> SbatchArgv(const std::string& sbatch, const SlurmPoolOptions& pool,
                                    const LaunchRequest& request, const SlurmAttemptPaths& paths);

// The run's directory for sbatch --chdir and the monitor: the request's
// workdir, else the user's home, else "/".
std::string SlurmWorkdir(const LaunchRequest& request);

// What the monitor on the node reads: the run's complete environment (as for
// a local run: LocalBackend::Environment, no GPU placed), Slurm's GPU choice
// and SLURM_* inherited on the node (inherit_env), the user's identity, the
// log and records in the shared attempt directory, no cgroups; with a time
// limit, the warning's time (warn_after_ms: --time less SlurmWarnSeconds).
LaunchConfig SlurmLaunchConfig(const SlurmPoolOptions& pool, const LaunchRequest& request,
                               const SlurmAttemptPaths& paths);

// How many seconds ahead of the time limit the job is warned (--signal's
// @time): the pool's signal_grace, at most half the time limit; 0: none.
int64_t SlurmWarnSeconds(const SlurmPoolOptions& pool, const LaunchRequest& request);
// The variables a run in a Slurm job takes from the job's environment.
inline const std::vector<std::string> kSlurmInheritedEnv = {
    "CUDA_VISIBLE_DEVICES", "GPU_DEVICE_ORDINAL", "ROCR_VISIBLE_DEVICES", "SLURM_*",
    "SLURMD_NODENAME"};

// The whole environment of a Slurm command: PATH (the pool's bin_dir first),
// SLURM_CONF when the pool sets one, and for a user HOME, USER and LOGNAME.
// Nothing of the daemon's own (no SLURM_* or SBATCH_* leaks into a job).
std::map<std::string, std::string> SlurmCommandEnv(const SlurmPoolOptions& pool,
                                                   const RunUser* user);

// A Slurm command's path: <bin_dir or /usr/bin>/<name>.
std::string SlurmCommandPath(const SlurmPoolOptions& pool, std::string_view name);

// Whole minutes for --time, rounded up (at least 1).
int64_t SlurmTimeLimitMinutes(int64_t time_limit_ms);

}  // namespace lathe::exec

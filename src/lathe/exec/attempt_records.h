// The files an attempt's monitor and the local backend share, in the
// attempt's directory (<run dir>/attempt-N/, the daemon's):
//   launch.json   written by the backend before it spawns the monitor: what
//                 to run, as whom, where its output goes (LaunchConfig);
//   monitor.json  written by the monitor once the run's process is started:
//                 both pids and their start times (MonitorRecord);
//   exit.json     written atomically by the monitor when the run has ended
//                 (ExitRecord). ExitRecord is also what every backend
//                 reports for an attempt that ended (backend.h).
// The formats are kept stable across versions: a monitor started by an older
// Lathe is re-adopted by a newer daemon through these files.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "lathe/common/json.h"
#include "lathe/common/status.h"
#include "lathe/os/env.h"

namespace lathe::exec {

// A run in a container image (exec/container/podman.h): the monitor runs
// `argv` (podman run ...) instead of the run's own argv, as root with `env`
// as podman's complete environment, and podman runs the program as the
// run's user. Each of `mounts` is opened as the run's user and bound onto
// `stage` (a directory of root's in the attempt's directory) in the
// monitor's own mount namespace before podman starts, so podman mounts what
// the user could reach and nothing a path swapped meanwhile points at.
// `cleanup_argv` (podman rm -f) runs when the attempt has ended.
// `sidecar_argv` (a command replica's relay, which is Lathe's and not in the
// image) is started beside podman as the run's user with the run's
// environment, in its cgroups and network namespace, and ends with podman
// (SIGTERM when podman's process exits: PR_SET_PDEATHSIG).
struct ContainerMount {
  std::string source;  // the user's path, also where the run sees it
  std::string stage;   // where it is bound for podman
  bool readonly = false;
  friend bool operator==(const ContainerMount&, const ContainerMount&) = default;
};
struct ContainerLaunch {
  std::vector<std::string> argv;
  std::map<std::string, std::string> env;
  std::vector<ContainerMount> mounts;
  std::vector<std::string> cleanup_argv;
  std::vector<std::string> sidecar_argv;
  bool empty() const { return argv.empty(); }
};

struct LaunchConfig {
  std::string run_id;
  int attempt = 0;
  std::vector<std::string> argv;
  std::map<std::string, std::string> env;  // the complete environment
  // Variables the monitor copies from its own environment over `env` when it
  // has them: a name, or a prefix ending in '*' ("SLURM_*"). How a run in a
  // Slurm job sees what Slurm chose for it (CUDA_VISIBLE_DEVICES). Empty for
  // a local run.
  std::vector<std::string> inherit_env;
  std::string workdir;
  // Drop to this user before exec when the monitor runs as root and uid != 0.
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<gid_t> groups;
  std::string log_path;           // appended to; created 0600 owned by uid
  uint64_t shm_bytes = 0;         // > 0: private /dev/shm of this size
  bool isolated_network = false;  // a network namespace with only loopback (os/netns.h)
  std::vector<std::string> cgroup_dirs;
  // Run first, as uid, in "/", its output in the log; a non-zero exit ends
  // the attempt with it (LaunchRequest::setup_argv). Empty: none.
  std::vector<std::string> setup_argv;
  // Bind-mounted read-only (with their submounts) in the run's mount
  // namespace once the setup step succeeded; needs root.
  std::vector<std::string> readonly_paths;
  std::string monitor_path;  // monitor.json
  std::string exit_path;     // exit.json
  int kill_grace_ms = 2000;  // SIGTERM -> SIGKILL for leftovers
  unsigned umask = 022;      // the run's process gets it (the submitter's CLI sends it)
  // The log on a full disk (log_writer.h): output held in memory, and how
  // long the run may be held back before output is dropped (with a gap
  // marker); also how long the monitor waits at the end for held output.
  uint64_t log_hold_bytes = 4 << 20;
  int64_t log_stall_ms = 30000;
  uint64_t log_max_bytes = 0;  // the log's cap on disk (LogWriterOptions::max_file_bytes)
  // A run whose checkpoints are captured from records made on its node (a
  // Slurm job: the daemon's inotify does not see another NFS client's
  // writes): the monitor watches `checkpoint_dir` where the run writes and
  // appends one line to `checkpoint_records` per finished checkpoint
  // (snap/checkpoint_records.h). Both empty: nothing recorded.
  std::string checkpoint_dir;
  std::string checkpoint_records;
  // > 0: this long after the run started, the monitor acts as on Slurm's
  // SIGUSR1 (the warning ahead of the job's time limit) unless a stop came
  // first. A Slurm job's own clock: slurmrestd 22.05 cannot ask Slurm for
  // the batch shell's warning (--signal=B:...), and Slurm's comes late by up
  // to its scheduler's period. 0: none (local runs).
  int64_t warn_after_ms = 0;
  // Not empty: the run executes in a container image (ContainerLaunch).
  ContainerLaunch container;
};
Json LaunchToJson(const LaunchConfig& c);
Result<LaunchConfig> LaunchFromJson(const Json& j);

// What only a root monitor can do: a private /dev/shm (shm_bytes), a network
// namespace (isolated_network) and read-only mounts (readonly_paths). OK when
// `c` asks for none of them; otherwise FailedPrecondition naming the field,
// for a monitor that is not root (one started by Slurm as the run's user).
Status CheckUnprivilegedLaunch(const LaunchConfig& c);

// `env` with each of `inherit` (LaunchConfig::inherit_env) that `from` has
// ("NAME=value" entries, as environ holds them) set over it.
std::map<std::string, std::string> InheritEnvironment(std::map<std::string, std::string> env,
                                                      const std::vector<std::string>& inherit,
                                                      const std::vector<std::string>& from);

struct MonitorRecord {
  pid_t monitor_pid = 0;
  uint64_t monitor_start = 0;  // /proc start time, guards against PID reuse
  pid_t child_pid = 0;
  uint64_t child_start = 0;
  int64_t started_at_ms = 0;
};
Result<MonitorRecord> ReadMonitorRecord(const std::string& path, os::Env& env = os::RealEnv());

struct ExitRecord {
  std::optional<int> exit_code;  // set when the process exited
  std::optional<int> signal;     // set when it was killed by a signal
  bool oom_killed = false;
  std::string start_error;  // non-empty when it could not be started
  int64_t finished_at_ms = 0;
  // Output bytes that never reached the log (a gap marker stands in for
  // them when there was room for it) and why ("disk full").
  uint64_t log_lost_bytes = 0;
  std::string log_lost_reason;
  // Bytes of the log's middle given back to keep it within its cap.
  uint64_t log_trimmed_bytes = 0;
  // The signal that asked the monitor to stop the run before it ended
  // (SIGTERM, SIGINT, or SIGUSR1: Slurm's warning ahead of a time limit), 0
  // when the run ended on its own. A program that exits 0 on its own has
  // finished, whatever its cluster says of the job afterwards.
  int stop_signal = 0;
};
Result<ExitRecord> ReadExitRecord(const std::string& path, os::Env& env = os::RealEnv());
Json ExitToJson(const ExitRecord& e);

}  // namespace lathe::exec

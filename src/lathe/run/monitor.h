// The per-run monitor: a small process (`lathe __monitor`) that holds one run's
// process tree so that the run's output and exit status never depend on the
// daemon being alive (the conmon / containerd-shim design).
//
// The daemon writes a LaunchConfig to <attempt dir>/launch.json and calls
// SpawnMonitor(). The monitor, in its own session:
//   1. becomes a child subreaper, so processes that setsid() and lose their
//      parent are re-parented to it and stay findable;
//   2. forks the run's process: it joins the run's cgroups, optionally gets a
//      private /dev/shm (mount namespace), drops to the run's user, chdirs and
//      execs. A failure at any step is reported back, never left "starting";
//   3. answers the daemon's handshake ("ok <pid>" or "err <reason>") and
//      writes monitor.json (its own and the child's pid and start time);
//   4. writes stdout/stderr to the run's log (CRI format, log_format.h)
//      through a LogWriter (log_writer.h): when the file takes nothing, the
//      output is held and the pipes are not read, for a bounded time; what is
//      lost after that is counted, marked in the log and in exit.json;
//   5. forwards SIGTERM to the whole tree; SIGUSR2 means SIGKILL the tree;
//   6. when the main process exits, ends what is left of the tree, and
//      writes exit.json atomically: exit code or signal, OOM kill.
// The monitor is single-threaded, which makes fork-then-configure safe.
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

namespace lathe::run {

struct LaunchConfig {
  std::string run_id;
  int attempt = 0;
  std::vector<std::string> argv;
  std::map<std::string, std::string> env;  // the complete environment
  std::string workdir;
  // Drop to this user before exec when the monitor runs as root and uid != 0.
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<gid_t> groups;
  std::string log_path;    // appended to; created 0600 owned by uid
  uint64_t shm_bytes = 0;  // > 0: private /dev/shm of this size
  std::vector<std::string> cgroup_dirs;
  std::string monitor_path;  // monitor.json
  std::string exit_path;     // exit.json
  int kill_grace_ms = 2000;  // SIGTERM -> SIGKILL for leftovers
  unsigned umask = 022;      // the run's process gets it (the submitter's CLI sends it)
  // The log on a full disk (log_writer.h): output held in memory, and how
  // long the run may be held back before output is dropped (with a gap
  // marker); also how long the monitor waits at the end for held output.
  uint64_t log_hold_bytes = 4 << 20;
  int64_t log_stall_ms = 30000;
};
Json LaunchToJson(const LaunchConfig& c);
Result<LaunchConfig> LaunchFromJson(const Json& j);

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
};
Result<ExitRecord> ReadExitRecord(const std::string& path, os::Env& env = os::RealEnv());
Json ExitToJson(const ExitRecord& e);

// Daemon side: starts `self_exe __monitor <launch_path>` in a new session and
// waits (up to `handshake_timeout_ms`) for its answer.
struct SpawnResult {
  pid_t monitor_pid = 0;
  pid_t child_pid = 0;      // 0 when start_error is set
  std::string start_error;  // the run could not be started (reason)
};
Result<SpawnResult> SpawnMonitor(const std::string& self_exe, const std::string& launch_path,
                                 const std::string& monitor_log, int handshake_timeout_ms = 10000);

// Monitor side: the body of `lathe __monitor`. Returns the process exit code.
int MonitorMain(const std::string& launch_path, int handshake_fd);

}  // namespace lathe::run

// The spawn side of the per-run monitor (monitor.h): the local backend
// starts `lathe __monitor <launch.json> 3` in a session of its own and waits
// for its handshake. Called from the daemon's start threads, several at once.
#pragma once

#include <sys/types.h>

#include <string>

#include "lathe/common/status.h"

namespace lathe::exec {

struct SpawnResult {
  pid_t monitor_pid = 0;
  pid_t child_pid = 0;      // 0 when start_error is set
  std::string start_error;  // the run could not be started (reason)
};

// Starts `self_exe __monitor <launch_path>` in a new session (stdout and
// stderr to `monitor_log`) and waits up to `handshake_timeout_ms` for its
// answer: the run's pid, or why it could not be started.
Result<SpawnResult> SpawnMonitor(const std::string& self_exe, const std::string& launch_path,
                                 const std::string& monitor_log, int handshake_timeout_ms = 10000);

}  // namespace lathe::exec

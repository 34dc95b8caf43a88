// Processes: liveness with PID-reuse protection, process trees, signals.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "lathe/common/status.h"

namespace lathe::os {

// The kernel's start time of `pid` (field 22 of /proc/<pid>/stat, in clock
// ticks since boot). Together with the pid it identifies a process across
// PID reuse. nullopt when the process does not exist.
std::optional<uint64_t> ProcessStartTime(pid_t pid);

// The running executable's path (/proc/self/exe, symlinks resolved); `fallback`
// when it cannot be read.
std::string SelfExe(const std::string& fallback = "lathe");

// True when `pid` exists, is not a zombie and, if `start_time` is given, is
// the same process that had that start time.
bool ProcessAlive(pid_t pid, std::optional<uint64_t> start_time = std::nullopt);

// Parent pid from /proc/<pid>/stat, or nullopt.
std::optional<pid_t> ParentPid(pid_t pid);

// Every live descendant of `root` (not including root), found by walking
// /proc. Processes that called setsid() are still found while their parent
// chain leads to `root` (a subreaper makes sure it does).
std::vector<pid_t> Descendants(pid_t root);

// kill(2) that treats "no such process" as success.
Status SendSignal(pid_t pid, int signal);

// Result of waitpid: exited with a code, or killed by a signal.
struct ExitStatus {
  bool exited = false;
  int code = 0;    // when exited
  int signal = 0;  // when killed by a signal
  bool core = false;
};
ExitStatus DecodeWaitStatus(int wstatus);

// Name of a signal ("SIGKILL"), or "signal N".
std::string SignalName(int signal);

}  // namespace lathe::os

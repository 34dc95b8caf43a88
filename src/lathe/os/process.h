// Processes: starting a detached one, liveness with PID-reuse protection,
// process trees, signals, reaping.
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

// This process's pid (getpid(2)).
pid_t SelfPid();

// This process's working directory (getcwd(2)); an error when it cannot be
// named (removed, or longer than PATH_MAX).
Result<std::string> CurrentDir();

// This process's umask (umask(2) has no read-only form: it is set and set
// back, so a thread that changes the umask at the same time may be undone).
unsigned CurrentUmask();

// A limit of getrlimit(2); kNoLimit where the limit is RLIM_INFINITY.
inline constexpr uint64_t kNoLimit = UINT64_MAX;
struct ResourceLimit {
  uint64_t soft = kNoLimit;
  uint64_t hard = kNoLimit;
};
enum class LimitedResource {
  kOpenFiles,  // RLIMIT_NOFILE
  kProcesses,  // RLIMIT_NPROC: processes (threads) of the real user
};
Result<ResourceLimit> GetResourceLimit(LimitedResource resource);

// Raises this process's limit on open descriptors (RLIMIT_NOFILE) to
// `want` where it is lower: the soft and the hard limit when the process may
// (root, CAP_SYS_RESOURCE; never above the kernel's fs.nr_open), else the
// soft limit up to the hard one. Returns the soft limit now in force.
uint64_t RaiseOpenFileLimit(uint64_t want);

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

// waitpid(pid, WNOHANG), EINTR retried: the child's exit once it has ended
// (it is reaped then), nullopt while it runs or when `pid` is not a child of
// this process.
std::optional<ExitStatus> TryReap(pid_t pid);

// Starts `argv` (argv[0] is the program's path; PATH is not searched) detached
// from the caller, as `lathe up` starts the daemon:
// - in a new session (setsid): no controlling terminal, its own process group,
//   so a ^C or a hangup at the caller's terminal does not reach it;
// - stdin from /dev/null; stdout and stderr appended to `output_path`
//   (created with `output_mode` if missing);
// - no other descriptor of the caller (all are close-on-exec in the child),
//   no blocked signals; the caller's environment.
// Returns the pid once the program was executed; when it could not be (a
// missing or non-executable file) the child has been reaped and the error is
// exec's errno (NotFound, PermissionDenied, ...). The process stays the
// caller's child: the caller may TryReap it to notice an early exit, or leave
// it to init by exiting. Thread-safe: only async-signal-safe calls run
// between fork and exec.
Result<pid_t> SpawnDetached(const std::vector<std::string>& argv, const std::string& output_path,
                            unsigned output_mode = 0600);

// Starts `argv` (argv[0] searched on PATH when it has no '/') as a child that
// shares everything of the caller's but its signal state: the caller's
// environment, working directory, process group and standard descriptors
// (the others are close-on-exec), with no signal blocked and SIGPIPE, SIGTERM,
// SIGINT and SIGCHLD at their defaults. Returns the pid once the program was
// executed; when it could not be, the child has been reaped and the error is
// exec's errno (NotFound, PermissionDenied, ...). Only async-signal-safe calls
// run between fork and exec.
Result<pid_t> SpawnChild(const std::vector<std::string>& argv);

// Replaces this process's program with argv (argv[0] searched on PATH when
// it has no '/'), keeping the environment as it is now. Returns only when
// exec failed: the errno as a Status naming argv[0].
Status ExecReplace(const std::vector<std::string>& argv);
// setenv(3) / unsetenv(3) of this process (single-threaded callers only).
void SetEnvVar(const std::string& name, const std::string& value);
void UnsetEnvVar(const std::string& name);

// Name of a signal ("SIGKILL"), or "signal N".
std::string SignalName(int signal);

}  // namespace lathe::os

// What the doctor may look at. Every check reads the machine only through a
// SystemView, so tests hand them a fabricated machine (test_util/
// fake_system.h: a fake /proc and /sys, environment, statvfs answers, an
// Inventory built from a fake NVML table, canned command outputs) and cover
// the warn and fail paths on any host. RealSystemView (real_system.h) is the
// machine itself.
//
// Implementations must be safe to call from several threads at once: the
// doctor runs its slow probes in parallel.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "lathe/common/status.h"
#include "lathe/gpu/inventory.h"
#include "lathe/os/command.h"

namespace lathe::doctor {

struct FsStats {
  uint64_t size_bytes = 0;
  uint64_t free_bytes = 0;  // available to an unprivileged user (f_bavail)
  uint64_t inodes_total = 0;
  uint64_t inodes_free = 0;
};

inline constexpr uint64_t kUnlimited = UINT64_MAX;

struct Rlimit {
  uint64_t soft = kUnlimited;
  uint64_t hard = kUnlimited;
};
enum class RlimitKind { kOpenFiles, kProcesses };  // RLIMIT_NOFILE, RLIMIT_NPROC

using os::CommandOutput;

struct CaptureResult {
  std::string snapshot;  // id of the snapshot that holds the file
  int64_t ms = 0;        // from the run's start to the snapshot's event
  // The test run when it could not be removed afterwards, and why ("" when
  // it and its snapshot were removed).
  std::string left_run;
  std::string cleanup_error;
};

class SystemView {
 public:
  virtual ~SystemView() = default;

  // A small file, e.g. under /proc or /sys (NotFound when it does not exist).
  virtual Result<std::string> ReadFile(const std::string& path) const = 0;
  // The names in a directory, without "." and "..".
  virtual Result<std::vector<std::string>> ListDir(const std::string& path) const = 0;
  virtual std::optional<std::string> Getenv(const std::string& name) const = 0;
  // Every environment variable, as (name, value).
  virtual std::vector<std::pair<std::string, std::string>> Environment() const = 0;
  // statvfs(2) of the file system holding `path`.
  virtual Result<FsStats> StatFs(const std::string& path) const = 0;
  virtual Result<Rlimit> GetRlimit(RlimitKind kind) const = 0;
  // CPUs this process may run on (its affinity mask).
  virtual int CpuCount() const = 0;
  // Whether the kernel clock is synchronised (adjtimex); nullopt when unknown.
  virtual std::optional<bool> ClockSynchronized() const = 0;
  virtual std::string Cwd() const = 0;
  // The Lathe home a daemon started now would use (it may not exist yet).
  virtual std::string LatheHome() const = 0;
  // True when that home is a system daemon's (root's, /var/lib/lathe) and
  // the doctor runs as another user, who uses it through the daemon's
  // socket and is not meant to write it.
  virtual bool LatheHomeIsOthers() const { return false; }
  // Creates and removes a file in `dir`: OK when `dir` is writable.
  virtual Status ProbeWritable(const std::string& dir) const = 0;
  // OK when a Lathe daemon answers; otherwise why not. `where` gets the
  // socket or address tried.
  virtual Status DaemonStatus(std::string* where) const = 0;
  // An executable named `name` on PATH (or `name` itself when it has a '/').
  virtual std::optional<std::string> FindExecutable(const std::string& name) const = 0;
  // The canonical path (symlinks resolved), or `path` when that fails.
  virtual std::string RealPath(const std::string& path) const = 0;
  // The daemon's snapshot store when this user can read it, else "".
  virtual std::string StoreDir() const = 0;
  // A daemon's store that exists but this user may not read (the system
  // daemon's, for a non-root user), else "".
  virtual std::string UnreadableStoreDir() const = 0;
  // The lathe binary (for `lathe snap fsck` under a timeout).
  virtual std::string SelfExe() const = 0;
  // The wall clock, ms since the Unix epoch (the cluster checks compare it
  // with the Slurm controller's).
  virtual int64_t WallClockMs() const = 0;
  // The name of the user running the doctor.
  virtual std::string UserName() const = 0;
  // ProbeWritable with an ordinary user's file-system identity: this
  // process's when it is not root, else `nobody`'s (a root doctor must not
  // call a directory writable that only root can write). `as_user` gets
  // the user tried.
  virtual Status ProbeWritableAsUser(const std::string& dir, std::string* as_user) const = 0;
  // Removes a file the doctor's cluster test job wrote.
  virtual Status RemoveFile(const std::string& path) const = 0;

  // ---- slow: the doctor calls these from its parallel probes ------------
  // A sample of the GPUs (gpu/source.h "auto": no driver is an empty
  // Inventory whose note says why, not an error).
  virtual Result<gpu::Inventory> SampleGpus() const = 0;
  // Runs `argv` (no shell) with stdin closed and kills it after
  // `timeout_ms`: DeadlineExceeded then; NotFound when it cannot be started.
  virtual Result<CommandOutput> Run(const std::vector<std::string>& argv,
                                    int64_t timeout_ms) const = 0;
  // Run with this process's environment plus `env` (which wins): SLURM_CONF
  // for the cluster checks' Slurm commands.
  virtual Result<CommandOutput> RunWithEnv(const std::vector<std::string>& argv,
                                           const std::map<std::string, std::string>& env,
                                           int64_t timeout_ms) const = 0;
  // Through the daemon: a run writes one file into a fresh checkpoint
  // directory; the answer is the snapshot that captured it and how long after
  // the run started it was committed. Gives up after `timeout_ms`. The run
  // and its snapshot are removed afterwards (left_run says when they could
  // not be).
  virtual Result<CaptureResult> CaptureRoundTrip(int64_t timeout_ms) const = 0;
  // Through the daemon (`lathe doctor --image`): runs `argv` as a run of this
  // user's in their container image `image`, with `gpus` GPUs; the answer is
  // its exit status and its log (stdout and stderr, in `out`). The run is
  // removed afterwards. DeadlineExceeded after `timeout_ms` (a run still
  // queued behind busy GPUs included); the daemon's refusal (an unknown
  // image) as its Status.
  virtual Result<CommandOutput> RunInImage(const std::string& image,
                                           const std::vector<std::string>& argv, int gpus,
                                           int64_t timeout_ms) const {
    (void)image, (void)argv, (void)gpus, (void)timeout_ms;
    return Status::Unavailable("not checked");
  }
};

}  // namespace lathe::doctor

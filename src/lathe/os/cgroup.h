// Control groups: where each run's processes live, what limits them, and how
// they are all found and killed — even the ones that called setsid() or
// double-forked away from the process tree.
//
// Both cgroup versions are supported, and hybrid machines that mount v1
// controller hierarchies next to an (often empty) cgroup2 tree:
//
//   v1  one hierarchy per controller: /sys/fs/cgroup/memory/<own>/lathe/<run>,
//       /sys/fs/cgroup/pids/<own>/lathe/<run>, … — a run has one dir per controller.
//   v2  one tree: /sys/fs/cgroup/<own>/lathe/<run> — a run has one dir.
//
// `<own>` is the daemon's own cgroup (from /proc/self/cgroup), so Lathe only
// creates cgroups below the one it was started in (a systemd unit with
// Delegate=yes, a container, a login session). Nothing here is cached: every
// call reads or writes cgroupfs.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "lathe/common/status.h"

namespace lathe::os {

// Where DetectCgroups() looks. The defaults are the real system; tests point
// them at a fake tree in a temporary directory.
struct CgroupPaths {
  std::string proc_self_cgroup = "/proc/self/cgroup";
  std::string mountinfo = "/proc/self/mountinfo";
  // Prepended to every mount point read from `mountinfo` ("" = the real root).
  std::string prefix = "";
  // Name of the child of the daemon's own cgroup that holds the runs.
  std::string group_name = "lathe";
};

// What this machine lets Lathe do with cgroups, per controller.
struct CgroupSupport {
  enum class Mode {
    kNone,  // no usable controller
    kV1,    // at least one usable controller lives on a v1 hierarchy (includes hybrid machines)
    kV2,    // every usable controller is on the unified (v2) hierarchy
  };
  Mode mode = Mode::kNone;
  bool memory = false;
  bool cpu = false;
  bool pids = false;
  // Per controller: the directory under which Lathe creates one child per
  // run, e.g. /sys/fs/cgroup/memory/process_api/3f…/lathe (v1) or
  // /sys/fs/cgroup/system.slice/lathe.service/lathe (v2, all three equal).
  // Empty when the controller is unavailable. Each exists and is writable.
  std::string memory_base;
  std::string cpu_base;
  std::string pids_base;
  // Why a controller is unavailable, one "controller: reason" per line; empty
  // when all three work. For people (the doctor, logs), not for parsing.
  std::string note;
};

// Finds the cgroup mounts (mountinfo), the daemon's own cgroup per controller
// (/proc/self/cgroup) and, for memory, cpu and pids, whether Lathe can create
// and limit children there. Side effects, by design: it creates
// `<own>/<group_name>` in each usable hierarchy and, on v2, enables the
// controllers in its cgroup.subtree_control (and in `<own>`'s when they are
// not enabled yet). A controller is taken from v2 when it works there, else
// from v1.
//
// v2's "no internal processes" rule: a cgroup with processes in it cannot
// hand controllers to its children. The daemon itself lives in `<own>`, so
// controllers must already be enabled in `<own>/cgroup.subtree_control` (or
// `<own>` must be the root); if enabling fails the controller is unavailable
// and `note` says why. Runs then live in children of `<own>/lathe`, which
// never holds processes itself.
//
// Never fails: what does not work is reported in the result.
CgroupSupport DetectCgroups(const CgroupPaths& paths = {});

// A cgroup directory's path inside its hierarchy, as /proc/<pid>/cgroup
// and podman's --cgroup-parent say it: /sys/fs/cgroup/memory/a/b -> /a/b
// (the hierarchy's root is the topmost directory on the same file system).
Result<std::string> CgroupPathInHierarchy(const std::string& dir);

// Limits of one run; nullopt = no limit.
struct CgroupLimits {
  std::optional<uint64_t> memory_bytes;  // RAM (+swap: swap is disabled for the run when possible)
  std::optional<double> cpus;            // CPU time as a number of CPUs, e.g. 1.5
  std::optional<int64_t> pids_max;       // processes + threads
};

// One run's cgroup(s): a directory per controller hierarchy (v1) or one
// directory (v2). Owns nothing but the paths: destroying the object leaves the
// cgroups in place (the daemon re-opens them after a restart); Destroy()
// removes them. Methods that only read (Pids, OomKilled, MemoryPeakBytes) may
// be called from any thread; AddProcess, KillAll and Destroy must not run
// concurrently with Destroy.
class RunCgroup {
 public:
  // Creates `<base>/<run_id>` for every controller the run needs: memory and
  // pids whenever they are available (so every run can be enumerated and
  // killed through its cgroup, limited or not) and cpu when `limits.cpus` is
  // set; then writes the limits:
  //   v1: memory.limit_in_bytes (+ memory.memsw.limit_in_bytes, same value, when
  //       present and writable), cpu.cfs_period_us/cpu.cfs_quota_us, pids.max;
  //   v2: memory.max, memory.swap.max=0 and memory.oom.group=1 when present,
  //       cpu.max, pids.max.
  // An existing directory is reused (a run retried after a daemon crash).
  // Errors: a run_id that is not a valid name, or a non-positive limit →
  // InvalidArgument; a requested limit whose controller is unavailable, or no
  // controller at all → FailedPrecondition naming the controller (the caller
  // decides whether to refuse the run or go on without); I/O errors as
  // ErrnoStatus. On error nothing created here is left behind.
  static Result<std::unique_ptr<RunCgroup>> Create(const CgroupSupport& support,
                                                   const std::string& run_id,
                                                   const CgroupLimits& limits);

  // Re-opens the directories dirs() returned, e.g. after a daemon restart.
  // Each must exist (NotFound otherwise); their version and controllers are
  // read from the files in them.
  static Result<std::unique_ptr<RunCgroup>> Open(const std::vector<std::string>& dirs);

  // The run's directories, in a stable order; persist them to Open() later.
  std::vector<std::string> dirs() const;

  // Moves `pid` (the whole process) into every directory. Call it for the
  // run's first process before it execs; its descendants follow by themselves.
  Status AddProcess(pid_t pid);

  // Every process in the run's cgroups and their sub-cgroups, sorted, unique.
  // Zombies are not listed. Unreadable directories count as empty.
  std::vector<pid_t> Pids() const;

  // Sends `signal` to every process of the run, re-reading the process lists
  // until no new process appears (a process may fork while being signalled).
  // For SIGKILL it also waits until the cgroups are empty, up to 2 s
  // (DeadlineExceeded listing the survivors, e.g. processes stuck in the
  // kernel); on v2 it uses cgroup.kill when the kernel has it (≥ 5.14).
  Status KillAll(int signal);

  // True when the kernel OOM killer killed a process of this run because of
  // the run's memory limit. v2: memory.events oom_kill > 0. v1: oom_kill in
  // memory.oom_control (kernel ≥ 4.13); on older kernels, a heuristic:
  // memory.failcnt > 0 and the peak reached the limit. False without a
  // memory cgroup.
  bool OomKilled() const;
  // v1: the run's peak memory use reached its limit (within 1 MiB). With a
  // SIGKILL, the evidence of an OOM kill left for a run whose processes sat
  // in a sub-cgroup that is gone when it is asked (a container's, removed by
  // podman): v1 counts neither their kills nor, with swap limited too, a
  // failed charge here. Always false on v2 (its oom_kill counts sub-cgroups).
  bool MemoryLimitReached() const;

  // Highest memory use of the run. v1: memory.max_usage_in_bytes; v2:
  // memory.peak (kernel ≥ 5.19, NotFound before). FailedPrecondition without
  // a memory cgroup.
  Result<uint64_t> MemoryPeakBytes() const;

  // Memory the run uses now. v1: memory.usage_in_bytes; v2: memory.current.
  // FailedPrecondition without a memory cgroup.
  Result<uint64_t> MemoryCurrentBytes() const;

  // CPU time the run's processes have used so far, in microseconds. v2:
  // usage_usec of cpu.stat (every v2 cgroup has it, cpu controller or not);
  // v1: cpuacct.usage (ns) of a directory that has it (a run gets one only
  // when its hierarchy mounts cpuacct with cpu). NotFound when no directory
  // of the run counts CPU time: the caller sums its processes instead.
  Result<uint64_t> CpuUsageUsec() const;

  // Removes the directories (sub-cgroups first), retrying for up to 1 s while
  // exiting processes leave. Still busy → FailedPrecondition listing the
  // pids; already gone is fine. Kill the processes first.
  Status Destroy();

  // One directory of the run. Public only so that cgroup.cc can build it.
  struct Dir {
    std::string path;
    bool v2 = false;
    bool memory = false;  // memory controller files live here
    bool cpu = false;
    bool pids = false;
  };

 private:
  explicit RunCgroup(std::vector<Dir> dirs) : dirs_(std::move(dirs)) {}
  const Dir* MemoryDir() const;
  Status SignalUntilStable(int signal);
  Status WaitUntilEmpty();

  std::vector<Dir> dirs_;  // constant after construction
};

}  // namespace lathe::os

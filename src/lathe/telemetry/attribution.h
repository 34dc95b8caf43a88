// Which run each GPU process belongs to. NVML lists the processes using a
// GPU by their host pids; a process is a run's when, in this order:
//   1. it is among the run's processes as its backend lists them (the
//      members of the run's cgroups, or its process tree without cgroups);
//   2. a line of its /proc/PID/cgroup names the run's cgroup or one below it
//      (a process that joined after the list was read);
//   3. one of its ancestors (up to kMaxAncestors) is a process of step 1.
// Anything else (another user's job outside Lathe, the display server) is
// nobody's and counts only in the GPU's own memory_used.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "lathe/gpu/inventory.h"
#include "lathe/os/process_table.h"

namespace lathe::telemetry {

inline constexpr int kMaxAncestors = 64;

// A run whose processes may use GPUs.
struct RunProcesses {
  std::string run_id;
  std::vector<pid_t> pids;               // its backend's list
  std::vector<std::string> cgroup_dirs;  // its cgroup directories (absolute; may be empty)
};

// A run's share of one GPU.
struct GpuShare {
  uint64_t memory_bytes = 0;  // the sum over its processes that report memory
  std::vector<pid_t> pids;
};

// run id → GPU index → its share, for the GPUs where the run has processes.
using Attribution = std::map<std::string, std::map<int, GpuShare>>;

// Attributes the processes of every GPU of `inventory` (GPUs without a
// process list are skipped). `table` answers steps 2 and 3.
Attribution Attribute(const gpu::Inventory& inventory, const std::vector<RunProcesses>& runs,
                      os::ProcessTable& table);

// Whether `proc_path`, a path of /proc/PID/cgroup ("/x/lathe/r-1/sub"), is
// the cgroup at `dir` ("/sys/fs/cgroup/memory/x/lathe/r-1") or one below it:
// some leading part of the path, of at least two components, is how `dir`
// ends.
bool CgroupPathUnder(const std::string& proc_path, const std::string& dir);

}  // namespace lathe::telemetry

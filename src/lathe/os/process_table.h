// The process table as telemetry reads it: who is whose parent, which cgroup
// a process is in, how much CPU and memory it used. Behind an interface so
// that attribution (telemetry/attribution.h) can be tested against a fake
// table (os/test_util/fake_process_table.h) with pids NVML "reported".
//
// Thread-safe: the real table is stateless and reads /proc on every call.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace lathe::os {

struct ProcessUsage {
  uint64_t cpu_us = 0;     // user + system time so far (/proc/PID/stat utime + stime)
  uint64_t rss_bytes = 0;  // resident set (/proc/PID/statm resident × page size)
};

class ProcessTable {
 public:
  virtual ~ProcessTable() = default;
  // The parent pid; nullopt when `pid` does not exist.
  virtual std::optional<pid_t> Parent(pid_t pid) = 0;
  // The cgroup path of each line of /proc/PID/cgroup ("4:memory:/a/b" →
  // "/a/b", "0::/c" → "/c"), in the file's order; empty when unknown.
  virtual std::vector<std::string> CgroupPaths(pid_t pid) = 0;
  virtual std::optional<ProcessUsage> Usage(pid_t pid) = 0;
};

// /proc of this machine. Never destroyed.
ProcessTable& RealProcessTable();

// The paths of a /proc/PID/cgroup text, as CgroupPaths returns them.
std::vector<std::string> ParseProcCgroup(const std::string& text);

}  // namespace lathe::os

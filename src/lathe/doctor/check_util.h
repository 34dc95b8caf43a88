// Small helpers shared by the check implementations (checks_*.cc): reading
// numbers out of /proc and /sys text, CUDA versions, cgroup limits, and
// picking the worst of several findings. Not part of the module's API.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "lathe/doctor/check.h"
#include "lathe/doctor/system_view.h"

namespace lathe::doctor {

// "64MiB"-style text (common/units.h FormatBytes); kUnlimited → "unlimited".
std::string Bytes(uint64_t bytes);
// A decimal integer with surrounding white space; nullopt otherwise.
std::optional<uint64_t> ParseU64(std::string_view text);
// The value of `key` in /proc/meminfo text ("MemTotal:  24683620 kB"), in bytes.
std::optional<uint64_t> MeminfoBytes(std::string_view meminfo, std::string_view key);
// MeminfoBytes of the machine's /proc/meminfo; nullopt when unreadable.
std::optional<uint64_t> ReadMeminfo(const SystemView& view, std::string_view key);
// The number after `key` in "key value" lines (/proc/vmstat, memory.events).
std::optional<uint64_t> KeyedNumber(std::string_view text, std::string_view key);
// The first line of a file, trimmed; nullopt when it cannot be read.
std::optional<std::string> ReadLine(const SystemView& view, const std::string& path);

struct CudaVersion {
  int major = 0;
  int minor = 0;
  friend auto operator<=>(const CudaVersion&, const CudaVersion&) = default;
};
// "12.4" or "12.4.1" → {12, 4}; nullopt otherwise.
std::optional<CudaVersion> ParseCudaVersion(std::string_view s);

// The memory cgroup this process is in, read through /proc/self/cgroup and
// /sys/fs/cgroup (v1 or v2). `limit_bytes` is the smallest limit on the way
// to the root, nullopt when there is none.
struct CgroupMemory {
  std::string path;  // the cgroup directory
  bool v2 = false;   // cgroup v2 (memory.max, memory.events) or v1 (memory.limit_in_bytes)
  std::optional<uint64_t> limit_bytes;
  std::optional<uint64_t> usage_bytes;
};
std::optional<CgroupMemory> ReadCgroupMemory(const SystemView& view);
// The CPU quota of this process's cgroup as a number of CPUs; nullopt = none.
std::optional<double> ReadCgroupCpuQuota(const SystemView& view);
// The file system type of the mount holding `path` (/proc/self/mounts).
std::string MountType(const SystemView& view, const std::string& path);
// `path` or its nearest existing ancestor.
std::string ExistingAncestor(const SystemView& view, const std::string& path);

// The finding whose outcome is most severe (fail > warn > ok > skipped),
// by the embedded texts; the first of equals.
Finding Worst(const std::vector<Finding>& findings);

}  // namespace lathe::doctor

// The system group: /dev/shm, ulimits, vm sysctls, the cgroup memory limit,
// kills by the OOM killer, /tmp and TMPDIR, free disk, CPUs and time
// synchronisation.
#pragma once

#include "lathe/doctor/check.h"

namespace lathe::doctor {

// Thresholds, named so tests and docs can refer to them.
inline constexpr uint64_t kShmFailBytes = 512ULL << 20;  // below: DataLoader workers crash
inline constexpr uint64_t kShmWarnBytes = 2ULL << 30;    // below: large batches will
inline constexpr uint64_t kNoFileWarn = 4096;            // soft RLIMIT_NOFILE
inline constexpr uint64_t kNprocWarn = 4096;             // soft RLIMIT_NPROC
inline constexpr uint64_t kSwappinessWarn = 10;          // with swap on
inline constexpr uint64_t kTmpfsWarnBytes = 8ULL << 30;  // tmpfs /tmp smaller than this
inline constexpr uint64_t kDiskFailBytes = 1ULL << 30;   // free space
inline constexpr uint64_t kDiskWarnBytes = 10ULL << 30;

Finding CheckShm(const SystemView& view, const Facts& facts);
Finding CheckNoFile(const SystemView& view, const Facts& facts);
Finding CheckNproc(const SystemView& view, const Facts& facts);
Finding CheckSwappiness(const SystemView& view, const Facts& facts);
Finding CheckOvercommit(const SystemView& view, const Facts& facts);
Finding CheckCgroupMemory(const SystemView& view, const Facts& facts);
Finding CheckOomKills(const SystemView& view, const Facts& facts);
Finding CheckTmp(const SystemView& view, const Facts& facts);
Finding CheckDiskHome(const SystemView& view, const Facts& facts);
Finding CheckDiskCwd(const SystemView& view, const Facts& facts);
Finding CheckDiskTmp(const SystemView& view, const Facts& facts);
Finding CheckCpus(const SystemView& view, const Facts& facts);
Finding CheckTimeSync(const SystemView& view, const Facts& facts);

}  // namespace lathe::doctor

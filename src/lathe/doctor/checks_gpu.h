// The GPU group: driver, visibility, CUDA versions, torch, arch, ECC,
// clocks, persistence and MIG. Each reads only Facts (the NVML sample, the
// torch and toolkit probes) and the environment through the SystemView.
#pragma once

#include "lathe/doctor/check.h"

namespace lathe::doctor {

Finding CheckGpuDriver(const SystemView& view, const Facts& facts);
Finding CheckGpuVisible(const SystemView& view, const Facts& facts);
Finding CheckGpuCuda(const SystemView& view, const Facts& facts);
Finding CheckGpuTorch(const SystemView& view, const Facts& facts);
Finding CheckGpuArch(const SystemView& view, const Facts& facts);
Finding CheckGpuEcc(const SystemView& view, const Facts& facts);
Finding CheckGpuClocks(const SystemView& view, const Facts& facts);
// GPU memory already taken before a job starts: by running processes, or by
// none that NVML can list (another PID namespace, a leaked context).
Finding CheckGpuMemory(const SystemView& view, const Facts& facts);
Finding CheckGpuPersistence(const SystemView& view, const Facts& facts);
Finding CheckGpuMig(const SystemView& view, const Facts& facts);

}  // namespace lathe::doctor

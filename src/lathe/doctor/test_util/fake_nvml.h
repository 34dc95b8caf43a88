// A fake NVML driver for doctor tests: an NvmlApi table of static functions
// answering from one global FakeNvml. Tests inject it through the same
// table the real driver fills (gpu/nvml.h), so the doctor reads GPUs exactly
// as it would on a GPU server. Not thread-safe; one test at a time.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "lathe/common/status.h"
#include "lathe/gpu/inventory.h"
#include "lathe/gpu/nvml.h"

namespace lathe::doctor::testing {

struct FakeNvmlGpu {
  std::string name = "NVIDIA A100-SXM4-80GB";
  std::string uuid;  // default "GPU-fake-<index>"
  unsigned long long memory_total = 80ULL << 30;
  unsigned long long memory_used = 0;
  // Compute processes: (pid, used bytes). Listed only when list_processes.
  std::vector<std::pair<unsigned int, unsigned long long>> processes;
  bool list_processes = true;
  unsigned int temperature_c = 45;
  unsigned int sm_clock_mhz = 1410;
  unsigned int sm_clock_max_mhz = 1410;
  unsigned long long throttle_reasons = 0;
  bool ecc_enabled = true;
  unsigned long long ecc_uncorrected = 0;
  bool persistence = true;
  unsigned int mig = NVML_DEVICE_MIG_DISABLE;
};

struct FakeNvml {
  std::string driver_version = "550.54.15";
  int cuda_version = 12040;  // CUDA 12.4
  std::vector<FakeNvmlGpu> gpus;
};

// The global state the fake functions answer from.
FakeNvml& Nvml();

// A table of fake functions (every entry point set).
gpu::NvmlApi FakeNvmlApi();

// Sets the global state and samples it through NvmlSource, as the doctor's
// real view would: the Inventory an NVML driver with `state` reports.
Result<gpu::Inventory> SampleFakeNvml(const FakeNvml& state);

}  // namespace lathe::doctor::testing

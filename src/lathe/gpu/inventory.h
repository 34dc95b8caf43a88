// What the machine's GPUs are and what they are doing right now.
//
// An Inventory is a plain snapshot: the scheduler places runs with it, the
// doctor explains throttling and ECC errors with it, `lathe gpus` prints it.
//
// Unknown values: every measured field that a driver may not report (an older
// GPU, a call the driver lacks, a permission) is a std::optional and is
// std::nullopt when unknown; strings are empty when unknown. In JSON an
// unknown value is null. Nothing uses -1 as "unknown".
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "lathe/common/json.h"

namespace lathe::gpu {

// One process using a GPU (NVML "compute running processes").
struct GpuProcess {
  int pid = 0;  // in the driver's (the host's) pid namespace
  std::optional<uint64_t> used_memory_bytes;
};

// Names of the throttle-reason bits, in bit order (bit 0 = "gpu_idle").
// Values of GpuInfo::throttle_reason_names come from this list:
//   gpu_idle, applications_clocks_setting, sw_power_cap, hw_slowdown,
//   sync_boost, sw_thermal, hw_thermal, hw_power_brake, display_clock_setting.
// Unknown bits are named "bit<N>".
std::vector<std::string> ThrottleReasonNames(uint64_t reasons);

struct GpuInfo {
  int index = 0;           // NVML index (not necessarily CUDA's default order)
  std::string uuid;        // "GPU-8f3c…"; the stable key for a GPU
  std::string name;        // "NVIDIA H100 80GB HBM3"
  std::string pci_bus_id;  // "00000000:3B:00.0"

  std::optional<uint64_t> memory_total_bytes;
  std::optional<uint64_t> memory_used_bytes;
  std::optional<int> utilization_gpu_pct;  // 0-100, over the driver's last sample period
  std::optional<int> utilization_mem_pct;  // 0-100
  std::optional<int> temperature_c;
  std::optional<int> sm_clock_mhz;
  std::optional<int> sm_clock_max_mhz;

  // Why clocks are below maximum: NVML's bitmask (nvmlClocksThrottleReason*)
  // and its names. 0 / {} means not throttled. "gpu_idle" alone is benign.
  std::optional<uint64_t> throttle_reasons;
  std::vector<std::string> throttle_reason_names;

  std::optional<bool> ecc_enabled;                 // current mode
  std::optional<uint64_t> ecc_uncorrected_errors;  // volatile: since the driver loaded
  std::optional<bool> mig_enabled;                 // current mode
  std::optional<bool> persistence_mode;
  std::optional<double> power_w;        // current draw
  std::optional<double> power_limit_w;  // enforced limit

  // nullopt when the driver cannot list processes; empty when none run.
  std::optional<std::vector<GpuProcess>> processes;

  // Why this GPU could not be read ("GPU is lost (15)"); empty when it could.
  // A GPU with an error must not be given to a run.
  std::string error;
};

struct Inventory {
  std::string source = "none";      // "nvml" | "simulated" | "none"
  bool simulated = false;           // true for "sim:" specs; never mixed with real GPUs
  std::string driver_version;       // "550.54.15"; empty when unknown
  std::string cuda_driver_version;  // highest CUDA the driver supports, "12.4"; empty when unknown
  std::vector<GpuInfo> gpus;
  std::string note;  // why there are no GPUs or what is odd (e.g. dlerror text); may be empty
};

// {"source", "simulated", "driver_version", "cuda_driver_version", "note",
//  "gpus": [{"index", "uuid", "name", "pci_bus_id", "memory_total_bytes", …,
//            "throttle_reasons", "throttle_reason_names", …,
//            "processes": [{"pid", "used_memory_bytes"}] | null}]}
// Field names are the struct's; unknown values are null.
Json ToJson(const GpuInfo& gpu);
Json ToJson(const Inventory& inventory);

}  // namespace lathe::gpu

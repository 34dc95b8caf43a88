// NVML, loaded at run time.
//
// No nvml.h is installed where Lathe is built, and one `lathe` binary must run
// with and without an NVIDIA driver, so this header declares the small part of
// the NVML C ABI that Lathe uses (types, constants and signatures copied from
// NVIDIA's nvml.h, API version 12) and a table of function pointers,
// `NvmlApi`, that LoadNvml() fills with dlsym(). Everything above this file
// calls NVML only through such a table, so tests inject a table of fake
// functions instead of a driver.
#pragma once

#include <string>

#include "lathe/common/status.h"

// ---- The NVML ABI (global names, exactly as in nvml.h) ----------------------
extern "C" {

typedef struct nvmlDevice_st* nvmlDevice_t;

typedef enum nvmlReturn_enum {
  NVML_SUCCESS = 0,
  NVML_ERROR_UNINITIALIZED = 1,
  NVML_ERROR_INVALID_ARGUMENT = 2,
  NVML_ERROR_NOT_SUPPORTED = 3,
  NVML_ERROR_NO_PERMISSION = 4,
  NVML_ERROR_ALREADY_INITIALIZED = 5,
  NVML_ERROR_NOT_FOUND = 6,
  NVML_ERROR_INSUFFICIENT_SIZE = 7,
  NVML_ERROR_INSUFFICIENT_POWER = 8,
  NVML_ERROR_DRIVER_NOT_LOADED = 9,
  NVML_ERROR_TIMEOUT = 10,
  NVML_ERROR_IRQ_ISSUE = 11,
  NVML_ERROR_LIBRARY_NOT_FOUND = 12,
  NVML_ERROR_FUNCTION_NOT_FOUND = 13,
  NVML_ERROR_CORRUPTED_INFOROM = 14,
  NVML_ERROR_GPU_IS_LOST = 15,
  NVML_ERROR_UNKNOWN = 999,
} nvmlReturn_t;

typedef enum nvmlEnableState_enum {
  NVML_FEATURE_DISABLED = 0,
  NVML_FEATURE_ENABLED = 1,
} nvmlEnableState_t;

typedef enum nvmlTemperatureSensors_enum {
  NVML_TEMPERATURE_GPU = 0,
} nvmlTemperatureSensors_t;

typedef enum nvmlClockType_enum {
  NVML_CLOCK_GRAPHICS = 0,
  NVML_CLOCK_SM = 1,
  NVML_CLOCK_MEM = 2,
  NVML_CLOCK_VIDEO = 3,
} nvmlClockType_t;

typedef enum nvmlMemoryErrorType_enum {
  NVML_MEMORY_ERROR_TYPE_CORRECTED = 0,
  NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1,
} nvmlMemoryErrorType_t;

typedef enum nvmlEccCounterType_enum {
  NVML_VOLATILE_ECC = 0,   // since the last driver load
  NVML_AGGREGATE_ECC = 1,  // over the board's life
} nvmlEccCounterType_t;

#define NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE 80
#define NVML_DEVICE_UUID_V2_BUFFER_SIZE 96
#define NVML_DEVICE_NAME_V2_BUFFER_SIZE 96
#define NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE 32
#define NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE 16
#define NVML_DEVICE_MIG_DISABLE 0
#define NVML_DEVICE_MIG_ENABLE 1
// usedGpuMemory when the driver cannot tell (e.g. Windows WDDM).
#define NVML_VALUE_NOT_AVAILABLE (~0ULL)

typedef struct nvmlMemory_st {
  unsigned long long total;  // bytes
  unsigned long long free;
  unsigned long long used;
} nvmlMemory_t;

typedef struct nvmlUtilization_st {
  unsigned int gpu;     // percent of the last sample period a kernel ran
  unsigned int memory;  // percent of the period device memory was read/written
} nvmlUtilization_t;

// nvmlPciInfo_t as filled by nvmlDeviceGetPciInfo_v3.
typedef struct nvmlPciInfo_st {
  char busIdLegacy[NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE];
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pciDeviceId;
  unsigned int pciSubSystemId;
  char busId[NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE];  // "00000000:3B:00.0"
} nvmlPciInfo_t;

// nvmlProcessInfo_t (== nvmlProcessInfo_v2_t) as filled by the _v3 process calls.
typedef struct nvmlProcessInfo_st {
  unsigned int pid;
  unsigned long long usedGpuMemory;  // bytes, or NVML_VALUE_NOT_AVAILABLE
  unsigned int gpuInstanceId;        // 0xFFFFFFFF when not a MIG instance
  unsigned int computeInstanceId;
} nvmlProcessInfo_t;

// Bits of nvmlDeviceGetCurrentClocksThrottleReasons (nvmlClocksThrottleReason*).
#define nvmlClocksThrottleReasonGpuIdle 0x0000000000000001ULL
#define nvmlClocksThrottleReasonApplicationsClocksSetting 0x0000000000000002ULL
#define nvmlClocksThrottleReasonSwPowerCap 0x0000000000000004ULL
#define nvmlClocksThrottleReasonHwSlowdown 0x0000000000000008ULL
#define nvmlClocksThrottleReasonSyncBoost 0x0000000000000010ULL
#define nvmlClocksThrottleReasonSwThermalSlowdown 0x0000000000000020ULL
#define nvmlClocksThrottleReasonHwThermalSlowdown 0x0000000000000040ULL
#define nvmlClocksThrottleReasonHwPowerBrakeSlowdown 0x0000000000000080ULL
#define nvmlClocksThrottleReasonDisplayClockSetting 0x0000000000000100ULL

}  // extern "C"

namespace lathe::gpu {

// The NVML entry points Lathe calls, one pointer each, named after the symbol
// (nvmlDeviceGetMemoryInfo -> device_get_memory_info). Signatures are NVML's.
//
// Required (LoadNvml fails without them): init_v2, shutdown,
// device_get_count_v2, device_get_handle_by_index_v2. Every other pointer is
// optional: null means "this driver does not export it", and the field it
// feeds is reported unknown. A table is plain data: copy it freely.
struct NvmlApi {
  nvmlReturn_t (*init_v2)() = nullptr;
  nvmlReturn_t (*shutdown)() = nullptr;
  const char* (*error_string)(nvmlReturn_t) = nullptr;

  nvmlReturn_t (*system_get_driver_version)(char* version, unsigned int length) = nullptr;
  // 12040 means CUDA 12.4.
  nvmlReturn_t (*system_get_cuda_driver_version_v2)(int* version) = nullptr;

  nvmlReturn_t (*device_get_count_v2)(unsigned int* count) = nullptr;
  nvmlReturn_t (*device_get_handle_by_index_v2)(unsigned int index, nvmlDevice_t* device) = nullptr;
  nvmlReturn_t (*device_get_uuid)(nvmlDevice_t, char* uuid, unsigned int length) = nullptr;
  nvmlReturn_t (*device_get_name)(nvmlDevice_t, char* name, unsigned int length) = nullptr;
  nvmlReturn_t (*device_get_pci_info_v3)(nvmlDevice_t, nvmlPciInfo_t* pci) = nullptr;
  nvmlReturn_t (*device_get_memory_info)(nvmlDevice_t, nvmlMemory_t* memory) = nullptr;
  nvmlReturn_t (*device_get_utilization_rates)(nvmlDevice_t, nvmlUtilization_t* util) = nullptr;
  nvmlReturn_t (*device_get_temperature)(nvmlDevice_t, nvmlTemperatureSensors_t,
                                         unsigned int* temp_c) = nullptr;
  nvmlReturn_t (*device_get_clock_info)(nvmlDevice_t, nvmlClockType_t, unsigned int* mhz) = nullptr;
  nvmlReturn_t (*device_get_max_clock_info)(nvmlDevice_t, nvmlClockType_t,
                                            unsigned int* mhz) = nullptr;
  // nvmlDeviceGetCurrentClocksThrottleReasons; drivers that only export its
  // newer name, nvmlDeviceGetCurrentClocksEventReasons (same ABI), fill it too.
  nvmlReturn_t (*device_get_current_clocks_throttle_reasons)(nvmlDevice_t,
                                                             unsigned long long* reasons) = nullptr;
  nvmlReturn_t (*device_get_ecc_mode)(nvmlDevice_t, nvmlEnableState_t* current,
                                      nvmlEnableState_t* pending) = nullptr;
  nvmlReturn_t (*device_get_total_ecc_errors)(nvmlDevice_t, nvmlMemoryErrorType_t,
                                              nvmlEccCounterType_t,
                                              unsigned long long* count) = nullptr;
  nvmlReturn_t (*device_get_mig_mode)(nvmlDevice_t, unsigned int* current,
                                      unsigned int* pending) = nullptr;
  // With infos == nullptr and *count == 0 it returns NVML_ERROR_INSUFFICIENT_SIZE
  // and the needed *count (or NVML_SUCCESS when there are none).
  nvmlReturn_t (*device_get_compute_running_processes_v3)(nvmlDevice_t, unsigned int* count,
                                                          nvmlProcessInfo_t* infos) = nullptr;
  nvmlReturn_t (*device_get_persistence_mode)(nvmlDevice_t, nvmlEnableState_t* mode) = nullptr;
  nvmlReturn_t (*device_get_power_usage)(nvmlDevice_t, unsigned int* milliwatts) = nullptr;
  nvmlReturn_t (*device_get_enforced_power_limit)(nvmlDevice_t, unsigned int* milliwatts) = nullptr;

  // The dlopen() handle, or null for an injected table. Never closed: NVML
  // keeps driver state for the life of the process.
  void* library = nullptr;
};

// Opens `soname` with dlopen() and fills a table with dlsym().
//   - the library cannot be opened: NotFound carrying dlerror()'s text;
//   - a required symbol is missing: FailedPrecondition naming it (a driver
//     older than NVML API 10, CUDA 10.0);
//   - an optional symbol is missing: its pointer stays null.
// Does not call nvmlInit; NvmlSource does.
Result<NvmlApi> LoadNvml(const std::string& soname = "libnvidia-ml.so.1");

// NVML's own text for `rc` when the table has error_string, else "NVML error <rc>".
std::string NvmlErrorText(const NvmlApi& api, nvmlReturn_t rc);

}  // namespace lathe::gpu

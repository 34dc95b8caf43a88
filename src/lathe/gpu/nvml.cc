#include "lathe/gpu/nvml.h"

#include <dlfcn.h>
#include <fmt/format.h>

namespace lathe::gpu {
namespace {

// Casting dlsym's void* to a function pointer is conditionally supported in
// C++ and fine on every POSIX system; this keeps the casts in one place.
template <typename Fn>
void Bind(void* lib, const char* symbol, Fn& slot) {
  slot = reinterpret_cast<Fn>(dlsym(lib, symbol));
}

void BindAll(void* lib, NvmlApi& api) {
  Bind(lib, "nvmlInit_v2", api.init_v2);
  Bind(lib, "nvmlShutdown", api.shutdown);
  Bind(lib, "nvmlErrorString", api.error_string);
  Bind(lib, "nvmlSystemGetDriverVersion", api.system_get_driver_version);
  Bind(lib, "nvmlSystemGetCudaDriverVersion_v2", api.system_get_cuda_driver_version_v2);
  Bind(lib, "nvmlDeviceGetCount_v2", api.device_get_count_v2);
  Bind(lib, "nvmlDeviceGetHandleByIndex_v2", api.device_get_handle_by_index_v2);
  Bind(lib, "nvmlDeviceGetUUID", api.device_get_uuid);
  Bind(lib, "nvmlDeviceGetName", api.device_get_name);
  Bind(lib, "nvmlDeviceGetPciInfo_v3", api.device_get_pci_info_v3);
  Bind(lib, "nvmlDeviceGetMemoryInfo", api.device_get_memory_info);
  Bind(lib, "nvmlDeviceGetUtilizationRates", api.device_get_utilization_rates);
  Bind(lib, "nvmlDeviceGetTemperature", api.device_get_temperature);
  Bind(lib, "nvmlDeviceGetClockInfo", api.device_get_clock_info);
  Bind(lib, "nvmlDeviceGetMaxClockInfo", api.device_get_max_clock_info);
  Bind(lib, "nvmlDeviceGetCurrentClocksThrottleReasons",
       api.device_get_current_clocks_throttle_reasons);
  if (api.device_get_current_clocks_throttle_reasons == nullptr) {
    // NVML 12.2 renamed "throttle" to "event"; the old name may one day go.
    Bind(lib, "nvmlDeviceGetCurrentClocksEventReasons",
         api.device_get_current_clocks_throttle_reasons);
  }
  Bind(lib, "nvmlDeviceGetEccMode", api.device_get_ecc_mode);
  Bind(lib, "nvmlDeviceGetTotalEccErrors", api.device_get_total_ecc_errors);
  Bind(lib, "nvmlDeviceGetMigMode", api.device_get_mig_mode);
  Bind(lib, "nvmlDeviceGetComputeRunningProcesses_v3", api.device_get_compute_running_processes_v3);
  Bind(lib, "nvmlDeviceGetPersistenceMode", api.device_get_persistence_mode);
  Bind(lib, "nvmlDeviceGetPowerUsage", api.device_get_power_usage);
  Bind(lib, "nvmlDeviceGetEnforcedPowerLimit", api.device_get_enforced_power_limit);
}

const char* FirstMissingRequired(const NvmlApi& api) {
  if (api.init_v2 == nullptr) return "nvmlInit_v2";
  if (api.shutdown == nullptr) return "nvmlShutdown";
  if (api.device_get_count_v2 == nullptr) return "nvmlDeviceGetCount_v2";
  if (api.device_get_handle_by_index_v2 == nullptr) return "nvmlDeviceGetHandleByIndex_v2";
  return nullptr;
}

}  // namespace

Result<NvmlApi> LoadNvml(const std::string& soname) {
  // RTLD_LOCAL keeps NVML's symbols out of the global namespace, so a
  // LibTorch loaded later cannot bind to them by accident.
  void* lib = dlopen(soname.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    const char* err = dlerror();
    return Status::NotFound(fmt::format("cannot load NVML ({}): {}", soname,
                                        err != nullptr ? err : "unknown dlopen error"));
  }
  NvmlApi api;
  api.library = lib;
  BindAll(lib, api);
  if (const char* missing = FirstMissingRequired(api)) {
    dlclose(lib);
    return Status::FailedPrecondition(fmt::format(
        "{} has no {}: the NVIDIA driver is too old (NVML API 10 / CUDA 10.0 or newer is needed)",
        soname, missing));
  }
  return api;
}

std::string NvmlErrorText(const NvmlApi& api, nvmlReturn_t rc) {
  if (api.error_string != nullptr) {
    if (const char* text = api.error_string(rc)) return fmt::format("{} ({})", text, int(rc));
  }
  return fmt::format("NVML error {}", int(rc));
}

}  // namespace lathe::gpu

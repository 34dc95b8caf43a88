#include "lathe/doctor/test_util/fake_nvml.h"

#include <cstdint>
#include <cstring>

#include "lathe/gpu/nvml_source.h"

namespace lathe::doctor::testing {
namespace {

FakeNvmlGpu& Dev(nvmlDevice_t d) { return Nvml().gpus[reinterpret_cast<uintptr_t>(d) - 1]; }

void Copy(const std::string& s, char* out, unsigned int len) {
  std::strncpy(out, s.c_str(), len);
  out[len - 1] = '\0';
}

nvmlReturn_t Init() { return NVML_SUCCESS; }
nvmlReturn_t Shutdown() { return NVML_SUCCESS; }
const char* ErrorString(nvmlReturn_t) { return "fake error"; }
nvmlReturn_t DriverVersion(char* v, unsigned int len) {
  Copy(Nvml().driver_version, v, len);
  return NVML_SUCCESS;
}
nvmlReturn_t CudaVersion(int* v) {
  *v = Nvml().cuda_version;
  return NVML_SUCCESS;
}
nvmlReturn_t Count(unsigned int* n) {
  *n = static_cast<unsigned int>(Nvml().gpus.size());
  return NVML_SUCCESS;
}
nvmlReturn_t Handle(unsigned int i, nvmlDevice_t* d) {
  if (i >= Nvml().gpus.size()) return NVML_ERROR_INVALID_ARGUMENT;
  *d = reinterpret_cast<nvmlDevice_t>(uintptr_t{i} + 1);
  return NVML_SUCCESS;
}
nvmlReturn_t Uuid(nvmlDevice_t d, char* s, unsigned int len) {
  uintptr_t i = reinterpret_cast<uintptr_t>(d) - 1;
  std::string u = Dev(d).uuid.empty() ? "GPU-fake-" + std::to_string(i) : Dev(d).uuid;
  Copy(u, s, len);
  return NVML_SUCCESS;
}
nvmlReturn_t Name(nvmlDevice_t d, char* s, unsigned int len) {
  Copy(Dev(d).name, s, len);
  return NVML_SUCCESS;
}
nvmlReturn_t Memory(nvmlDevice_t d, nvmlMemory_t* m) {
  *m = {Dev(d).memory_total, Dev(d).memory_total - Dev(d).memory_used, Dev(d).memory_used};
  return NVML_SUCCESS;
}
nvmlReturn_t Processes(nvmlDevice_t d, unsigned int* count, nvmlProcessInfo_t* infos) {
  const auto& procs = Dev(d).processes;
  if (!Dev(d).list_processes) return NVML_ERROR_NOT_SUPPORTED;
  if (*count < procs.size()) {
    *count = static_cast<unsigned int>(procs.size());
    return procs.empty() ? NVML_SUCCESS : NVML_ERROR_INSUFFICIENT_SIZE;
  }
  for (size_t i = 0; i < procs.size(); ++i) {
    infos[i] = {procs[i].first, procs[i].second, 0xFFFFFFFFu, 0xFFFFFFFFu};
  }
  *count = static_cast<unsigned int>(procs.size());
  return NVML_SUCCESS;
}
nvmlReturn_t Temp(nvmlDevice_t d, nvmlTemperatureSensors_t, unsigned int* t) {
  *t = Dev(d).temperature_c;
  return NVML_SUCCESS;
}
nvmlReturn_t Clock(nvmlDevice_t d, nvmlClockType_t, unsigned int* mhz) {
  *mhz = Dev(d).sm_clock_mhz;
  return NVML_SUCCESS;
}
nvmlReturn_t MaxClock(nvmlDevice_t d, nvmlClockType_t, unsigned int* mhz) {
  *mhz = Dev(d).sm_clock_max_mhz;
  return NVML_SUCCESS;
}
nvmlReturn_t Throttle(nvmlDevice_t d, unsigned long long* r) {
  *r = Dev(d).throttle_reasons;
  return NVML_SUCCESS;
}
nvmlReturn_t EccMode(nvmlDevice_t d, nvmlEnableState_t* cur, nvmlEnableState_t* pending) {
  *cur = *pending = Dev(d).ecc_enabled ? NVML_FEATURE_ENABLED : NVML_FEATURE_DISABLED;
  return NVML_SUCCESS;
}
nvmlReturn_t EccErrors(nvmlDevice_t d, nvmlMemoryErrorType_t t, nvmlEccCounterType_t,
                       unsigned long long* n) {
  *n = t == NVML_MEMORY_ERROR_TYPE_UNCORRECTED ? Dev(d).ecc_uncorrected : 0;
  return NVML_SUCCESS;
}
nvmlReturn_t Mig(nvmlDevice_t d, unsigned int* cur, unsigned int* pending) {
  *cur = *pending = Dev(d).mig;
  return NVML_SUCCESS;
}
nvmlReturn_t Persistence(nvmlDevice_t d, nvmlEnableState_t* m) {
  *m = Dev(d).persistence ? NVML_FEATURE_ENABLED : NVML_FEATURE_DISABLED;
  return NVML_SUCCESS;
}

}  // namespace

FakeNvml& Nvml() {
  static FakeNvml state;
  return state;
}

gpu::NvmlApi FakeNvmlApi() {
  gpu::NvmlApi api;
  api.init_v2 = Init;
  api.shutdown = Shutdown;
  api.error_string = ErrorString;
  api.system_get_driver_version = DriverVersion;
  api.system_get_cuda_driver_version_v2 = CudaVersion;
  api.device_get_count_v2 = Count;
  api.device_get_handle_by_index_v2 = Handle;
  api.device_get_uuid = Uuid;
  api.device_get_name = Name;
  api.device_get_memory_info = Memory;
  api.device_get_temperature = Temp;
  api.device_get_clock_info = Clock;
  api.device_get_max_clock_info = MaxClock;
  api.device_get_current_clocks_throttle_reasons = Throttle;
  api.device_get_ecc_mode = EccMode;
  api.device_get_total_ecc_errors = EccErrors;
  api.device_get_mig_mode = Mig;
  api.device_get_persistence_mode = Persistence;
  api.device_get_compute_running_processes_v3 = Processes;
  return api;
}

Result<gpu::Inventory> SampleFakeNvml(const FakeNvml& state) {
  Nvml() = state;
  ASSIGN_OR_RETURN(auto source, gpu::NvmlSource::Create(FakeNvmlApi()));
  return source->Sample();
}

}  // namespace lathe::doctor::testing

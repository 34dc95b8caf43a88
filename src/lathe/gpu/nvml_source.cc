#include "lathe/gpu/nvml_source.h"

#include <fmt/format.h>

#include <cmath>

namespace lathe::gpu {
namespace {

// Processes can start between the "how many?" call and the "fill" call, so
// the buffer gets some slack and the pair is retried a few times.
constexpr unsigned int kProcessSlack = 8;
constexpr int kProcessAttempts = 3;
constexpr double kMilliwattsPerWatt = 1000.0;

// Calls an optional NVML entry point; false when it is absent or fails.
template <typename Fn, typename... Args>
bool Call(Fn fn, Args... args) {
  return fn != nullptr && fn(args...) == NVML_SUCCESS;
}

// NVML writes NUL-terminated strings, but a fake or a truncated buffer might
// not; never read past the buffer.
template <size_t N>
std::string FromBuffer(char (&buf)[N]) {
  buf[N - 1] = '\0';
  return std::string(buf);
}

// 12040 -> "12.4"
std::string CudaVersionText(int v) { return fmt::format("{}.{}", v / 1000, (v % 1000) / 10); }

}  // namespace

Result<std::unique_ptr<NvmlSource>> NvmlSource::Create(const NvmlApi& api) {
  if (api.init_v2 == nullptr || api.shutdown == nullptr || api.device_get_count_v2 == nullptr ||
      api.device_get_handle_by_index_v2 == nullptr) {
    return Status::InvalidArgument(
        "NVML table lacks a required entry point (init_v2, shutdown, device_get_count_v2, "
        "device_get_handle_by_index_v2)");
  }
  nvmlReturn_t rc = api.init_v2();
  if (rc != NVML_SUCCESS) {
    return Status::Unavailable(fmt::format("nvmlInit failed: {}", NvmlErrorText(api, rc)));
  }
  return std::unique_ptr<NvmlSource>(new NvmlSource(api));
}

NvmlSource::~NvmlSource() { api_.shutdown(); }

Result<Inventory> NvmlSource::Sample() {
  Inventory inv;
  inv.source = "nvml";
  char driver[NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE] = {};
  if (Call(api_.system_get_driver_version, driver, unsigned(sizeof driver))) {
    inv.driver_version = FromBuffer(driver);
  }
  int cuda = 0;
  if (Call(api_.system_get_cuda_driver_version_v2, &cuda))
    inv.cuda_driver_version = CudaVersionText(cuda);

  unsigned int count = 0;
  nvmlReturn_t rc = api_.device_get_count_v2(&count);
  if (rc != NVML_SUCCESS) {
    return Status::Unavailable(
        fmt::format("nvmlDeviceGetCount failed: {}", NvmlErrorText(api_, rc)));
  }
  for (unsigned int i = 0; i < count; ++i) inv.gpus.push_back(SampleDevice(i));
  return inv;
}

GpuInfo NvmlSource::SampleDevice(unsigned int index) const {
  GpuInfo g;
  g.index = static_cast<int>(index);
  nvmlDevice_t dev = nullptr;
  nvmlReturn_t rc = api_.device_get_handle_by_index_v2(index, &dev);
  if (rc != NVML_SUCCESS) {
    g.error = NvmlErrorText(api_, rc);
    return g;
  }
  ReadIdentity(dev, g);
  ReadMemoryAndLoad(dev, g);
  ReadClocks(dev, g);
  ReadModes(dev, g);
  ReadPower(dev, g);
  g.processes = ReadProcesses(dev);
  return g;
}

void NvmlSource::ReadIdentity(nvmlDevice_t dev, GpuInfo& g) const {
  char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE] = {};
  if (api_.device_get_uuid != nullptr) {
    // The UUID is how runs and allocations name a GPU: a GPU without one
    // (usually "GPU is lost") is marked unusable.
    nvmlReturn_t rc = api_.device_get_uuid(dev, uuid, sizeof uuid);
    if (rc == NVML_SUCCESS) {
      g.uuid = FromBuffer(uuid);
    } else {
      g.error = NvmlErrorText(api_, rc);
    }
  }
  char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE] = {};
  if (Call(api_.device_get_name, dev, name, unsigned(sizeof name))) g.name = FromBuffer(name);
  nvmlPciInfo_t pci{};
  if (Call(api_.device_get_pci_info_v3, dev, &pci)) g.pci_bus_id = FromBuffer(pci.busId);
}

void NvmlSource::ReadMemoryAndLoad(nvmlDevice_t dev, GpuInfo& g) const {
  nvmlMemory_t mem{};
  if (Call(api_.device_get_memory_info, dev, &mem)) {
    g.memory_total_bytes = mem.total;
    g.memory_used_bytes = mem.used;
  }
  nvmlUtilization_t util{};
  if (Call(api_.device_get_utilization_rates, dev, &util)) {
    g.utilization_gpu_pct = static_cast<int>(util.gpu);
    g.utilization_mem_pct = static_cast<int>(util.memory);
  }
  unsigned int temp = 0;
  if (Call(api_.device_get_temperature, dev, NVML_TEMPERATURE_GPU, &temp)) {
    g.temperature_c = static_cast<int>(temp);
  }
}

void NvmlSource::ReadClocks(nvmlDevice_t dev, GpuInfo& g) const {
  unsigned int mhz = 0;
  if (Call(api_.device_get_clock_info, dev, NVML_CLOCK_SM, &mhz))
    g.sm_clock_mhz = static_cast<int>(mhz);
  if (Call(api_.device_get_max_clock_info, dev, NVML_CLOCK_SM, &mhz)) {
    g.sm_clock_max_mhz = static_cast<int>(mhz);
  }
  unsigned long long reasons = 0;
  if (Call(api_.device_get_current_clocks_throttle_reasons, dev, &reasons)) {
    g.throttle_reasons = reasons;
    g.throttle_reason_names = ThrottleReasonNames(reasons);
  }
}

void NvmlSource::ReadModes(nvmlDevice_t dev, GpuInfo& g) const {
  nvmlEnableState_t current = NVML_FEATURE_DISABLED, pending = NVML_FEATURE_DISABLED;
  if (Call(api_.device_get_ecc_mode, dev, &current, &pending)) {
    g.ecc_enabled = current == NVML_FEATURE_ENABLED;
  }
  unsigned long long errors = 0;
  if (Call(api_.device_get_total_ecc_errors, dev, NVML_MEMORY_ERROR_TYPE_UNCORRECTED,
           NVML_VOLATILE_ECC, &errors)) {
    g.ecc_uncorrected_errors = errors;
  }
  unsigned int mig = 0, mig_pending = 0;
  if (Call(api_.device_get_mig_mode, dev, &mig, &mig_pending)) {
    g.mig_enabled = mig == NVML_DEVICE_MIG_ENABLE;
  }
  nvmlEnableState_t persistence = NVML_FEATURE_DISABLED;
  if (Call(api_.device_get_persistence_mode, dev, &persistence)) {
    g.persistence_mode = persistence == NVML_FEATURE_ENABLED;
  }
}

void NvmlSource::ReadPower(nvmlDevice_t dev, GpuInfo& g) const {
  unsigned int mw = 0;
  if (Call(api_.device_get_power_usage, dev, &mw)) g.power_w = mw / kMilliwattsPerWatt;
  if (Call(api_.device_get_enforced_power_limit, dev, &mw))
    g.power_limit_w = mw / kMilliwattsPerWatt;
}

std::optional<std::vector<GpuProcess>> NvmlSource::ReadProcesses(nvmlDevice_t dev) const {
  auto fn = api_.device_get_compute_running_processes_v3;
  if (fn == nullptr) return std::nullopt;
  std::vector<nvmlProcessInfo_t> buf;
  for (int attempt = 0; attempt < kProcessAttempts; ++attempt) {
    unsigned int count = static_cast<unsigned int>(buf.size());
    nvmlReturn_t rc = fn(dev, &count, buf.empty() ? nullptr : buf.data());
    if (rc == NVML_ERROR_INSUFFICIENT_SIZE) {
      buf.resize(count + kProcessSlack);
      continue;
    }
    if (rc != NVML_SUCCESS) return std::nullopt;
    std::vector<GpuProcess> out;
    for (unsigned int i = 0; i < count && i < buf.size(); ++i) {
      GpuProcess p;
      p.pid = static_cast<int>(buf[i].pid);
      if (buf[i].usedGpuMemory != NVML_VALUE_NOT_AVAILABLE)
        p.used_memory_bytes = buf[i].usedGpuMemory;
      out.push_back(p);
    }
    return out;
  }
  return std::nullopt;
}

}  // namespace lathe::gpu

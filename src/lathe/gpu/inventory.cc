#include "lathe/gpu/inventory.h"

#include <fmt/format.h>

#include <array>
#include <string_view>

namespace lathe::gpu {
namespace {

constexpr std::array<std::string_view, 9> kThrottleBitNames = {
    "gpu_idle",
    "applications_clocks_setting",
    "sw_power_cap",
    "hw_slowdown",
    "sync_boost",
    "sw_thermal",
    "hw_thermal",
    "hw_power_brake",
    "display_clock_setting",
};

// nlohmann has no std::optional support of its own; null stands for unknown.
template <typename T>
Json OrNull(const std::optional<T>& v) {
  return v ? Json(*v) : Json(nullptr);
}

Json ProcessesJson(const std::optional<std::vector<GpuProcess>>& processes) {
  if (!processes) return nullptr;
  Json out = Json::array();
  for (const GpuProcess& p : *processes) {
    out.push_back({{"pid", p.pid}, {"used_memory_bytes", OrNull(p.used_memory_bytes)}});
  }
  return out;
}

}  // namespace

std::vector<std::string> ThrottleReasonNames(uint64_t reasons) {
  std::vector<std::string> names;
  for (int bit = 0; bit < 64; ++bit) {
    if ((reasons & (uint64_t{1} << bit)) == 0) continue;
    names.push_back(bit < static_cast<int>(kThrottleBitNames.size())
                        ? std::string(kThrottleBitNames[bit])
                        : fmt::format("bit{}", bit));
  }
  return names;
}

Json ToJson(const GpuInfo& g) {
  return {
      {"index", g.index},
      {"uuid", g.uuid},
      {"name", g.name},
      {"pci_bus_id", g.pci_bus_id},
      {"memory_total_bytes", OrNull(g.memory_total_bytes)},
      {"memory_used_bytes", OrNull(g.memory_used_bytes)},
      {"utilization_gpu_pct", OrNull(g.utilization_gpu_pct)},
      {"utilization_mem_pct", OrNull(g.utilization_mem_pct)},
      {"temperature_c", OrNull(g.temperature_c)},
      {"sm_clock_mhz", OrNull(g.sm_clock_mhz)},
      {"sm_clock_max_mhz", OrNull(g.sm_clock_max_mhz)},
      {"throttle_reasons", OrNull(g.throttle_reasons)},
      {"throttle_reason_names", g.throttle_reason_names},
      {"ecc_enabled", OrNull(g.ecc_enabled)},
      {"ecc_uncorrected_errors", OrNull(g.ecc_uncorrected_errors)},
      {"mig_enabled", OrNull(g.mig_enabled)},
      {"persistence_mode", OrNull(g.persistence_mode)},
      {"power_w", OrNull(g.power_w)},
      {"power_limit_w", OrNull(g.power_limit_w)},
      {"processes", ProcessesJson(g.processes)},
      {"error", g.error},
  };
}

Json ToJson(const Inventory& inv) {
  Json gpus = Json::array();
  for (const GpuInfo& g : inv.gpus) gpus.push_back(ToJson(g));
  return {
      {"source", inv.source},
      {"simulated", inv.simulated},
      {"driver_version", inv.driver_version},
      {"cuda_driver_version", inv.cuda_driver_version},
      {"gpus", std::move(gpus)},
      {"note", inv.note},
  };
}

}  // namespace lathe::gpu

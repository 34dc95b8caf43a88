#include "lathe/gpu/source.h"

#include <fmt/format.h>

#include "lathe/gpu/nvml_source.h"
#include "lathe/gpu/simulated_source.h"

namespace lathe::gpu {
namespace {

Result<std::unique_ptr<GpuSource>> OpenNvml() {
  ASSIGN_OR_RETURN(NvmlApi api, LoadNvml());
  ASSIGN_OR_RETURN(std::unique_ptr<NvmlSource> source, NvmlSource::Create(api));
  return std::unique_ptr<GpuSource>(std::move(source));
}

}  // namespace

Result<Inventory> NoGpuSource::Sample() {
  Inventory inv;
  inv.source = "none";
  inv.note = note_;
  return inv;
}

Result<std::unique_ptr<GpuSource>> OpenGpuSource(const std::string& spec) {
  if (spec.empty() || spec == "auto") {
    // A machine without a driver is normal (laptops, CI, CPU nodes): "auto"
    // degrades to no GPUs and keeps the reason for the doctor and the API.
    auto nvml = OpenNvml();
    if (nvml.ok()) return std::move(nvml).value();
    return std::unique_ptr<GpuSource>(std::make_unique<NoGpuSource>(nvml.status().message()));
  }
  if (spec == "nvml") return OpenNvml();
  if (spec == "none") {
    return std::unique_ptr<GpuSource>(
        std::make_unique<NoGpuSource>("GPU inventory is turned off (GPU source 'none')"));
  }
  if (spec.starts_with("sim:")) {
    ASSIGN_OR_RETURN(std::unique_ptr<SimulatedSource> sim, SimulatedSource::Create(spec));
    return std::unique_ptr<GpuSource>(std::move(sim));
  }
  return Status::InvalidArgument(
      fmt::format("GPU source '{}' is not valid: use auto, nvml, none, sim:N or sim:NxSIZE[:MODEL] "
                  "(e.g. sim:4x24GB)",
                  spec));
}

}  // namespace lathe::gpu

// A GpuSource over NVML, through an NvmlApi table (a loaded driver or a test's
// fake functions).
#pragma once

#include <memory>

#include "lathe/common/status.h"
#include "lathe/gpu/nvml.h"
#include "lathe/gpu/source.h"

namespace lathe::gpu {

class NvmlSource : public GpuSource {
 public:
  // Calls api.init_v2(). A table without the required entry points is
  // InvalidArgument; a failing nvmlInit is Unavailable with NVML's text
  // ("Driver Not Loaded", "Insufficient Permissions", …).
  static Result<std::unique_ptr<NvmlSource>> Create(const NvmlApi& api);

  // Calls api.shutdown() (NVML counts init/shutdown pairs).
  ~NvmlSource() override;
  NvmlSource(const NvmlSource&) = delete;
  NvmlSource& operator=(const NvmlSource&) = delete;

  // source "nvml". Fails (Unavailable) only when the device count cannot be
  // read; any other call that fails leaves its field unknown. A GPU whose
  // handle or UUID cannot be read is listed with `error` set.
  // NVML is thread-safe, and so is this.
  Result<Inventory> Sample() override;

 private:
  explicit NvmlSource(const NvmlApi& api) : api_(api) {}
  GpuInfo SampleDevice(unsigned int index) const;
  void ReadIdentity(nvmlDevice_t dev, GpuInfo& g) const;
  void ReadMemoryAndLoad(nvmlDevice_t dev, GpuInfo& g) const;
  void ReadClocks(nvmlDevice_t dev, GpuInfo& g) const;
  void ReadModes(nvmlDevice_t dev, GpuInfo& g) const;
  void ReadPower(nvmlDevice_t dev, GpuInfo& g) const;
  std::optional<std::vector<GpuProcess>> ReadProcesses(nvmlDevice_t dev) const;

  const NvmlApi api_;
};

}  // namespace lathe::gpu

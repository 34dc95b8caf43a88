// Where an Inventory comes from: a GpuSource samples the GPUs each time it is
// asked. The daemon opens one source at start-up (--gpus / LATHE_GPUS spec)
// and samples it for placement, the API and metrics.
#pragma once

#include <memory>
#include <string>

#include "lathe/common/status.h"
#include "lathe/gpu/inventory.h"

namespace lathe::gpu {

class GpuSource {
 public:
  virtual ~GpuSource() = default;

  // A fresh sample of every GPU. Fails only when the whole source is broken
  // (e.g. the driver stopped answering); a GPU that cannot be read is listed
  // with GpuInfo::error set. Safe to call from any thread.
  virtual Result<Inventory> Sample() = 0;
};

// A machine without GPUs (or with inventory turned off): every sample is an
// empty Inventory with source "none" and `note` saying why.
class NoGpuSource : public GpuSource {
 public:
  explicit NoGpuSource(std::string note) : note_(std::move(note)) {}
  Result<Inventory> Sample() override;

 private:
  const std::string note_;
};

// Opens the source a spec names:
//   "" or "auto"  NVML when libnvidia-ml loads and initialises, else a
//                 NoGpuSource whose note says why (never an error);
//   "nvml"        NVML or the error that prevents it;
//   "none"        no GPUs;
//   "sim:4x24GB"  simulated GPUs (see simulated_source.h): "sim:N", "sim:NxSIZE",
//                 "sim:2x80GB:A100,2x24GB:L4", "sim:4x24GB@/abs/load.json".
// Any other spec is InvalidArgument naming it and the allowed forms.
Result<std::unique_ptr<GpuSource>> OpenGpuSource(const std::string& spec);

}  // namespace lathe::gpu

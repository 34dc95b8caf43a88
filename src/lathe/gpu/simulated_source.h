// Simulated GPUs, for machines without any: the scheduler, the API and the UI
// behave as on a GPU server, and every sample says simulated=true.
//
// Spec: "sim:N" (N GPUs of 24GB) or "sim:NxSIZE" with SIZE in Lathe's units
// ("sim:4x24GB" = 4 × 24×10⁹ bytes, "sim:2x80GiB" = 2 × 80×2³⁰), 1 ≤ N ≤ 64.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>

#include "lathe/common/status.h"
#include "lathe/gpu/source.h"

namespace lathe::gpu {

inline constexpr int kMaxSimulatedGpus = 64;
inline constexpr uint64_t kDefaultSimulatedMemoryBytes = 24'000'000'000ULL;  // "24GB"

struct SimSpec {
  int count = 0;
  uint64_t memory_bytes = kDefaultSimulatedMemoryBytes;  // per GPU
};

// Parses "sim:…"; anything else is InvalidArgument naming the value and the
// allowed forms.
Result<SimSpec> ParseSimSpec(std::string_view spec);

// GPU i is named "Simulated GPU" with uuid "GPU-sim-000i" (4 digits), all its
// memory free, utilization 0, no throttling, no ECC errors, no processes;
// temperature, clocks and power are unknown.
class SimulatedSource : public GpuSource {
 public:
  explicit SimulatedSource(SimSpec spec) : spec_(spec) {}
  static Result<std::unique_ptr<SimulatedSource>> Create(std::string_view spec);

  Result<Inventory> Sample() override;

 private:
  const SimSpec spec_;
};

}  // namespace lathe::gpu

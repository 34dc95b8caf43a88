#include "lathe/gpu/simulated_source.h"

#include <fmt/format.h>

#include <charconv>

#include "lathe/common/units.h"

namespace lathe::gpu {
namespace {

constexpr std::string_view kSimPrefix = "sim:";

Status BadSpec(std::string_view spec, std::string_view why) {
  return Status::InvalidArgument(fmt::format(
      "GPU source '{}' is not valid ({}): use sim:N or sim:NxSIZE with 1 <= N <= {} and SIZE "
      "like 24GB or 80GiB, e.g. sim:4x24GB",
      spec, why, kMaxSimulatedGpus));
}

// Whole-string decimal count; from_chars alone accepts trailing junk.
bool ParseCount(std::string_view s, int& out) {
  if (s.empty()) return false;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && end == s.data() + s.size();
}

}  // namespace

Result<SimSpec> ParseSimSpec(std::string_view spec) {
  if (spec.substr(0, kSimPrefix.size()) != kSimPrefix) return BadSpec(spec, "no 'sim:' prefix");
  std::string_view body = spec.substr(kSimPrefix.size());
  size_t x = body.find('x');
  SimSpec out;
  if (!ParseCount(body.substr(0, x), out.count)) return BadSpec(spec, "the GPU count is not a number");
  if (out.count < 1 || out.count > kMaxSimulatedGpus) return BadSpec(spec, "the GPU count is out of range");
  if (x == std::string_view::npos) return out;
  auto bytes = ParseBytes(body.substr(x + 1));
  if (!bytes.ok()) return BadSpec(spec, "the memory size is not a size");
  if (*bytes == 0) return BadSpec(spec, "the memory size is zero");
  out.memory_bytes = *bytes;
  return out;
}

Result<std::unique_ptr<SimulatedSource>> SimulatedSource::Create(std::string_view spec) {
  ASSIGN_OR_RETURN(SimSpec parsed, ParseSimSpec(spec));
  return std::make_unique<SimulatedSource>(parsed);
}

Result<Inventory> SimulatedSource::Sample() {
  Inventory inv;
  inv.source = "simulated";
  inv.simulated = true;
  inv.note = fmt::format("{} simulated GPUs of {} each", spec_.count, FormatBytes(spec_.memory_bytes));
  for (int i = 0; i < spec_.count; ++i) {
    GpuInfo g;
    g.index = i;
    g.uuid = fmt::format("GPU-sim-{:04d}", i);
    g.name = "Simulated GPU";
    g.memory_total_bytes = spec_.memory_bytes;
    g.memory_used_bytes = 0;
    g.utilization_gpu_pct = 0;
    g.utilization_mem_pct = 0;
    g.throttle_reasons = 0;
    g.ecc_enabled = false;
    g.ecc_uncorrected_errors = 0;
    g.mig_enabled = false;
    g.persistence_mode = true;
    g.processes = std::vector<GpuProcess>{};
    inv.gpus.push_back(std::move(g));
  }
  return inv;
}

}  // namespace lathe::gpu

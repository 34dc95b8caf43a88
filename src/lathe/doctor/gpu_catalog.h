// The GPUs `lathe plan` compares against: data/gpu_catalog.yaml (embedded,
// shared data-file format) with the override files of the configuration
// directories merged on top, an optional user price table, and which of them
// a setup fits on, at what throughput and cost per million tokens.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "lathe/common/i18n.h"
#include "lathe/common/status.h"
#include "lathe/doctor/plan.h"
#include "lathe/gpu/inventory.h"

namespace lathe::doctor {

struct GpuModel {
  std::string id;    // "h100-sxm"
  std::string name;  // "NVIDIA H100 SXM 80GB"
  uint64_t memory_bytes = 0;
  double bf16_tflops = 0;  // dense peak
  std::optional<double> price_usd_hour;
  std::string match;  // RE2 pattern for the NVML name; may be empty
};

// Parses and validates a catalogue: memory in Lathe's units ("80GiB"),
// positive TFLOP/s, a non-negative price, a match pattern that compiles.
Result<std::vector<GpuModel>> ParseGpuCatalog(std::string_view yaml, std::string_view file_name);
// The embedded data/gpu_catalog.yaml; aborts if broken (plan_test catches it).
const std::vector<GpuModel>& DefaultGpuCatalog();

// The files that override the embedded catalogue, in the order they apply:
// the system one, /etc/lathe/gpu_catalog.yaml, then the user's,
// $XDG_CONFIG_HOME/lathe/gpu_catalog.yaml (XDG_CONFIG_HOME defaults to
// $HOME/.config; left out when neither is set). `getenv_fn` is injectable.
std::vector<std::string> GpuCatalogOverridePaths(GetenvFn getenv_fn);
// Merges a catalogue file into `catalog`: an entry whose id is a model's
// replaces it, any other is added. Entries are validated as in ParseGpuCatalog.
Status MergeGpuCatalog(std::vector<GpuModel>& catalog, std::string_view yaml,
                       std::string_view file_name);
// The embedded catalogue with each of `paths` that exists merged on top, in
// order; `read` (if not null) gets the files that were merged. A file that
// exists but cannot be read or parsed is an error naming it.
Result<std::vector<GpuModel>> LoadGpuCatalog(const std::vector<std::string>& paths,
                                             std::vector<std::string>* read);
// The first catalogue model whose `match` finds `nvml_name`, or nullptr.
const GpuModel* MatchGpuModel(const std::vector<GpuModel>& catalog, const std::string& nvml_name);
// Overrides prices from a user file of entries {id, price_usd_hour}; an id
// that is not in `models` is InvalidArgument naming it.
Status ApplyPrices(std::vector<GpuModel>& models, std::string_view yaml,
                   std::string_view file_name);

struct GpuFit {
  std::string name;
  bool local = false;  // found on this machine through NVML
  uint64_t memory_bytes = 0;
  bool fits = false;                   // plan.total ≤ memory
  std::optional<double> tokens_per_s;  // per GPU, at the assumed MFU
  std::optional<double> usd_per_mtok;  // needs a price
};

// Training FLOPs per token and parameter: 6 (forward + backward), 8 with
// activation checkpointing (one more forward); 2 for int8 inference.
double FlopsPerTokenPerParam(const PlanInput& in);

// Every local GPU (matched to a catalogue model for its TFLOP/s and price
// when `match` finds it), then every catalogue model. `mfu` is in (0, 1].
std::vector<GpuFit> FitGpus(const MemoryPlan& plan, const PlanInput& in,
                            const std::vector<GpuModel>& catalog, const gpu::Inventory* local,
                            double mfu);

}  // namespace lathe::doctor

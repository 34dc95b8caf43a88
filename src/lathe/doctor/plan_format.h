// How `lathe plan` shows a MemoryPlan and the GPUs it fits on: a breakdown
// with the formula of each term, then a table of GPUs, in the reader's
// language; or JSON.
#pragma once

#include <string>
#include <vector>

#include "lathe/common/i18n.h"
#include "lathe/common/json.h"
#include "lathe/doctor/gpu_catalog.h"
#include "lathe/doctor/plan.h"

namespace lathe::doctor {

// `catalog_files`: the override files of the catalogue that were read (named
// as such); `edit_file`: the one the closing hint tells the reader to edit.
struct CatalogSource {
  std::vector<std::string> catalog_files;
  std::string edit_file;
};
std::string FormatPlan(const PlanInput& in, const MemoryPlan& plan, const std::vector<GpuFit>& fits,
                       double mfu, const CatalogSource& source, Lang lang);

// {"params", "bytes_per_gpu": {"weights", "gradients", "optimizer",
//  "activations" (null when unknown), "overhead", "total"}, "formulas": {…},
//  "gpus": [{"name", "local", "memory_bytes", "fits", "tokens_per_s",
//            "usd_per_mtok"}], "mfu"}
Json PlanToJson(const MemoryPlan& plan, const std::vector<GpuFit>& fits, double mfu);

}  // namespace lathe::doctor

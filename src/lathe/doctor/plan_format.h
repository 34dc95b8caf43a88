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

std::string FormatPlan(const PlanInput& in, const MemoryPlan& plan,
                       const std::vector<GpuFit>& fits, double mfu, Lang lang);

// {"params", "bytes_per_gpu": {"weights", "gradients", "optimizer",
//  "activations" (null when unknown), "overhead", "total"}, "formulas": {…},
//  "gpus": [{"name", "local", "memory_bytes", "fits", "tokens_per_s",
//            "usd_per_mtok"}], "mfu"}
Json PlanToJson(const MemoryPlan& plan, const std::vector<GpuFit>& fits, double mfu);

}  // namespace lathe::doctor

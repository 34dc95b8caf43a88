// The load file of simulated GPUs: what a test wants them to report.
//
// A JSON object whose "gpus" lists the GPUs that are busy; a GPU it does not
// list is idle. Field names are those of GET /api/v1/gpus (inventory.h):
//
//   {"gpus": [{"index": 0,                       required, 0 … count-1, once each
//              "utilization_gpu_pct": 87,        0 … 100
//              "utilization_mem_pct": 40,        0 … 100
//              "memory_used_bytes": "20GB",      bytes or a size; ≤ the GPU's memory;
//                                                default: the sum of "processes"
//              "temperature_c": 71,              0 … 200
//              "sm_clock_mhz": 1410,             0 … 10000
//              "sm_clock_max_mhz": 1980,         0 … 10000
//              "power_w": 250.5,                 0 … 10000
//              "power_limit_w": 400,             0 … 10000
//              "throttle_reason_names": ["sw_thermal"],   names of ThrottleReasonNames
//                                                         (or "bit<N>"), any order
//              "ecc_uncorrected_errors": 0,      ≥ 0
//              "error": "GPU is lost (15)",      the GPU cannot be read (see GpuInfo::error)
//              "processes": [{"pid": 1234, "used_memory_bytes": "10GB"}]}]}
//
// Values left out keep the idle values of SimulatedSource. Any other field, a
// value of the wrong type or out of its range is an error naming the field
// ("gpus[0].utilization_gpu_pct") and what is allowed.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "lathe/common/status.h"
#include "lathe/gpu/inventory.h"

namespace lathe::gpu {

// Applies the load file's `text` (read from `path`, named in errors) to
// `gpus`, the idle GPUs of a simulated source indexed 0…N-1. On error `gpus`
// is unchanged and the Status (InvalidArgument, catalog id gpu.sim_load_*)
// names the field.
Status ApplySimLoad(std::string_view text, const std::string& path, std::vector<GpuInfo>& gpus);

}  // namespace lathe::gpu

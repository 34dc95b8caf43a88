// A run's telemetry as GET /api/v1/runs/{run}/metrics answers it: columnar
// arrays, one per field, that chart libraries (uPlot) take as they are.
//
//   {run, simulated, interval_ms, since_ms,
//    tiers: [{name: "raw", resolution_ms, window_ms, max_points},
//            {name: "minute", resolution_ms, window_ms}],
//    gpus: [{index, uuid, name,
//            t: [ms…], n: [samples per point…],
//            utilization_pct, utilization_max_pct, memory_used_bytes,
//            memory_used_max_bytes, process_memory_bytes, process_memory_max_bytes,
//            temperature_c, power_w, sm_clock_mhz,
//            throttled: [share of the point's samples throttled, 0…1],
//            throttle_reasons: [[names]…], summary}],
//    cpu: {t, usage_cores, usage_max_cores}, memory: {t, bytes, max_bytes},
//    summary: {samples, observed_s, mean_utilization_pct, max_utilization_pct,
//              peak_memory_bytes, peak_process_memory_bytes, throttled_s,
//              throttled_pct, throttle_reasons: {name: seconds},
//              mean_cpu_cores, max_cpu_cores, peak_host_memory_bytes, first_ms, last_ms}}
//
// A raw point has n = 1; a minute bucket's values are the means of its n
// samples, the *_max columns their maxima. Unknown values are null.
#pragma once

#include <cstdint>

#include "lathe/common/json.h"
#include "lathe/telemetry/series.h"
#include "lathe/telemetry/store.h"

namespace lathe::telemetry {

Json MetricsJson(const RunTelemetry& t, const TierOptions& tiers, int64_t since_ms);
Json SummaryJson(const Totals& totals);

}  // namespace lathe::telemetry

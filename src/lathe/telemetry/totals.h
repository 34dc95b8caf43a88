// Running totals of a run's telemetry, over its whole observed time (the
// series thin out as they age; these do not): the summary `lathe inspect
// --metrics` and GET /api/v1/runs/{run}/metrics show.
#pragma once

#include <cmath>
#include <cstdint>
#include <map>
#include <string>

#include "lathe/common/json.h"
#include "lathe/telemetry/series.h"

namespace lathe::telemetry {

// The time a sample stands for is the gap since the previous sample, at most
// kMaxGapIntervals intervals (a daemon that was down does not count its
// absence), and one interval for the first.
inline constexpr int64_t kMaxGapIntervals = 3;

struct Totals {
  int64_t samples = 0;
  int64_t first_ms = 0;
  int64_t last_ms = 0;
  int64_t observed_ms = 0;
  int64_t throttled_ms = 0;
  std::map<std::string, int64_t> reason_ms;  // throttle reason → time
  double utilization_sum = 0;                // over the samples that knew it
  int64_t utilization_n = 0;
  double utilization_max = kUnknown;
  double memory_peak = kUnknown;          // a GPU's memory_used
  double process_memory_peak = kUnknown;  // the run's processes' GPU memory
  double cpu_sum = 0;                     // CPUs' worth, the run's host series
  int64_t cpu_n = 0;
  double cpu_max = kUnknown;
  double host_memory_peak = kUnknown;

  // Adds a sample at `t_ms`. GPU points count towards utilization, memory and
  // throttling; host points (`host`) towards CPU and RAM. `interval_ms` is
  // the sampling interval.
  void Add(const Point& p, bool host, int64_t interval_ms);
  // A GPU point's utilization and memory alone (no time): what the run's own
  // totals take from each of its GPUs' points.
  void AddValues(const Point& p);
  // Adds the time of a tick at `t_ms` in which some GPU of the run was
  // throttled with `reasons` (bits; 0: none) — the run's own totals count a
  // tick once, whatever number of its GPUs throttled.
  void AddTick(int64_t t_ms, uint64_t reasons, int64_t interval_ms);

  double MeanUtilization() const;  // NaN when unknown
  Json ToJson() const;             // internal form, for the store
  static Totals FromJson(const Json& j);
};

// The throttle-reason bits that count as throttling (all but gpu_idle).
uint64_t ThrottlingBits(uint64_t reasons);

}  // namespace lathe::telemetry

// GPU usage of past and current attempts, as the quotas and fair share
// (scheduler.h, Account) count it. Pure arithmetic: the daemon reads the
// attempts from its state store and passes the figures to Schedule.
//
// An attempt holds `gpus` GPUs from `start_ms` to `end_ms` (none: it still
// holds them, counted up to `now_ms`). Times outside [start, end] count 0;
// an end before the start counts 0.
//
// GPU-hours in a period (quota `gpu_hours` per `period`): a rolling window,
//   used = Σ gpus × |[start, end] ∩ [now − period, now]| / 1 h.
//
// Fair-share usage (Slurm's decayed usage): every GPU-hour counts less the
// longer ago it was spent, halving every `half_life` H:
//   U = Σ gpus × ∫_start^end 2^(−(now − t)/H) dt / 1 h
//     = Σ gpus × (H / ln 2) × (2^(−(now − end)/H) − 2^(−(now − start)/H)) / 1 h.
// A GPU-hour spent just now counts 1, one spent H ago 0.5, 2H ago 0.25. An
// attempt that ended more than kFairShareHorizon half-lives ago counts less
// than 2^−10 of what it did and may be left out (the daemon stops reading it).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace lathe::sched {

inline constexpr int64_t kHourMs = 3600 * 1000;
inline constexpr int kFairShareHorizon = 10;  // half-lives

struct AttemptUsage {
  std::string user;
  int gpus = 0;
  int64_t start_ms = 0;
  std::optional<int64_t> end_ms;  // none: still holds its GPUs
};

// GPU-hours of `a` in the rolling window [now − period, now]. period <= 0: 0.
double GpuHoursIn(const AttemptUsage& a, int64_t now_ms, int64_t period_ms);

// Decayed GPU-hours of `a` at `now_ms` (formula above). half_life <= 0: the
// plain GPU-hours up to now (no decay).
double DecayedGpuHours(const AttemptUsage& a, int64_t now_ms, int64_t half_life_ms);

}  // namespace lathe::sched

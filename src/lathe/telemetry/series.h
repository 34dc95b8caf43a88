// A bounded, downsampled time series: what the daemon keeps of one GPU of a
// run (or of the run's CPU and memory) however long the run lasts.
//
// Tiers (TierOptions, defaults):
//   raw      every sample, for the last hour of the series (raw_window_ms)
//            and at most 720 samples (raw_max_points: an hour at the default
//            5 s interval; a shorter interval keeps a shorter stretch raw);
//   minute   older samples folded into 1-minute buckets (bucket_ms): the mean
//            and the maximum of each field, the share of throttled samples,
//            the union of throttle reasons; kept for 7 days (bucket_window_ms);
//   beyond   dropped (the run's summary, kept apart, still covers them).
// The windows are measured back from the series' newest point, not from the
// clock: a finished run's series stays as it was when the run ended.
// Bound: at most raw_max_points + bucket_window_ms / bucket_ms + 1 points
// (10,801 with the defaults) per series, whatever the run's length.
//
// A Series is a plain value; not thread-safe.
#pragma once

#include <array>
#include <cmath>
#include <cstdint>
#include <deque>
#include <limits>
#include <string>
#include <vector>

#include "lathe/common/status.h"

namespace lathe::telemetry {

// Fields of a point. A GPU series uses all of them; a run's host series
// (CPU and memory) uses kCpuCores and kHostMemory only.
enum Field : size_t {
  kUtilization = 0,  // %
  kMemoryUsed,       // bytes, the whole GPU
  kProcessMemory,    // bytes, the run's processes on this GPU
  kTemperature,      // °C
  kPower,            // W
  kSmClock,          // MHz
  kThrottled,        // 1 when clock-throttled (benign reasons aside), else 0
  kFieldCount,
  kCpuCores = 0,    // CPUs' worth of time used over the interval
  kHostMemory = 1,  // bytes of RAM (the run's cgroup)
};

inline constexpr double kUnknown = std::numeric_limits<double>::quiet_NaN();

// One sample (n = 1) or a bucket of n samples. Each field's value is its
// mean over the samples that knew it (`known` of them; NaN when none did)
// and `max` its maximum. `reasons` is the OR of the throttle-reason bits.
struct Point {
  int64_t t_ms = 0;  // a sample's time; a bucket's start
  uint32_t n = 1;
  std::array<double, kFieldCount> mean;
  std::array<double, kFieldCount> max;
  std::array<uint32_t, kFieldCount> known{};
  uint64_t reasons = 0;

  Point() {
    mean.fill(kUnknown);
    max.fill(kUnknown);
  }
  // A sample at `t_ms` with the field set to `v` (NaN: unknown).
  void Set(Field f, double v);
};

// Folds points (in time order) into one whose t_ms is `t_ms`.
Point Fold(const std::vector<Point>& points, int64_t t_ms);

// Compact JSON text of a point, and back (the store keeps them so).
std::string EncodePoint(const Point& p);
Result<Point> DecodePoint(const std::string& text, int64_t t_ms);

struct TierOptions {
  int64_t raw_window_ms = 3'600'000;          // 1 h
  size_t raw_max_points = 720;                // ≥ 1
  int64_t bucket_ms = 60'000;                 // 1 min
  int64_t bucket_window_ms = 7 * 86'400'000;  // 7 days
  size_t MaxPoints() const {
    return raw_max_points + static_cast<size_t>(bucket_window_ms / bucket_ms) + 1;
  }
};

// What one Add changed, for a store that mirrors the series.
struct SeriesChange {
  bool added = false;                  // the point was appended (false: not newer than the last)
  std::vector<Point> buckets;          // buckets created or updated, to write (replace by t_ms)
  int64_t raw_removed_before = 0;      // raw points with t_ms below this went (0: none)
  int64_t buckets_removed_before = 0;  // buckets with t_ms below this went (0: none)
};

class Series {
 public:
  explicit Series(TierOptions tiers = {}) : tiers_(tiers) {}

  // Appends a sample newer than every point held (an older one is ignored),
  // then folds and drops what fell out of the tiers.
  SeriesChange Add(const Point& p);
  // Puts back what a store held (each in time order, buckets older than raw).
  void Restore(std::vector<Point> buckets, std::vector<Point> raw);

  // Every point with t_ms ≥ since_ms, buckets first, in time order.
  std::vector<Point> Points(int64_t since_ms = 0) const;
  size_t size() const { return raw_.size() + buckets_.size(); }
  size_t raw_size() const { return raw_.size(); }
  size_t bucket_size() const { return buckets_.size(); }
  const TierOptions& tiers() const { return tiers_; }

 private:
  int64_t BucketOf(int64_t t_ms) const;
  void FoldFront(SeriesChange& change);

  TierOptions tiers_;
  std::deque<Point> buckets_;
  std::deque<Point> raw_;
};

}  // namespace lathe::telemetry

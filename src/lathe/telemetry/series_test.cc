#include "lathe/telemetry/series.h"

#include <gtest/gtest.h>

#include <map>

namespace lathe::telemetry {
namespace {

Point Sample(int64_t t_ms, double util, uint64_t reasons = 0) {
  Point p;
  p.t_ms = t_ms;
  p.Set(kUtilization, util);
  p.Set(kThrottled, reasons ? 1 : 0);
  p.reasons = reasons;
  return p;
}

constexpr int64_t kMin = 60'000;
constexpr int64_t kStart = 1'700'000'000'000 / kMin * kMin;  // a minute boundary

TEST(Series, KeepsTheLastHourRawAndFoldsOlderMinutes) {
  Series s;  // 5 s, 1 h raw, 1 min buckets
  // Two hours at 5 s: the first minute at 10 %, the second at 30 % with one
  // sample at 90 % throttled by sw_thermal (bit 5), the rest at 50 %.
  for (int64_t t = kStart; t < kStart + 2 * 3'600'000; t += 5000) {
    double util = t < kStart + kMin ? 10 : t < kStart + 2 * kMin ? 30 : 50;
    uint64_t reasons = 0;
    if (t == kStart + kMin + 5000) {
      util = 90;
      reasons = 1 << 5;
    }
    s.Add(Sample(t, util, reasons));
  }
  EXPECT_LE(s.raw_size(), 720u);
  auto pts = s.Points();
  ASSERT_GE(pts.size(), 2u);
  // The first bucket: 12 samples of minute 0.
  EXPECT_EQ(pts[0].t_ms, kStart);
  EXPECT_EQ(pts[0].n, 12u);
  EXPECT_DOUBLE_EQ(pts[0].mean[kUtilization], 10);
  // The second: 11 × 30 + 90, max 90, 1/12 throttled, reason kept.
  EXPECT_EQ(pts[1].t_ms, kStart + kMin);
  EXPECT_EQ(pts[1].n, 12u);
  EXPECT_DOUBLE_EQ(pts[1].mean[kUtilization], (11 * 30 + 90) / 12.0);
  EXPECT_DOUBLE_EQ(pts[1].max[kUtilization], 90);
  EXPECT_DOUBLE_EQ(pts[1].mean[kThrottled], 1 / 12.0);
  EXPECT_EQ(pts[1].reasons, uint64_t{1} << 5);
  // Raw points cover exactly the last hour; everything is in time order.
  const int64_t newest = pts.back().t_ms;
  for (size_t i = 1; i < pts.size(); ++i) EXPECT_LT(pts[i - 1].t_ms, pts[i].t_ms);
  for (const Point& p : pts) {
    if (p.n == 1) EXPECT_GE(p.t_ms, newest - 3'600'000);
  }
  EXPECT_EQ(s.bucket_size(), 60u);  // the first hour, a bucket a minute
}

TEST(Series, BoundedWhateverTheLength) {
  TierOptions tiers;
  tiers.raw_window_ms = 60'000;
  tiers.raw_max_points = 10;
  tiers.bucket_ms = 10'000;
  tiers.bucket_window_ms = 100'000;
  Series s(tiers);
  size_t most = 0;
  for (int64_t t = 0; t < 10'000'000; t += 1000) {
    s.Add(Sample(t, 1));
    most = std::max(most, s.size());
  }
  EXPECT_LE(most, tiers.MaxPoints());
  EXPECT_EQ(s.raw_size(), 10u);  // the count bound, tighter than the 60 s window here
  // The oldest bucket is within the bucket window of the newest point.
  auto pts = s.Points();
  EXPECT_GE(pts.front().t_ms, pts.back().t_ms - tiers.bucket_window_ms);
}

TEST(Series, ChangesMirrorTheSeries) {
  TierOptions tiers;
  tiers.raw_window_ms = 20'000;
  tiers.raw_max_points = 100;
  tiers.bucket_ms = 10'000;
  tiers.bucket_window_ms = 30'000;
  Series s(tiers);
  std::map<int64_t, Point> raw, buckets;  // what a store following the changes holds
  for (int64_t t = 0; t < 200'000; t += 2500) {
    SeriesChange c = s.Add(Sample(t, static_cast<double>(t % 7)));
    ASSERT_TRUE(c.added);
    raw[t] = Sample(t, 0);
    std::erase_if(raw, [&](const auto& e) { return e.first < c.raw_removed_before; });
    std::erase_if(buckets, [&](const auto& e) { return e.first < c.buckets_removed_before; });
    for (const Point& b : c.buckets) buckets[b.t_ms] = b;
  }
  auto pts = s.Points();
  ASSERT_EQ(pts.size(), raw.size() + buckets.size());
  size_t i = 0;
  for (const auto& [t, b] : buckets) {
    EXPECT_EQ(pts[i].t_ms, t);
    EXPECT_EQ(pts[i].n, b.n);
    EXPECT_DOUBLE_EQ(pts[i].mean[kUtilization], b.mean[kUtilization]);
    ++i;
  }
  for (const auto& [t, r] : raw) EXPECT_EQ(pts[i++].t_ms, t);
  EXPECT_FALSE(s.Add(Sample(0, 1)).added);  // older than the newest: ignored
}

TEST(Series, UnknownValuesStayUnknownAndDoNotDragTheMean) {
  Point a = Sample(0, 40), b = Sample(1000, kUnknown), c = Sample(2000, 60);
  Point f = Fold({a, b, c}, 0);
  EXPECT_EQ(f.n, 3u);
  EXPECT_EQ(f.known[kUtilization], 2u);
  EXPECT_DOUBLE_EQ(f.mean[kUtilization], 50);
  EXPECT_TRUE(std::isnan(f.mean[kPower]));
}

TEST(Series, PointsRoundTripThroughTheirText) {
  Point raw = Sample(5, 42.5, 4);
  raw.Set(kPower, kUnknown);
  auto back = DecodePoint(EncodePoint(raw), 5);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->n, 1u);
  EXPECT_DOUBLE_EQ(back->mean[kUtilization], 42.5);
  EXPECT_TRUE(std::isnan(back->mean[kPower]));
  EXPECT_EQ(back->reasons, 4u);

  Point bucket = Fold({Sample(0, 10), Sample(1, 30)}, 0);
  auto b2 = DecodePoint(EncodePoint(bucket), 0);
  ASSERT_TRUE(b2.ok());
  EXPECT_EQ(b2->n, 2u);
  EXPECT_DOUBLE_EQ(b2->mean[kUtilization], 20);
  EXPECT_DOUBLE_EQ(b2->max[kUtilization], 30);
  EXPECT_FALSE(DecodePoint("{}", 0).ok());
}

}  // namespace
}  // namespace lathe::telemetry

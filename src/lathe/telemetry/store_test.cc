#include "lathe/telemetry/store.h"

#include <gtest/gtest.h>

#include "lathe/telemetry/test_util/temp_dir.h"

namespace lathe::telemetry {
namespace {

GpuPoint Gpu(int index, int64_t t_ms, double util, double proc_mem, uint64_t reasons = 0) {
  GpuPoint g;
  g.index = index;
  g.uuid = "GPU-sim-000" + std::to_string(index);
  g.name = "Simulated GPU";
  g.point.t_ms = t_ms;
  g.point.Set(kUtilization, util);
  g.point.Set(kMemoryUsed, proc_mem + 1000);
  g.point.Set(kProcessMemory, proc_mem);
  g.point.Set(kThrottled, ThrottlingBits(reasons) ? 1 : 0);
  g.point.reasons = reasons;
  return g;
}

TEST(TelemetryStore, AppendReadAndSurviveReopen) {
  TempDir dir;
  const std::string path = dir.path() + "/telemetry.db";
  {
    auto store = TelemetryStore::Open(path);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    for (int i = 0; i < 4; ++i) {
      const int64_t t = 1'000'000 + i * 5000;
      RunTick a{"r-a", {Gpu(0, t, 80, 5e9, i == 3 ? 1 << 5 : 0)}, std::nullopt};
      Point host;
      host.t_ms = t;
      host.Set(kCpuCores, 1.5);
      host.Set(kHostMemory, 2e9);
      a.host = host;
      RunTick b{"r-b", {Gpu(1, t, 20, 1e9), Gpu(2, t, 30, 2e9)}, std::nullopt};
      auto metas = (*store)->Append(t, 5000, true, {a, b});
      ASSERT_TRUE(metas.ok()) << metas.status().ToString();
      EXPECT_EQ((*metas)["r-a"].totals.samples, i + 1);
    }
  }
  auto store = TelemetryStore::Open(path);
  ASSERT_TRUE(store.ok());
  auto a = (*store)->Read("r-a", 0);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_TRUE(a->meta.simulated);
  EXPECT_EQ(a->meta.interval_ms, 5000);
  ASSERT_EQ(a->gpus.size(), 1u);
  EXPECT_EQ(a->gpus[0].uuid, "GPU-sim-0000");
  ASSERT_EQ(a->gpus[0].points.size(), 4u);
  EXPECT_DOUBLE_EQ(a->gpus[0].points[2].mean[kUtilization], 80);
  EXPECT_DOUBLE_EQ(a->gpus[0].points[2].mean[kProcessMemory], 5e9);
  ASSERT_EQ(a->host.size(), 4u);
  EXPECT_DOUBLE_EQ(a->host[0].mean[kHostMemory], 2e9);
  // Totals: 4 samples of 5 s, one throttled by sw_thermal.
  EXPECT_EQ(a->meta.totals.observed_ms, 20'000);
  EXPECT_EQ(a->meta.totals.throttled_ms, 5'000);
  EXPECT_EQ(a->meta.totals.reason_ms["sw_thermal"], 5'000);
  EXPECT_DOUBLE_EQ(a->meta.totals.MeanUtilization(), 80);
  // The run's process memory peak is the sum over its GPUs.
  auto b = (*store)->Read("r-b", 1'000'000 + 10'000);
  ASSERT_TRUE(b.ok());
  ASSERT_EQ(b->gpus.size(), 2u);
  EXPECT_EQ(b->gpus[1].points.size(), 2u);  // since: the last two
  EXPECT_DOUBLE_EQ(b->meta.totals.process_memory_peak, 3e9);
  EXPECT_DOUBLE_EQ(b->meta.totals.MeanUtilization(), 25);

  // Appending after the reopen continues the series.
  auto more = (*store)->Append(1'020'000, 5000, true, {{"r-a", {Gpu(0, 1'020'000, 10, 0)}, {}}});
  ASSERT_TRUE(more.ok());
  EXPECT_EQ((*more)["r-a"].totals.samples, 5);
  EXPECT_EQ((*store)->Read("r-a", 0)->gpus[0].points.size(), 5u);

  ASSERT_TRUE((*store)->Remove("r-a").ok());
  EXPECT_TRUE((*store)->Read("r-a", 0).status().IsNotFound());
  EXPECT_TRUE((*store)->Read("r-b", 0).ok());
}

TEST(TelemetryStore, FoldedBucketsAreStoredAndReadBack) {
  TempDir dir;
  StoreOptions o;
  o.tiers.raw_window_ms = 60'000;
  o.tiers.raw_max_points = 1000;
  o.tiers.bucket_ms = 60'000;
  auto store = TelemetryStore::Open(dir.path() + "/t.db", o);
  ASSERT_TRUE(store.ok());
  const int64_t t0 = 60'000 * 1000;
  for (int i = 0; i < 60; ++i) {  // 5 minutes at 5 s; minute k at 10·k %
    const int64_t t = t0 + i * 5000;
    ASSERT_TRUE(
        (*store)->Append(t, 5000, false, {{"r", {Gpu(0, t, 10.0 * (i / 12), 0)}, {}}}).ok());
  }
  auto r = (*store)->Read("r", 0);
  ASSERT_TRUE(r.ok());
  const auto& pts = r->gpus[0].points;
  // Minutes 0-2 folded (older than 60 s before the newest), minute 3-4 raw.
  ASSERT_GE(pts.size(), 3u);
  EXPECT_EQ(pts[0].n, 12u);
  EXPECT_DOUBLE_EQ(pts[0].mean[kUtilization], 0);
  EXPECT_EQ(pts[1].t_ms, t0 + 60'000);
  EXPECT_DOUBLE_EQ(pts[1].mean[kUtilization], 10);
  EXPECT_DOUBLE_EQ(pts[2].mean[kUtilization], 20);
  EXPECT_EQ(pts.back().n, 1u);
  EXPECT_EQ(pts.back().t_ms, t0 + 59 * 5000);
  EXPECT_FALSE(r->meta.simulated);
}

TEST(TelemetryStore, SizeBoundDropsTheOldestFinishedRunsFirst) {
  TempDir dir;
  StoreOptions o;
  o.max_bytes = 200'000;
  auto store = TelemetryStore::Open(dir.path() + "/t.db", o);
  ASSERT_TRUE(store.ok());
  // Runs r0…r9, each with 400 samples; r0's last sample is the oldest.
  int64_t t = 1'000'000;
  for (int r = 0; r < 10; ++r) {
    for (int i = 0; i < 400; ++i, t += 5000) {
      std::string id = "r" + std::to_string(r);
      ASSERT_TRUE((*store)->Append(t, 5000, true, {{id, {Gpu(0, t, 50, 1e9)}, {}}}).ok());
    }
  }
  ASSERT_GT(*(*store)->UsedBytes(), o.max_bytes);
  auto dropped = (*store)->EnforceBound({"r0"});  // r0 is still sampled: it stays
  ASSERT_TRUE(dropped.ok()) << dropped.status().ToString();
  ASSERT_FALSE(dropped->empty());
  EXPECT_EQ(dropped->front(), "r1");
  EXPECT_LE(*(*store)->UsedBytes(), o.max_bytes);
  EXPECT_TRUE((*store)->Read("r0", 0).ok());
  EXPECT_TRUE((*store)->Read("r9", 0).ok());  // the newest stays
  for (const auto& id : *dropped) EXPECT_TRUE((*store)->Read(id, 0).status().IsNotFound());
}

TEST(TelemetryStore, ToldIsKept) {
  TempDir dir;
  auto store = TelemetryStore::Open(dir.path() + "/t.db");
  ASSERT_TRUE((*store)->Append(1000, 5000, true, {{"r", {Gpu(0, 1000, 1, 0)}, {}}}).ok());
  ASSERT_TRUE((*store)->SetTold("r", kToldIdle).ok());
  auto m = (*store)->Append(6000, 5000, true, {{"r", {Gpu(0, 6000, 1, 0)}, {}}});
  EXPECT_EQ((*m)["r"].told, kToldIdle);
}

}  // namespace
}  // namespace lathe::telemetry

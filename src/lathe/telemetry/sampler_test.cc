#include "lathe/telemetry/sampler.h"

#include <gtest/gtest.h>

#include <fstream>

#include "lathe/gpu/simulated_source.h"
#include "lathe/os/test_util/fake_clock.h"
#include "lathe/os/test_util/fake_process_table.h"
#include "lathe/telemetry/test_util/temp_dir.h"

namespace lathe::telemetry {
namespace {

constexpr int64_t kInterval = 5000;

class SamplerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // GPU 0: run a's pid 100 at 87 %; GPU 1: run b's pid 200 (found through
    // its cgroup) at 2 %, throttled by sw_thermal; GPU 2: a stranger's pid.
    std::ofstream(dir_.path() + "/load.json") << R"({"gpus": [
      {"index": 0, "utilization_gpu_pct": 87, "temperature_c": 71, "sm_clock_mhz": 1410,
       "power_w": 250.5, "processes": [{"pid": 100, "used_memory_bytes": "10GB"}]},
      {"index": 1, "utilization_gpu_pct": 2, "memory_used_bytes": "6GB",
       "throttle_reason_names": ["sw_thermal", "gpu_idle"],
       "processes": [{"pid": 200, "used_memory_bytes": "4GB"}]},
      {"index": 2, "utilization_gpu_pct": 50,
       "processes": [{"pid": 300, "used_memory_bytes": "1GB"}]}]})";
    auto spec = gpu::ParseSimSpec("sim:3x24GB@" + dir_.path() + "/load.json");
    ASSERT_TRUE(spec.ok()) << spec.status().ToString();
    source_ = std::make_unique<gpu::SimulatedSource>(*spec, clock_);
    auto store = TelemetryStore::Open(dir_.path() + "/telemetry.db");
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    store_ = std::move(store).value();
    table_.Set(100, {1, {"/"}, {0, 3'000'000'000}});
    table_.Set(200, {1, {"/svc/lathe/r-b"}, {}});
    table_.Set(300, {1, {"/elsewhere"}, {}});
    Sampler::Hooks hooks;
    hooks.targets = [this] { return targets_; };
    hooks.on_warning = [this](const std::string& run, const UsageWarning& w) {
      warnings_.emplace_back(run, w);
    };
    SamplerOptions o;
    o.interval_ms = kInterval;
    sampler_ = std::make_unique<Sampler>(o, *source_, *store_, table_, clock_, hooks);
    targets_ = {{{"r-a", {100}, {}}, {0}},
                {{"r-b", {}, {dir_.path() + "/no-such-cgroup/svc/lathe/r-b"}}, {1}}};
  }

  // `n` ticks, 5 s apart; run a's process uses half a CPU.
  void Ticks(int n) {
    for (int i = 0; i < n; ++i) {
      ASSERT_TRUE(sampler_->Tick().ok());
      cpu_us_ += kInterval * 1000 / 2;
      table_.Set(100, {1, {"/"}, {cpu_us_, 3'000'000'000}});
      clock_.Advance(kInterval);
    }
  }

  TempDir dir_;
  os::FakeClock clock_;
  os::FakeProcessTable table_;
  std::unique_ptr<gpu::SimulatedSource> source_;
  std::unique_ptr<TelemetryStore> store_;
  std::unique_ptr<Sampler> sampler_;
  std::vector<SampleTarget> targets_;
  std::vector<std::pair<std::string, UsageWarning>> warnings_;
  uint64_t cpu_us_ = 0;
};

TEST_F(SamplerTest, TheScriptedLoadComesBackPerRun) {
  Ticks(3);
  auto a = store_->Read("r-a", 0);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_TRUE(a->meta.simulated);
  ASSERT_EQ(a->gpus.size(), 1u);
  const GpuSeries& g0 = a->gpus[0];
  EXPECT_EQ(g0.index, 0);
  EXPECT_EQ(g0.uuid, "GPU-sim-0000");
  ASSERT_EQ(g0.points.size(), 3u);
  const Point& p = g0.points[2];
  EXPECT_DOUBLE_EQ(p.mean[kUtilization], 87);
  EXPECT_DOUBLE_EQ(p.mean[kMemoryUsed], 10e9);  // the sum of its processes
  EXPECT_DOUBLE_EQ(p.mean[kProcessMemory], 10e9);
  EXPECT_DOUBLE_EQ(p.mean[kTemperature], 71);
  EXPECT_DOUBLE_EQ(p.mean[kPower], 250.5);
  EXPECT_DOUBLE_EQ(p.mean[kSmClock], 1410);
  EXPECT_DOUBLE_EQ(p.mean[kThrottled], 0);
  // CPU from its process table entry: half a CPU after the first tick.
  ASSERT_EQ(a->host.size(), 3u);
  EXPECT_TRUE(std::isnan(a->host[0].mean[kCpuCores]));
  EXPECT_DOUBLE_EQ(a->host[2].mean[kCpuCores], 0.5);
  EXPECT_DOUBLE_EQ(a->host[2].mean[kHostMemory], 3e9);

  auto b = store_->Read("r-b", 0);
  ASSERT_TRUE(b.ok());
  ASSERT_EQ(b->gpus.size(), 1u);
  const Point& q = b->gpus[0].points.back();
  EXPECT_DOUBLE_EQ(q.mean[kUtilization], 2);
  EXPECT_DOUBLE_EQ(q.mean[kMemoryUsed], 6e9);
  EXPECT_DOUBLE_EQ(q.mean[kProcessMemory], 4e9);  // pid 200 through its cgroup
  EXPECT_DOUBLE_EQ(q.mean[kThrottled], 1);        // sw_thermal (gpu_idle alone would not count)
  EXPECT_EQ(q.reasons, (uint64_t{1} << 5) | 1);
  EXPECT_EQ(b->meta.totals.reason_ms.at("sw_thermal"), 15'000);
  EXPECT_FALSE(b->meta.totals.reason_ms.contains("gpu_idle"));
  EXPECT_TRUE(store_->Read("r-c", 0).status().IsNotFound());

  Json h = sampler_->History(0);
  EXPECT_TRUE(h["simulated"].get<bool>());
  ASSERT_EQ(h["gpus"].size(), 3u);
  EXPECT_EQ(h["gpus"][2]["utilization_pct"], Json::array({50.0, 50.0, 50.0}));
}

TEST_F(SamplerTest, WarnsOfIdleAndThrottledOnceEach) {
  Ticks(60);  // 5 minutes: throttled all the time, idle not yet for 10 minutes
  ASSERT_EQ(warnings_.size(), 1u);
  EXPECT_EQ(warnings_[0].first, "r-b");
  EXPECT_EQ(warnings_[0].second.msg_id, "telemetry.throttled");
  EXPECT_EQ(warnings_[0].second.args.at("reasons"), "sw_thermal");
  Ticks(70);
  ASSERT_EQ(warnings_.size(), 2u);
  EXPECT_EQ(warnings_[1].first, "r-b");
  EXPECT_EQ(warnings_[1].second.msg_id, "telemetry.idle_gpus");
  Ticks(10);
  EXPECT_EQ(warnings_.size(), 2u);  // once each; r-a at 87 % never
  // A sampler made anew (a daemon restart) does not tell them again.
  SamplerOptions o;
  o.interval_ms = kInterval;
  Sampler again(
      o, *source_, *store_, table_, clock_,
      {[this] { return targets_; },
       [this](const std::string& run, const UsageWarning& w) { warnings_.emplace_back(run, w); }});
  for (int i = 0; i < 130; ++i, clock_.Advance(kInterval)) ASSERT_TRUE(again.Tick().ok());
  EXPECT_EQ(warnings_.size(), 2u);
}

}  // namespace
}  // namespace lathe::telemetry

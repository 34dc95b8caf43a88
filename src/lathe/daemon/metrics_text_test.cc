#include "lathe/daemon/metrics_text.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>
#include <sstream>

namespace lathe::daemon {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

MetricsSnapshot Fake() {
  MetricsSnapshot s;
  s.inventory.source = "simulated";
  s.inventory.simulated = true;
  gpu::GpuInfo a;
  a.index = 0;
  a.uuid = "GPU-sim-0";
  a.name = "NVIDIA A100 (simulated)";
  a.memory_total_bytes = 80'000'000'000;
  a.memory_used_bytes = 20'000'000'000;
  a.utilization_gpu_pct = 87;
  a.utilization_mem_pct = 40;
  a.temperature_c = 84;
  a.power_w = 310.5;
  a.power_limit_w = 400;
  a.sm_clock_mhz = 1100;
  a.sm_clock_max_mhz = 1980;
  a.throttle_reasons = 1u << 5;
  a.throttle_reason_names = {"sw_thermal"};
  a.ecc_uncorrected_errors = 2;
  gpu::GpuInfo b;  // idle, free, and what its driver does not tell is unknown
  b.index = 1;
  b.uuid = "GPU-sim-1";
  b.name = "Odd \"GPU\" \\ name";
  b.utilization_gpu_pct = 0;
  b.throttle_reasons = 1;
  b.throttle_reason_names = {"gpu_idle"};
  s.inventory.gpus = {a, b};
  s.holders[0] = GpuHolder{"r-abc", "odd\"na\\me\nx", "alice"};
  s.queued[run::Priority::kHigh] = 3;
  s.runs[run::RunState::kRunning] = 1;
  s.runs[run::RunState::kQueued] = 3;
  s.latency = SchedulingLatency::Snapshot{{0.5, 5}, {2, 1}, 4, 72.5};
  s.version = "9.8.7";
  s.start_time_ms = 1'700'000'000'500;
  return s;
}

constexpr const char* kHeld =
    R"x({gpu="0",uuid="GPU-sim-0",name="NVIDIA A100 (simulated)",simulated="true",run="r-abc",)x"
    R"x(run_name="odd\"na\\me\nx",user="alice"})x";
constexpr const char* kFree =
    R"x({gpu="1",uuid="GPU-sim-1",name="Odd \"GPU\" \\ name",simulated="true",run="",run_name="",)x"
    R"x(user=""})x";

TEST(MetricsTextTest, GpuGaugesCarryTheRunAndUserHoldingThem) {
  std::string t = MetricsText(Fake());
  EXPECT_THAT(t, HasSubstr(std::string("lathe_gpu_utilization_ratio") + kHeld + " 0.87\n"));
  EXPECT_THAT(t, HasSubstr(std::string("lathe_gpu_memory_used_bytes") + kHeld + " 20000000000\n"));
  EXPECT_THAT(t, HasSubstr(std::string("lathe_gpu_memory_total_bytes") + kHeld + " 80000000000\n"));
  EXPECT_THAT(t, HasSubstr(std::string("lathe_gpu_temperature_celsius") + kHeld + " 84\n"));
  EXPECT_THAT(t, HasSubstr(std::string("lathe_gpu_power_watts") + kHeld + " 310.5\n"));
  EXPECT_THAT(t, HasSubstr(std::string("lathe_gpu_sm_clock_hertz") + kHeld + " 1100000000\n"));
  EXPECT_THAT(t, HasSubstr(std::string("lathe_gpu_ecc_uncorrected_errors") + kHeld + " 2\n"));
  EXPECT_THAT(t, HasSubstr(std::string("lathe_gpu_allocated") + kHeld + " 1\n"));
  EXPECT_THAT(t, HasSubstr(std::string("lathe_gpu_throttled") + kHeld + " 1\n"));
  std::string held_reason = std::string(kHeld);
  held_reason.insert(held_reason.size() - 1, ",reason=\"sw_thermal\"");
  EXPECT_THAT(t, HasSubstr("lathe_gpu_throttle_reason" + held_reason + " 1\n"));
  // The free GPU: empty run labels, escaped name, idle is not throttled, and
  // what it does not report has no sample at all.
  EXPECT_THAT(t, HasSubstr(std::string("lathe_gpu_allocated") + kFree + " 0\n"));
  EXPECT_THAT(t, HasSubstr(std::string("lathe_gpu_utilization_ratio") + kFree + " 0\n"));
  EXPECT_THAT(t, HasSubstr(std::string("lathe_gpu_throttled") + kFree + " 0\n"));
  EXPECT_THAT(t, Not(HasSubstr(std::string("lathe_gpu_temperature_celsius") + kFree)));
  EXPECT_THAT(t, HasSubstr(R"(lathe_gpus{source="simulated",simulated="true"} 2)"));
  EXPECT_THAT(t, HasSubstr(R"(lathe_build_info{version="9.8.7"} 1)"));
  EXPECT_THAT(t, HasSubstr("lathe_daemon_start_time_seconds 1700000000.5\n"));
}

TEST(MetricsTextTest, EveryStateAndPriorityHasASample) {
  std::string t = MetricsText(Fake());
  for (const char* st : {"queued", "starting", "running", "stopping", "succeeded", "failed",
                         "stopped", "preempted", "lost"}) {
    std::string v = std::string(st) == "running" ? "1" : std::string(st) == "queued" ? "3" : "0";
    EXPECT_THAT(t, HasSubstr("lathe_runs{state=\"" + std::string(st) + "\"} " + v + "\n")) << st;
  }
  EXPECT_THAT(t, HasSubstr("lathe_queue_length{priority=\"high\"} 3\n"));
  EXPECT_THAT(t, HasSubstr("lathe_queue_length{priority=\"normal\"} 0\n"));
  EXPECT_THAT(t, HasSubstr("lathe_queue_length{priority=\"low\"} 0\n"));
  // With no runs and no GPUs at all, still every state and priority.
  MetricsSnapshot empty;
  std::string e = MetricsText(empty);
  EXPECT_THAT(e, HasSubstr("lathe_runs{state=\"lost\"} 0\n"));
  EXPECT_THAT(e, HasSubstr("lathe_queue_length{priority=\"low\"} 0\n"));
  EXPECT_THAT(e, HasSubstr("lathe_scheduling_latency_seconds_count 0\n"));
}

TEST(MetricsTextTest, HistogramBucketsAreCumulativeAndEndAtTheCount) {
  std::string t = MetricsText(Fake());
  std::istringstream in(t);
  std::vector<std::pair<std::string, uint64_t>> buckets;
  for (std::string line; std::getline(in, line);) {
    const std::string p = "lathe_scheduling_latency_seconds_bucket{le=\"";
    if (line.rfind(p, 0) != 0) continue;
    auto close = line.find('"', p.size());
    buckets.emplace_back(line.substr(p.size(), close - p.size()),
                         std::stoull(line.substr(line.rfind(' ') + 1)));
  }
  ASSERT_EQ(buckets.size(), 3u);
  EXPECT_EQ(buckets[0], (std::pair<std::string, uint64_t>{"0.5", 2}));
  EXPECT_EQ(buckets[1], (std::pair<std::string, uint64_t>{"5", 3}));
  EXPECT_EQ(buckets[2], (std::pair<std::string, uint64_t>{"+Inf", 4}));
  for (size_t i = 1; i < buckets.size(); ++i) EXPECT_GE(buckets[i].second, buckets[i - 1].second);
  EXPECT_THAT(t, HasSubstr("lathe_scheduling_latency_seconds_sum 72.5\n"));
  EXPECT_THAT(t, HasSubstr("lathe_scheduling_latency_seconds_count 4\n"));
}

TEST(MetricsTextTest, EverySampleBelongsToADeclaredFamily) {
  std::string t = MetricsText(Fake());
  std::istringstream in(t);
  std::set<std::string> typed;
  for (std::string line; std::getline(in, line);) {
    ASSERT_FALSE(line.empty());
    if (line.rfind("# TYPE ", 0) == 0) {
      typed.insert(line.substr(7, line.find(' ', 7) - 7));
      continue;
    }
    if (line[0] == '#') continue;
    std::string name = line.substr(0, line.find_first_of("{ "));
    for (const char* suffix : {"_bucket", "_sum", "_count"}) {
      if (name.ends_with(suffix) && !typed.count(name)) {
        name = name.substr(0, name.size() - std::string(suffix).size());
      }
    }
    EXPECT_TRUE(typed.count(name)) << line;
    EXPECT_EQ(line.find('\n'), std::string::npos);
  }
}

}  // namespace
}  // namespace lathe::daemon

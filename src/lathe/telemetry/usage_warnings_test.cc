#include "lathe/telemetry/usage_warnings.h"

#include <gtest/gtest.h>

#include "lathe/os/test_util/fake_clock.h"

namespace lathe::telemetry {
namespace {

constexpr int64_t kInterval = 5000;

TEST(UsageWarnings, IdleForTenMinutesWarnsOnce) {
  os::FakeClock clock;
  UsageWarnings w;
  bool idle = false, throttled = false;
  RunObservation o;
  o.gpus_held = 2;
  int warned_at = -1;
  for (int i = 0; i < 300; ++i, clock.Advance(kInterval)) {
    o.t_ms = clock.NowMs();
    // Busy for the first minute, then at 4 %: idle from sample 12 on.
    o.max_utilization_pct = i < 12 ? 60 : 4;
    auto said = w.Observe("r", o, idle, throttled);
    for (const auto& s : said) {
      EXPECT_EQ(s.kind, UsageWarning::Kind::kIdle);
      EXPECT_EQ(s.msg_id, "telemetry.idle_gpus");
      EXPECT_EQ(s.args.at("gpus"), "2");
      EXPECT_EQ(s.args.at("pct"), "5");
      EXPECT_EQ(warned_at, -1) << "warned twice";
      warned_at = i;
    }
  }
  EXPECT_EQ(warned_at, 12 + 600'000 / kInterval);  // 10 minutes after the stretch began
  EXPECT_TRUE(idle);
  EXPECT_FALSE(throttled);
}

TEST(UsageWarnings, BusyOrUnknownSamplesEndTheIdleStretch) {
  os::FakeClock clock;
  UsageWarnings w;
  bool idle = false, throttled = false;
  RunObservation o;
  o.gpus_held = 1;
  for (int i = 0; i < 400; ++i, clock.Advance(kInterval)) {
    o.t_ms = clock.NowMs();
    // 9½ minutes idle, then one busy sample; then 9½ idle and one unknown.
    const bool breaker = i % 115 == 114;  // after 114 idle samples: 9 min 25 s
    if (!breaker) {
      o.max_utilization_pct = 0;
    } else if (i < 115) {
      o.max_utilization_pct = 50;
    } else {
      o.max_utilization_pct.reset();
    }
    EXPECT_TRUE(w.Observe("r", o, idle, throttled).empty()) << "sample " << i;
  }
  // A run holding no GPU is never "allocated but idle".
  UsageWarnings none;
  RunObservation cpu_only;
  cpu_only.gpus_held = 0;
  cpu_only.max_utilization_pct = 0;
  for (int i = 0; i < 200; ++i) {
    cpu_only.t_ms = i * kInterval;
    EXPECT_TRUE(none.Observe("c", cpu_only, idle, throttled).empty());
  }
}

TEST(UsageWarnings, ThrottledShareAfterFiveMinutes) {
  os::FakeClock clock;
  UsageWarnings w;
  bool idle = false, throttled = false;
  RunObservation o;
  o.gpus_held = 1;
  o.max_utilization_pct = 95;
  std::vector<UsageWarning> all;
  for (int i = 0; i < 120; ++i, clock.Advance(kInterval)) {
    o.t_ms = clock.NowMs();
    o.observed_ms += kInterval;
    if (i % 4 == 0) {  // 25 % of the time: hw_slowdown, half of that also sw_thermal
      o.throttled_ms += kInterval;
      o.reason_ms["hw_slowdown"] += kInterval;
      if (i % 8 == 0) o.reason_ms["sw_thermal"] += kInterval;
    }
    auto said = w.Observe("r", o, idle, throttled);
    if (!said.empty()) {
      // Not before 5 minutes were observed.
      EXPECT_GE(o.observed_ms, 300'000);
      EXPECT_LT(o.observed_ms - kInterval, 300'000);
    }
    all.insert(all.end(), said.begin(), said.end());
  }
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].kind, UsageWarning::Kind::kThrottled);
  EXPECT_EQ(all[0].args.at("reasons"), "hw_slowdown, sw_thermal");  // the longest first
  EXPECT_EQ(all[0].args.at("share"), "25");
  EXPECT_TRUE(throttled);
}

TEST(UsageWarnings, UnderTheShareOrAlreadyToldSaysNothing) {
  UsageWarnings w;
  bool idle = false, throttled = false;
  RunObservation o;
  o.gpus_held = 1;
  o.max_utilization_pct = 90;
  o.observed_ms = 3'600'000;
  o.throttled_ms = 3'600'000 * 19 / 100;  // 19 %
  o.reason_ms["sw_power_cap"] = o.throttled_ms;
  EXPECT_TRUE(w.Observe("r", o, idle, throttled).empty());
  o.throttled_ms = 3'600'000 / 2;
  throttled = true;  // told before a restart
  EXPECT_TRUE(w.Observe("r", o, idle, throttled).empty());
}

}  // namespace
}  // namespace lathe::telemetry

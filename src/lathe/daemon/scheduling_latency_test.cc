#include "lathe/daemon/scheduling_latency.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace lathe::daemon {
namespace {

TEST(SchedulingLatencyTest, EachWaitLandsInTheFirstBucketThatHoldsIt) {
  SchedulingLatency h({1, 10});
  h.Observe(500);     // 0.5 s
  h.Observe(1000);    // 1 s: le="1" holds it (upper bounds are inclusive)
  h.Observe(1001);    // just above
  h.Observe(60'000);  // above every bound: only in the count
  h.Observe(-5);      // a clock that went back: 0
  SchedulingLatency::Snapshot s = h.Get();
  EXPECT_EQ(s.bounds_s, (std::vector<double>{1, 10}));
  EXPECT_EQ(s.counts, (std::vector<uint64_t>{3, 1}));
  EXPECT_EQ(s.count, 5u);
  EXPECT_DOUBLE_EQ(s.sum_s, 0.5 + 1 + 1.001 + 60);
}

TEST(SchedulingLatencyTest, DefaultBoundsAscendFromATenthOfASecondToADay) {
  std::vector<double> b = SchedulingLatency::DefaultBoundsSeconds();
  ASSERT_FALSE(b.empty());
  EXPECT_DOUBLE_EQ(b.front(), 0.1);
  EXPECT_DOUBLE_EQ(b.back(), 86400);
  EXPECT_TRUE(std::is_sorted(b.begin(), b.end()));
  EXPECT_EQ(std::adjacent_find(b.begin(), b.end()), b.end());  // strictly
  SchedulingLatency h;
  EXPECT_EQ(h.Get().counts, std::vector<uint64_t>(b.size(), 0));
  EXPECT_EQ(h.Get().count, 0u);
}

}  // namespace
}  // namespace lathe::daemon

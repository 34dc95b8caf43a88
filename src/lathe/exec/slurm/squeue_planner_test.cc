#include "lathe/exec/slurm/squeue_planner.h"

#include <gtest/gtest.h>

#include <vector>

#include "lathe/os/test_util/fake_clock.h"

namespace lathe::exec {
namespace {

// Steps the clock by 100 ms for `ms`, asking whenever the planner says so;
// returns the times (since start) it asked.
std::vector<int64_t> AskWhenDue(SqueuePlanner& p, os::FakeClock& clock, int64_t ms,
                                bool changed = false) {
  const int64_t start = clock.MonotonicMs();
  std::vector<int64_t> asked;
  for (int64_t t = 0; t < ms; t += 100) {
    if (p.Due(clock.MonotonicMs())) {
      asked.push_back(clock.MonotonicMs() - start);
      p.Asked(clock.MonotonicMs(), changed);
    }
    clock.Advance(100);
  }
  return asked;
}

TEST(SqueuePlanner, DueAtOnceThenDoublingFromTwoSecondsToAMinute) {
  os::FakeClock clock;
  SqueuePlanner p;
  EXPECT_TRUE(p.Due(clock.MonotonicMs()));
  EXPECT_EQ(AskWhenDue(p, clock, 250'000),
            (std::vector<int64_t>{0, 2000, 6000, 14000, 30000, 62000, 122000, 182000, 242000}));
}

TEST(SqueuePlanner, AChangeSeenBringsTheWaitBackToTwoSeconds) {
  os::FakeClock clock;
  SqueuePlanner p;
  AskWhenDue(p, clock, 70'000);  // the waits have grown to a minute
  ASSERT_FALSE(p.Due(clock.MonotonicMs()));
  clock.Advance(p.next_ms() - clock.MonotonicMs());
  p.Asked(clock.MonotonicMs(), /*changed=*/true);
  EXPECT_EQ(p.next_ms(), clock.MonotonicMs() + 2000);
  clock.Advance(2000);
  p.Asked(clock.MonotonicMs(), false);
  EXPECT_EQ(p.next_ms(), clock.MonotonicMs() + 4000);
}

TEST(SqueuePlanner, ResetMakesItDueAtOnceAndStartsTheWaitsOver) {
  os::FakeClock clock;
  SqueuePlanner p;
  AskWhenDue(p, clock, 100'000);
  EXPECT_FALSE(p.Due(clock.MonotonicMs()));
  p.Reset();  // a Launch or a Signal
  EXPECT_TRUE(p.Due(clock.MonotonicMs()));
  EXPECT_EQ(AskWhenDue(p, clock, 7'000), (std::vector<int64_t>{0, 2000, 6000}));
}

TEST(SqueuePlanner, WhileThingsKeepChangingItAsksEveryMinimumInterval) {
  os::FakeClock clock;
  SqueuePlanner p;
  EXPECT_EQ(AskWhenDue(p, clock, 9'000, /*changed=*/true),
            (std::vector<int64_t>{0, 2000, 4000, 6000, 8000}));
}

TEST(SqueuePlanner, OtherBoundsAreHonoured) {
  os::FakeClock clock;
  SqueuePlanner p({500, 3000});
  EXPECT_EQ(AskWhenDue(p, clock, 12'000), (std::vector<int64_t>{0, 500, 1500, 3500, 6500, 9500}));
}

}  // namespace
}  // namespace lathe::exec

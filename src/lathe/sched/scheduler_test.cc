#include "lathe/sched/scheduler.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "lathe/sched/test_util/builders.h"

namespace lathe::sched {
namespace {

using namespace lathe::sched::testing;  // NOLINT
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::UnorderedElementsAre;

constexpr int64_t kNow = 1'000'000;

// ---------------------------------------------------------------- placement

TEST(Schedule, FourSingleGpuJobsGetDisjointGpusAndTheFifthWaits) {
  std::vector<QueuedJob> q;
  for (int i = 0; i < 5; ++i) q.push_back(Q(fmt::format("j{}", i), i, 1));
  Decision d = Schedule(Node(4), q, {}, kNow);
  EXPECT_THAT(Started(d), ElementsAre("j0", "j1", "j2", "j3"));
  EXPECT_EQ(*GpusOf(d, "j0"), std::vector<int>{0});
  EXPECT_EQ(*GpusOf(d, "j1"), std::vector<int>{1});
  EXPECT_EQ(*GpusOf(d, "j2"), std::vector<int>{2});
  EXPECT_EQ(*GpusOf(d, "j3"), std::vector<int>{3});
  EXPECT_EQ(WaitOf(d, "j4"), WaitReason::kReserved);
  ASSERT_TRUE(d.reservation);
  EXPECT_EQ(d.reservation->id, "j4");
  EXPECT_FALSE(d.reservation->shadow_ms);  // started jobs have no max_duration
  EXPECT_THAT(d.preempt, IsEmpty());
  EXPECT_THAT(WhyWaiting(d, "j4"), HasSubstr("needs 1 GPU, 0 free"));
}

TEST(Schedule, EmptyQueueDecidesNothing) {
  Decision d = Schedule(Node(4), {}, {R("r", {0})}, kNow);
  EXPECT_EQ(Dump(d), "");
}

TEST(Schedule, RunningJobsGpusAreNeverReassigned) {
  Decision d = Schedule(Node(4), {Q("a", 1, 1), Q("b", 2, 1), Q("c", 3, 1)},
                        {R("r1", {0}), R("r2", {2})}, kNow);
  EXPECT_EQ(*GpusOf(d, "a"), std::vector<int>{1});
  EXPECT_EQ(*GpusOf(d, "b"), std::vector<int>{3});
  EXPECT_EQ(WaitOf(d, "c"), WaitReason::kReserved);
}

TEST(Schedule, UnavailableGpusAreNeverAssigned) {
  Decision d = Schedule(Node(4, 64, 512 * kGiB, {1, 2}), {Q("a", 1, 1), Q("b", 2, 1), Q("c", 3, 1)},
                        {}, kNow);
  EXPECT_EQ(*GpusOf(d, "a"), std::vector<int>{0});
  EXPECT_EQ(*GpusOf(d, "b"), std::vector<int>{3});
  EXPECT_EQ(WaitOf(d, "c"), WaitReason::kReserved);
}

TEST(Schedule, UnavailableGpuHeldByRunningJobIsNotFreedToOthers) {
  // r still runs on GPU 1, which became unavailable; stopping it frees nothing usable.
  Decision d = Schedule(Node(2, 64, 512 * kGiB, {1}), {Q("a", 1, 1, kPriorityHigh), Q("b", 2, 1)},
                        {R("r0", {0}, kPriorityHigh), Stopping(R("r1", {1}, kPriorityLow))}, kNow);
  EXPECT_THAT(Started(d), IsEmpty());
  EXPECT_EQ(WaitOf(d, "a"), WaitReason::kReserved);
}

TEST(Schedule, MultiGpuJobsGetContiguousBestFitIndices) {
  // Free: 0, 2-3, 5-7.
  Decision d = Schedule(Node(8), {Q("two", 1, 2), Q("three", 2, 3), Q("one", 3, 1)},
                        {R("r1", {1}), R("r4", {4})}, kNow);
  EXPECT_EQ(*GpusOf(d, "two"), (std::vector<int>{2, 3}));
  EXPECT_EQ(*GpusOf(d, "three"), (std::vector<int>{5, 6, 7}));
  EXPECT_EQ(*GpusOf(d, "one"), std::vector<int>{0});
}

TEST(Schedule, FragmentedGpusStillPlaceAJob) {
  Decision d = Schedule(Node(5), {Q("two", 1, 2)}, {R("r1", {1}), R("r3", {3})}, kNow);
  EXPECT_EQ(*GpusOf(d, "two"), (std::vector<int>{0, 2}));
}

TEST(Schedule, ZeroResourceJobAlwaysStarts) {
  Decision d =
      Schedule(Node(1, 1, kGiB), {Q("big", 1, 1), Q("nothing", 2, 0)}, {R("r", {0})}, kNow);
  EXPECT_THAT(Started(d), ElementsAre("nothing"));
  EXPECT_TRUE(GpusOf(d, "nothing")->empty());
}

// ---------------------------------------------------------------- order

TEST(Schedule, FifoWithinAPriority) {
  Decision d = Schedule(Node(1), {Q("late", 2, 1), Q("early", 1, 1)}, {}, kNow);
  EXPECT_THAT(Started(d), ElementsAre("early"));
  EXPECT_EQ(WaitOf(d, "late"), WaitReason::kReserved);
}

TEST(Schedule, HigherPriorityStartsFirstEvenIfSubmittedLater) {
  Decision d = Schedule(
      Node(1), {Q("normal", 1, 1), Q("low", 0, 1, kPriorityLow), Q("high", 9, 1, kPriorityHigh)},
      {}, kNow);
  EXPECT_THAT(Started(d), ElementsAre("high"));
  EXPECT_EQ(WaitOf(d, "normal"), WaitReason::kReserved);
  EXPECT_EQ(WaitOf(d, "low"), WaitReason::kResources);
}

TEST(Schedule, AnyIntIsAPriority) {
  Decision d =
      Schedule(Node(1), {Q("minus", 1, 1, -5), Q("ten", 3, 1, 10), Q("three", 2, 1, 3)}, {}, kNow);
  EXPECT_THAT(Started(d), ElementsAre("ten"));
  EXPECT_EQ(d.reservation->id, "three");
}

TEST(Schedule, HigherPriorityNeverWaitsForALowerReservation) {
  // The low job is older, does not fit, and would be head if order were FIFO.
  Decision d = Schedule(Node(4), {Q("low", 1, 2, kPriorityLow), Q("high", 2, 1, kPriorityHigh)},
                        {Pinned(R("r", {0, 1, 2}, kPriorityNormal))}, kNow);
  EXPECT_THAT(Started(d), ElementsAre("high"));
  EXPECT_EQ(d.reservation->id, "low");
}

TEST(Schedule, EqualPriorityJobsTieBreakOnSeqThenId) {
  Decision d = Schedule(Node(1), {Q("b", 1, 1), Q("a", 1, 1)}, {}, kNow);
  EXPECT_THAT(Started(d), ElementsAre("a"));
}

// ---------------------------------------------------------------- backfill

// Node of 4 GPUs, 3 busy until +10m, +10m and +20m; GPU 3 free. The head needs 3.
std::vector<RunningJob> BusyWithDeadlines() {
  return {R("r1", {0}, kPriorityNormal, 0, kNow + 10 * kMinute),
          R("r2", {1}, kPriorityNormal, 0, kNow + 10 * kMinute),
          R("r3", {2}, kPriorityNormal, 0, kNow + 20 * kMinute)};
}

TEST(Backfill, AllowedWhenTheSmallJobEndsBeforeTheShadowTime) {
  Decision d = Schedule(Node(4), {Q("head", 1, 3), Q("small", 2, 1, kPriorityNormal, 5 * kMinute)},
                        BusyWithDeadlines(), kNow);
  EXPECT_THAT(Started(d), ElementsAre("small"));
  EXPECT_EQ(*GpusOf(d, "small"), std::vector<int>{3});
  ASSERT_TRUE(d.reservation);
  EXPECT_EQ(d.reservation->shadow_ms, kNow + 10 * kMinute);
  EXPECT_EQ(d.reservation->extra.gpus, 0);
  EXPECT_THAT(d.reservation->waiting_on, ElementsAre("r1", "r2"));
}

TEST(Backfill, AllowedWhenEndingExactlyAtTheShadowTime) {
  Decision d = Schedule(Node(4), {Q("head", 1, 3), Q("small", 2, 1, kPriorityNormal, 10 * kMinute)},
                        BusyWithDeadlines(), kNow);
  EXPECT_THAT(Started(d), ElementsAre("small"));
}

TEST(Backfill, RefusedWhenTheSmallJobWouldOutliveTheShadowTime) {
  Decision d = Schedule(Node(4), {Q("head", 1, 3), Q("small", 2, 1, kPriorityNormal, 15 * kMinute)},
                        BusyWithDeadlines(), kNow);
  EXPECT_THAT(Started(d), IsEmpty());
  EXPECT_EQ(WaitOf(d, "small"), WaitReason::kReservation);
  EXPECT_THAT(WhyWaiting(d, "small"), HasSubstr("behind the reservation for head"));
}

TEST(Backfill, RefusedWithoutMaxDurationWhenThereIsNoExtra) {
  Decision d = Schedule(Node(4), {Q("head", 1, 3), Q("small", 2, 1)}, BusyWithDeadlines(), kNow);
  EXPECT_THAT(Started(d), IsEmpty());
  EXPECT_EQ(WaitOf(d, "small"), WaitReason::kReservation);
}

TEST(Backfill, UsesExtraGpusAtAKnownShadowTime) {
  // Head needs 2: at +10m, 3 GPUs are free, so 1 is extra: an endless 1-GPU job may take it.
  Decision d = Schedule(Node(4), {Q("head", 1, 2), Q("small", 2, 1), Q("small2", 3, 1)},
                        {R("r1", {0}, kPriorityNormal, 0, kNow + 10 * kMinute),
                         R("r2", {1}, kPriorityNormal, 0, kNow + 10 * kMinute), R("r3", {2})},
                        kNow);
  EXPECT_THAT(Started(d), ElementsAre("small"));
  EXPECT_EQ(d.reservation->shadow_ms, kNow + 10 * kMinute);
  EXPECT_EQ(d.reservation->extra.gpus, 0);  // used up by "small"
  EXPECT_EQ(WaitOf(d, "small2"), WaitReason::kResources);
}

TEST(Backfill, UnknownShadowHeadHasFirstClaimOnTheFreeGpu) {
  // Head needs 2 of 4 GPUs, 1 free, 3 busy with no deadline.
  NodeState node = Node(4, 16, 64 * kGiB);
  std::vector<RunningJob> running = {R("r1", {0}), R("r2", {1}), R("r3", {2})};
  std::vector<QueuedJob> q = {
      WithCpuMem(Q("head", 1, 2), 4, 8 * kGiB),
      Q("gpu1", 2, 1, kPriorityNormal, 1 * kMinute),  // max_duration does not help
      WithCpuMem(Q("cpu-fits", 3, 0), 4, 8 * kGiB), WithCpuMem(Q("cpu-too-big", 4, 0), 10, 0),
      WithCpuMem(Q("mem-fits", 5, 0), 0, 48 * kGiB)};
  Decision d = Schedule(node, q, running, kNow);
  EXPECT_THAT(Started(d), ElementsAre("cpu-fits", "mem-fits"));
  EXPECT_EQ(WaitOf(d, "gpu1"), WaitReason::kReservation);
  EXPECT_EQ(WaitOf(d, "cpu-too-big"), WaitReason::kReservation);  // 12 free, 8 left over
  ASSERT_TRUE(d.reservation);
  EXPECT_FALSE(d.reservation->shadow_ms);
  EXPECT_EQ(d.reservation->extra.gpus, 0);
  EXPECT_DOUBLE_EQ(d.reservation->extra.cpus, 8);
  EXPECT_EQ(d.reservation->extra.memory_bytes, 0u);
  EXPECT_THAT(d.reservation->waiting_on, ElementsAre("r1", "r2", "r3"));
  EXPECT_THAT(WhyWaiting(d, "head"), HasSubstr("needs 2 GPUs, 1 free"));
}

TEST(Backfill, OverdueDeadlineMeansTheShadowTimeIsNow) {
  Decision d = Schedule(Node(1), {Q("head", 1, 1), Q("cpu", 2, 0, kPriorityNormal, 1)},
                        {R("r", {0}, kPriorityNormal, 0, kNow - 5)}, kNow);
  EXPECT_EQ(d.reservation->shadow_ms, kNow);
  EXPECT_THAT(Started(d), ElementsAre("cpu"));  // uses no GPU: extra
}

TEST(Backfill, JobsStartedThisRoundCountTowardsTheShadowTime) {
  // "a" starts now on GPU 0 for 30m; the head then needs both GPUs: S = now + 30m.
  Decision d = Schedule(Node(2),
                        {Q("a", 1, 1, kPriorityNormal, 30 * kMinute), Q("head", 2, 2),
                         Q("b", 3, 1, kPriorityNormal, 20 * kMinute)},
                        {}, kNow);
  EXPECT_THAT(Started(d), ElementsAre("a", "b"));
  EXPECT_EQ(d.reservation->shadow_ms, kNow + 30 * kMinute);
}

TEST(Backfill, OnlyTheHeadGetsAReservation) {
  // "second" is behind the head and does not fit; it gets none, so "small" may take GPU 3
  // although that delays "second" (EASY, not conservative backfilling).
  Decision d = Schedule(
      Node(4), {Q("head", 1, 4), Q("second", 2, 2), Q("small", 3, 1, kPriorityNormal, kMinute)},
      {R("r1", {0}, kPriorityNormal, 0, kNow + 10 * kMinute),
       R("r2", {1}, kPriorityNormal, 0, kNow + 10 * kMinute),
       R("r3", {2}, kPriorityNormal, 0, kNow + 10 * kMinute)},
      kNow);
  EXPECT_THAT(Started(d), ElementsAre("small"));
  EXPECT_EQ(WaitOf(d, "second"), WaitReason::kResources);
  EXPECT_EQ(d.reservation->id, "head");
}

// Finishes the oldest running job each round and submits 2 more 1-GPU jobs.
// Returns the round in which "big" started, or -1.
int RoundsUntilBigStarts(std::optional<int64_t> small_duration, int rounds) {
  Sim sim(Node(4));
  for (int g = 0; g < 4; ++g) sim.AddRunning(R(fmt::format("init{}", g), {g}, kPriorityNormal, g));
  sim.Submit(Q("big", 0, 4));
  int n = 0;
  for (int round = 1; round <= rounds; ++round) {
    if (!sim.running().empty()) {
      auto oldest = std::min_element(sim.running().begin(), sim.running().end(),
                                     [](auto& a, auto& b) { return a.started_ms < b.started_ms; });
      sim.Finish(oldest->id);
    }
    for (int k = 0; k < 2; ++k)
      sim.Submit(Q(fmt::format("small{}", n++), 0, 1, kPriorityNormal, small_duration));
    Decision d = sim.Step(round * kMinute);
    if (GpusOf(d, "big")) return round;
  }
  return -1;
}

TEST(Backfill, BigJobIsNotStarvedByAStreamOfSmallJobs) {
  EXPECT_EQ(RoundsUntilBigStarts(std::nullopt, 50), 4);
  EXPECT_EQ(RoundsUntilBigStarts(5 * kMinute, 50), 4);
}

TEST(Backfill, SmallJobsFillTheGapsWhileTheBigJobWaitsForKnownDeadlines) {
  Sim sim(Node(4));
  for (int g = 0; g < 4; ++g) {
    sim.AddRunning(R(fmt::format("init{}", g), {g}, kPriorityNormal, 0, (2 * g + 2) * kMinute));
  }
  sim.Submit(Q("big", 0, 4));
  int started_small_before_big = 0, n = 0;
  int64_t big_at = -1;
  for (int64_t t = kMinute; t <= 30 * kMinute && big_at < 0; t += kMinute) {
    std::vector<std::string> done;
    for (const RunningJob& r : sim.running()) {
      if (r.deadline_ms && *r.deadline_ms <= t) done.push_back(r.id);
    }
    for (const std::string& id : done) sim.Finish(id);
    for (int k = 0; k < 2; ++k)
      sim.Submit(Q(fmt::format("s{}", n++), 0, 1, kPriorityNormal, 3 * kMinute));
    Decision d = sim.Step(t);
    if (GpusOf(d, "big"))
      big_at = t;
    else
      started_small_before_big += static_cast<int>(d.start.size());
  }
  EXPECT_EQ(big_at, 8 * kMinute);  // when the last initial job ends
  EXPECT_GT(started_small_before_big, 0);
}

// ---------------------------------------------------------------- preemption

TEST(Preemption, HighJobPreemptsTheYoungestLowJob) {
  Decision d =
      Schedule(Node(2), {Q("high", 1, 1, kPriorityHigh)},
               {R("old", {0}, kPriorityLow, 100), R("young", {1}, kPriorityLow, 200)}, kNow);
  EXPECT_THAT(d.preempt, ElementsAre("young"));
  EXPECT_THAT(Started(d), IsEmpty());
  EXPECT_EQ(WaitOf(d, "high"), WaitReason::kPreempting);
  EXPECT_EQ(WhyWaiting(d, "high"), "preempting young");
  EXPECT_FALSE(d.reservation);
}

TEST(Preemption, NeverANormalJobWhenALowOneSuffices) {
  Decision d =
      Schedule(Node(2), {Q("high", 1, 1, kPriorityHigh)},
               {R("low", {0}, kPriorityLow, 100), R("normal", {1}, kPriorityNormal, 200)}, kNow);
  EXPECT_THAT(d.preempt, ElementsAre("low"));
}

TEST(Preemption, NormalJobsAreTakenWhenLowOnesDoNotSuffice) {
  Decision d = Schedule(Node(3), {Q("high", 1, 2, kPriorityHigh)},
                        {R("low", {0}, kPriorityLow, 100), R("n-old", {1}, kPriorityNormal, 50),
                         R("n-young", {2}, kPriorityNormal, 60)},
                        kNow);
  EXPECT_THAT(d.preempt, ElementsAre("low", "n-young"));
}

TEST(Preemption, NeverAJobOfEqualPriority) {
  Decision d = Schedule(Node(2), {Q("high", 1, 1, kPriorityHigh)},
                        {R("h1", {0}, kPriorityHigh, 100), R("h2", {1}, kPriorityHigh, 200)}, kNow);
  EXPECT_THAT(d.preempt, IsEmpty());
  EXPECT_EQ(WaitOf(d, "high"), WaitReason::kReserved);
}

TEST(Preemption, NeverAHigherPriorityJob) {
  Decision d =
      Schedule(Node(1), {Q("low", 1, 1, kPriorityLow)}, {R("n", {0}, kPriorityNormal, 100)}, kNow);
  EXPECT_THAT(d.preempt, IsEmpty());
}

TEST(Preemption, NeverANonPreemptibleJob) {
  Decision d = Schedule(
      Node(2), {Q("high", 1, 1, kPriorityHigh)},
      {R("old", {0}, kPriorityLow, 100), Pinned(R("pinned", {1}, kPriorityLow, 200))}, kNow);
  EXPECT_THAT(d.preempt, ElementsAre("old"));
  d = Schedule(Node(1), {Q("high", 1, 1, kPriorityHigh)}, {Pinned(R("pinned", {0}, kPriorityLow))},
               kNow);
  EXPECT_THAT(d.preempt, IsEmpty());
  EXPECT_EQ(WaitOf(d, "high"), WaitReason::kReserved);
}

TEST(Preemption, ChoosesAMinimalSet) {
  // Greedy takes "young" (1 GPU) then "wide" (3 GPUs); "young" is then not needed.
  Decision d =
      Schedule(Node(4), {Q("high", 1, 3, kPriorityHigh)},
               {R("young", {0}, kPriorityLow, 400), R("wide", {1, 2, 3}, kPriorityLow, 100)}, kNow);
  EXPECT_THAT(d.preempt, ElementsAre("wide"));
}

TEST(Preemption, TakesNoMoreThanNeeded) {
  Decision d = Schedule(Node(4), {Q("high", 1, 2, kPriorityHigh)},
                        {R("a", {0}, kPriorityLow, 100), R("b", {1}, kPriorityLow, 200),
                         R("c", {2}, kPriorityLow, 300), R("d", {3}, kPriorityLow, 400)},
                        kNow);
  EXPECT_THAT(d.preempt, ElementsAre("d", "c"));
}

TEST(Preemption, UsesFreeResourcesFirst) {
  Decision d = Schedule(Node(3), {Q("high", 1, 2, kPriorityHigh)},
                        {R("a", {0}, kPriorityLow, 100), R("b", {1}, kPriorityLow, 200)}, kNow);
  EXPECT_THAT(d.preempt, ElementsAre("b"));
}

TEST(Preemption, NoneWhenItCannotMakeTheJobFit) {
  Decision d = Schedule(Node(4), {Q("high", 1, 4, kPriorityHigh)},
                        {Pinned(R("pinned", {0, 1}, kPriorityNormal)), R("l1", {2}, kPriorityLow),
                         R("l2", {3}, kPriorityLow)},
                        kNow);
  EXPECT_THAT(d.preempt, IsEmpty());
  EXPECT_EQ(WaitOf(d, "high"), WaitReason::kReserved);
  EXPECT_THAT(d.reservation->waiting_on, ElementsAre("l1", "l2", "pinned"));
}

TEST(Preemption, SkipsVictimsWhoseResourcesDoNotHelp) {
  NodeState node = Node(2, 16);
  Decision d = Schedule(
      node, {Q("high", 1, 1, kPriorityHigh)},
      {R("gpus", {0, 1}, kPriorityLow, 100), WithCpuMem(R("cpu-only", {}, kPriorityLow, 900), 8)},
      kNow);
  EXPECT_THAT(d.preempt, ElementsAre("gpus"));
}

TEST(Preemption, ForCpusAndMemory) {
  NodeState node = Node(0, 16, 32 * kGiB);
  std::vector<RunningJob> running = {WithCpuMem(R("old", {}, kPriorityLow, 100), 8, 16 * kGiB),
                                     WithCpuMem(R("young", {}, kPriorityLow, 200), 8, 16 * kGiB)};
  Decision d = Schedule(node, {WithCpuMem(Q("cpu", 1, 0, kPriorityHigh), 4)}, running, kNow);
  EXPECT_THAT(d.preempt, ElementsAre("young"));
  d = Schedule(node, {WithCpuMem(Q("mem", 1, 0, kPriorityHigh), 0, 20 * kGiB)}, running, kNow);
  EXPECT_THAT(d.preempt, ElementsAre("young", "old"));
}

TEST(Preemption, NoExtraVictimsWhileEarlierOnesAreStopping) {
  std::vector<RunningJob> running = {Stopping(R("stopping", {0}, kPriorityLow, 300)),
                                     R("b", {1}, kPriorityLow, 200),
                                     R("c", {2}, kPriorityLow, 100)};
  Decision d = Schedule(Node(3), {Q("high", 1, 1, kPriorityHigh)}, running, kNow);
  EXPECT_THAT(d.preempt, IsEmpty());
  EXPECT_EQ(WaitOf(d, "high"), WaitReason::kReleasing);
  // Needing 2, the stopping one covers 1: exactly one more victim, the youngest.
  d = Schedule(Node(3), {Q("high", 1, 2, kPriorityHigh)}, running, kNow);
  EXPECT_THAT(d.preempt, ElementsAre("b"));
}

TEST(Preemption, StoppingVictimsResourcesStayReservedForThePreemptor) {
  // Of two victims for "high", "v0" has exited (GPU 0 free), "v1" still stops.
  Decision d =
      Schedule(Node(2), {Q("high", 1, 2, kPriorityHigh), Q("n", 2, 1), Q("l", 3, 1, kPriorityLow)},
               {Stopping(R("v1", {1}, kPriorityLow))}, kNow);
  EXPECT_THAT(Started(d), IsEmpty());
  EXPECT_THAT(d.preempt, IsEmpty());
  EXPECT_EQ(WaitOf(d, "high"), WaitReason::kReleasing);
  EXPECT_EQ(d.reservation->id, "n");
}

TEST(Preemption, ClaimsReleasingResourcesFirstSoFreeOnesStayUsable) {
  Decision d =
      Schedule(Node(3), {Q("two", 1, 2), Q("one", 2, 1)}, {Stopping(R("s", {0, 1}))}, kNow);
  EXPECT_EQ(WaitOf(d, "two"), WaitReason::kReleasing);
  EXPECT_EQ(*GpusOf(d, "one"), std::vector<int>{2});
}

TEST(Preemption, SeveralHighJobsPreemptInOneRound) {
  std::vector<RunningJob> running;
  for (int g = 0; g < 4; ++g)
    running.push_back(R(fmt::format("low{}", g), {g}, kPriorityLow, 100 * g));
  std::vector<QueuedJob> q;
  for (int i = 0; i < 4; ++i) q.push_back(Q(fmt::format("h{}", i), i, 1, kPriorityHigh));
  Decision d = Schedule(Node(4), q, running, kNow);
  EXPECT_THAT(d.preempt, ElementsAre("low3", "low2", "low1", "low0"));
  for (int i = 0; i < 4; ++i) EXPECT_EQ(WaitOf(d, fmt::format("h{}", i)), WaitReason::kPreempting);
}

TEST(Preemption, NormalJobPreemptsLow) {
  Decision d = Schedule(Node(1), {Q("n", 1, 1)}, {R("low", {0}, kPriorityLow)}, kNow);
  EXPECT_THAT(d.preempt, ElementsAre("low"));
}

TEST(Preemption, VictimsGetRequeuedAndThePreemptorStartsNextRound) {
  Sim sim(Node(2));
  sim.AddRunning(R("l0", {0}, kPriorityLow, 1));
  sim.AddRunning(R("l1", {1}, kPriorityLow, 2));
  sim.Submit(Q("high", 0, 2, kPriorityHigh));
  Decision d1 = sim.Step(kNow);
  EXPECT_THAT(d1.preempt, UnorderedElementsAre("l0", "l1"));
  Decision d2 = sim.Step(kNow + 1);  // victims exited and were requeued
  EXPECT_EQ(*GpusOf(d2, "high"), (std::vector<int>{0, 1}));
  EXPECT_THAT(d2.preempt, IsEmpty());
  EXPECT_EQ(d2.reservation->id, "l0");
}

// ---------------------------------------------------------------- impossible / validate

TEST(Impossible, ReportedWithAReasonAndNeverBlockOthers) {
  NodeState node = Node(4, 8, 16 * kGiB, {3});
  std::vector<QueuedJob> q = {Q("g5", 1, 5),
                              Q("g4", 2, 4),
                              WithCpuMem(Q("c16", 3, 0), 16),
                              WithCpuMem(Q("m32", 4, 0), 0, 32 * kGiB),
                              Q("neg", 5, -1),
                              WithCpuMem(Q("nan", 6, 0), std::nan("")),
                              Q("ok", 7, 3)};
  Decision d = Schedule(node, q, {}, kNow);
  EXPECT_THAT(ImpossibleIds(d), ElementsAre("g5", "g4", "c16", "m32", "neg", "nan"));
  EXPECT_EQ(d.impossible[0].reason, "gpus: requested 5, this machine has 4");
  EXPECT_THAT(d.impossible[1].reason, HasSubstr("only 3 usable"));
  EXPECT_EQ(d.impossible[2].reason, "cpus: requested 16, this machine has 8");
  EXPECT_EQ(d.impossible[3].reason, "memory: requested 32GiB, this machine has 16GiB");
  EXPECT_THAT(Started(d), ElementsAre("ok"));
  EXPECT_FALSE(d.reservation);
  EXPECT_EQ(WhyWaiting(d, "g5"), d.impossible[0].reason);
}

TEST(Validate, NamesTheFieldAndTheLimit) {
  NodeState node = Node(4, 32, 256 * kGiB);
  EXPECT_TRUE(Validate(node, {4, 32, 256 * kGiB}).ok());
  EXPECT_TRUE(Validate(node, {}).ok());
  Status st = Validate(node, {5, 0, 0});
  EXPECT_TRUE(st.IsInvalidArgument());
  EXPECT_EQ(st.message(), "gpus: requested 5, this machine has 4");
  EXPECT_EQ(Validate(node, {0, 64, 0}).message(), "cpus: requested 64, this machine has 32");
  EXPECT_EQ(Validate(node, {0, 0, 512 * kGiB}).message(),
            "memory: requested 512GiB, this machine has 256GiB");
  EXPECT_EQ(Validate(node, {5, 64, 0}).message(),
            "gpus: requested 5, this machine has 4; cpus: requested 64, this machine has 32");
  EXPECT_THAT(Validate(node, {-1, 0, 0}).message(), HasSubstr("gpus: must be 0 or more"));
  EXPECT_THAT(Validate(node, {0, -2, 0}).message(), HasSubstr("cpus: must be a number 0 or more"));
  EXPECT_FALSE(Validate(node, {0, std::numeric_limits<double>::infinity(), 0}).ok());
}

TEST(Validate, UnavailableGpusDoNotCount) {
  NodeState node = Node(4, 32, 256 * kGiB, {1, 9});  // 9 is out of range: ignored
  EXPECT_TRUE(Validate(node, {3, 0, 0}).ok());
  EXPECT_EQ(Validate(node, {4, 0, 0}).message(),
            "gpus: requested 4, this machine has 4 but only 3 usable (1 unavailable)");
}

TEST(Validate, NoGpuMachine) {
  EXPECT_EQ(Validate(Node(0), {1, 0, 0}).message(), "gpus: requested 1, this machine has 0");
  EXPECT_TRUE(Validate(Node(0), {0, 1, kGiB}).ok());
}

// ---------------------------------------------------------------- cpus / memory

TEST(Accounting, CpusAndMemoryAreNeverExceeded) {
  NodeState node = Node(0, 4, 8 * kGiB);
  Decision d =
      Schedule(node,
               {WithCpuMem(Q("a", 1, 0), 2, 2 * kGiB), WithCpuMem(Q("b", 2, 0), 0.5, 1 * kGiB),
                WithCpuMem(Q("c", 3, 0), 0.1, 0), WithCpuMem(Q("d", 4, 0), 0, 4 * kGiB)},
               {WithCpuMem(R("r", {}), 1.5, 2 * kGiB)}, kNow);
  EXPECT_THAT(Started(d), ElementsAre("a", "b"));
  EXPECT_EQ(WaitOf(d, "c"), WaitReason::kReserved);
  EXPECT_THAT(WhyWaiting(d, "c"), HasSubstr("needs 0.1 cpus, 0 free"));
  // d needs no cpus, but 4GiB of the 3GiB left.
  EXPECT_EQ(WaitOf(d, "d"), WaitReason::kResources);
}

TEST(Accounting, FractionalCpusAddUp) {
  Decision d = Schedule(Node(0, 0.3),
                        {WithCpuMem(Q("a", 1, 0), 0.1), WithCpuMem(Q("b", 2, 0), 0.2)}, {}, kNow);
  EXPECT_THAT(Started(d), ElementsAre("a", "b"));
}

TEST(Accounting, MemoryIsAccountedLikeCpus) {
  Decision d = Schedule(Node(0, 8, 16 * kGiB),
                        {WithCpuMem(Q("a", 1, 0), 0, 6 * kGiB), WithCpuMem(Q("b", 2, 0), 0, 1)},
                        {WithCpuMem(R("r", {}), 0, 10 * kGiB)}, kNow);
  EXPECT_THAT(Started(d), ElementsAre("a"));
  EXPECT_THAT(WhyWaiting(d, "b"), HasSubstr("needs 1B memory, 0B free"));
}

TEST(Accounting, OvercommittedNodeStartsOnlyWhatNeedsNoCpus) {
  Decision d = Schedule(Node(2, 8), {WithCpuMem(Q("a", 1, 0), 1), Q("gpu", 2, 1)},
                        {WithCpuMem(R("r", {0}), 10)}, kNow);
  EXPECT_THAT(Started(d), ElementsAre("gpu"));
  EXPECT_EQ(d.reservation->id, "a");
}

TEST(Accounting, CpuOnlyJobsDoNotNeedGpus) {
  Decision d = Schedule(Node(0, 4), {WithCpuMem(Q("a", 1, 0), 4)}, {}, kNow);
  EXPECT_THAT(Started(d), ElementsAre("a"));
}

// ---------------------------------------------------------------- determinism

TEST(Schedule, DecisionDoesNotDependOnInputOrder) {
  NodeState node = Node(8, 32, 128 * kGiB, {5});
  std::vector<RunningJob> running = {
      R("r0", {0}, kPriorityLow, 10), R("r1", {1, 2}, kPriorityLow, 20, kNow + kMinute),
      Stopping(R("r3", {3}, kPriorityNormal, 5)),
      WithCpuMem(R("r4", {4}, kPriorityHigh, 7), 8, 8 * kGiB), R("r6", {6}, kPriorityLow, 20)};
  std::vector<QueuedJob> q = {
      Q("a", 1, 2, kPriorityHigh),       Q("b", 2, 3), Q("c", 3, 1, kPriorityLow, kMinute),
      WithCpuMem(Q("d", 4, 0), 4, kGiB), Q("e", 5, 9), Q("f", 1, 1, kPriorityHigh),
      Q("g", 6, 1, kPriorityLow)};
  std::string want = Dump(Schedule(node, q, running, kNow));
  std::mt19937 rng(7);
  for (int i = 0; i < 20; ++i) {
    std::shuffle(q.begin(), q.end(), rng);
    std::shuffle(running.begin(), running.end(), rng);
    EXPECT_EQ(Dump(Schedule(node, q, running, kNow)), want);
  }
}

}  // namespace
}  // namespace lathe::sched

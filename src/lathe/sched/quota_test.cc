// Quotas and fair share in Schedule (scheduler.h) and the usage arithmetic
// they are fed with (usage.h).
#include <gtest/gtest.h>

#include <cmath>

#include "lathe/sched/scheduler.h"
#include "lathe/sched/test_util/builders.h"
#include "lathe/sched/usage.h"

namespace lathe::sched {
namespace {

using namespace lathe::sched::testing;  // NOLINT

constexpr int64_t kNow = 100 * kHourMs;

Account Limited(std::optional<int> gpus, std::optional<int> runs = std::nullopt) {
  Account a;
  a.limits.gpus = gpus;
  a.limits.runs = runs;
  return a;
}

const Waiting* WaitingOf(const Decision& d, const std::string& id) {
  for (const Waiting& w : d.waiting) {
    if (w.id == id) return &w;
  }
  return nullptr;
}

TEST(Usage, GpuHoursCountOnlyTheWindow) {
  AttemptUsage a{"alice", 2, kNow - 10 * kHourMs, kNow - 4 * kHourMs};
  EXPECT_DOUBLE_EQ(GpuHoursIn(a, kNow, 24 * kHourMs), 12.0);  // 6 h × 2 GPUs
  EXPECT_DOUBLE_EQ(GpuHoursIn(a, kNow, 5 * kHourMs), 2.0);    // the last 1 h of it
  EXPECT_DOUBLE_EQ(GpuHoursIn(a, kNow, 4 * kHourMs), 0.0);
  AttemptUsage still{"alice", 4, kNow - 3 * kHourMs, std::nullopt};  // counted up to now
  EXPECT_DOUBLE_EQ(GpuHoursIn(still, kNow, 24 * kHourMs), 12.0);
  AttemptUsage backwards{"alice", 4, kNow - kHourMs, kNow - 2 * kHourMs};
  EXPECT_DOUBLE_EQ(GpuHoursIn(backwards, kNow, 24 * kHourMs), 0.0);
  EXPECT_DOUBLE_EQ(GpuHoursIn(a, kNow, 0), 0.0);
}

TEST(Usage, DecayHalvesEveryHalfLife) {
  const int64_t h = 7 * 24 * kHourMs;
  // One GPU-hour just now counts ~1; the same hour one half-life ago 0.5.
  AttemptUsage now{"a", 1, kNow - kHourMs, kNow};
  AttemptUsage old{"a", 1, kNow - h - kHourMs, kNow - h};
  EXPECT_NEAR(DecayedGpuHours(now, kNow, h), 1.0, 5e-3);  // the hour itself decays a little
  EXPECT_NEAR(DecayedGpuHours(old, kNow, h), 0.5, 5e-3);
  EXPECT_NEAR(DecayedGpuHours(old, kNow, h) / DecayedGpuHours(now, kNow, h), 0.5, 1e-9);
  // More GPUs, more usage; no decay: plain GPU-hours.
  AttemptUsage wide{"a", 8, kNow - kHourMs, kNow};
  EXPECT_NEAR(DecayedGpuHours(wide, kNow, h), 8 * DecayedGpuHours(now, kNow, h), 1e-9);
  EXPECT_DOUBLE_EQ(DecayedGpuHours(wide, kNow, 0), 8.0);
  // The closed form equals the integral (midpoint sum).
  AttemptUsage long_run{"a", 2, kNow - 30 * 24 * kHourMs, kNow - 2 * 24 * kHourMs};
  double sum = 0;
  for (int64_t t = long_run.start_ms; t < *long_run.end_ms; t += kHourMs) {
    sum += 2 * std::exp2(-static_cast<double>(kNow - (t + kHourMs / 2)) / static_cast<double>(h));
  }
  EXPECT_NEAR(DecayedGpuHours(long_run, kNow, h), sum, sum * 1e-4);
}

TEST(Quota, CheckQuotaNamesTheFirstLimitHit) {
  Account a = Limited(4, 3);
  a.gpus_held = 3;
  a.runs_held = 1;
  EXPECT_FALSE(CheckQuota(ByUser(Q("j", 1, 1), "alice"), a));
  auto hit = CheckQuota(ByUser(Q("j", 1, 2), "alice"), a);
  ASSERT_TRUE(hit);
  EXPECT_EQ(hit->kind, QuotaKind::kGpus);
  EXPECT_EQ(hit->held, 3);
  EXPECT_EQ(hit->limit, 4);
  EXPECT_EQ(hit->asked, 2);
  a.runs_held = 3;  // a CPU-only run still counts as a run
  hit = CheckQuota(ByUser(Q("j", 1, 0), "alice"), a);
  ASSERT_TRUE(hit);
  EXPECT_EQ(hit->kind, QuotaKind::kRuns);
  Account nb;
  nb.limits.notebooks = 1;
  nb.notebooks_held = 1;
  EXPECT_FALSE(CheckQuota(ByUser(Q("j", 1, 0), "alice"), nb));  // not a notebook
  ASSERT_TRUE(CheckQuota(ByUser(Q("j", 1, 0), "alice", /*notebook=*/true), nb));
  Account hours;
  hours.limits.gpu_hours = 100;
  hours.limits.period_ms = 7 * 24 * kHourMs;
  hours.gpu_hours_used = 100;
  EXPECT_FALSE(CheckQuota(ByUser(Q("j", 1, 0), "alice"), hours));  // no GPUs: no GPU-hours
  hit = CheckQuota(ByUser(Q("j", 1, 1), "alice"), hours);
  ASSERT_TRUE(hit);
  EXPECT_EQ(hit->kind, QuotaKind::kGpuHours);
  hours.gpu_hours_used = 99.5;  // under the limit: starts, whatever it will use
  EXPECT_FALSE(CheckQuota(ByUser(Q("j", 1, 1), "alice"), hours));
}

TEST(Quota, AJobOverItsQuotaWaitsAndDoesNotBlockOthers) {
  Accounts acc{{"alice", Limited(4)}};
  acc["alice"].gpus_held = 4;
  Decision d = Schedule(Node(8), {ByUser(Q("a1", 1, 1), "alice"), ByUser(Q("b1", 2, 2), "bob")},
                        {R("held", {0, 1, 2, 3})}, kNow, acc);
  EXPECT_EQ(Started(d), std::vector<std::string>{"b1"});
  const Waiting* w = WaitingOf(d, "a1");
  ASSERT_TRUE(w);
  EXPECT_EQ(w->reason, WaitReason::kQuota);
  ASSERT_TRUE(w->quota);
  EXPECT_EQ(w->quota->user, "alice");
  EXPECT_EQ(w->detail, "alice holds 4 of their 4 GPUs; this run needs 1");
  EXPECT_FALSE(d.reservation);  // a job over quota is never the head
}

TEST(Quota, StartsOfOneDecisionCountTowardTheLimit) {
  Accounts acc{{"alice", Limited(3, 2)}};
  Decision d = Schedule(Node(8),
                        {ByUser(Q("a1", 1, 2), "alice"), ByUser(Q("a2", 2, 2), "alice"),
                         ByUser(Q("a3", 3, 1), "alice"), ByUser(Q("a4", 4, 0), "alice")},
                        {}, kNow, acc);
  // a1 (2 GPUs) starts; a2 would hold 4 > 3; a3 fits GPUs (3) and runs (2);
  // a4 would be a third run.
  EXPECT_EQ(Started(d), (std::vector<std::string>{"a1", "a3"}));
  EXPECT_EQ(WaitingOf(d, "a2")->quota->kind, QuotaKind::kGpus);
  EXPECT_EQ(WaitingOf(d, "a4")->quota->kind, QuotaKind::kRuns);
}

TEST(Quota, AJobOverQuotaNeverPreempts) {
  Accounts acc{{"alice", Limited(1)}};
  acc["alice"].gpus_held = 1;
  Decision d = Schedule(Node(2), {ByUser(Q("hi", 1, 1, kPriorityHigh), "alice")},
                        {R("mine", {0}), R("low", {1}, kPriorityLow)}, kNow, acc);
  EXPECT_TRUE(d.preempt.empty());
  EXPECT_EQ(*WaitOf(d, "hi"), WaitReason::kQuota);
}

QueuedJob InProject(QueuedJob j, const std::string& user, const std::string& project) {
  j = ByUser(std::move(j), user);
  j.project = project;
  return j;
}

TEST(ProjectQuota, AProjectsLimitHoldsAllItsMembersRunsTogether) {
  Accounts projects{{"vision", Limited(2, 3)}};
  projects["vision"].gpus_held = 1;  // a run of the project holds one already
  // alice and bob each have room of their own; the project has room for one GPU.
  Decision d = Schedule(
      Node(8),
      {InProject(Q("a1", 1, 1), "alice", "vision"), InProject(Q("b1", 2, 1), "bob", "vision"),
       ByUser(Q("c1", 3, 2), "carol"), InProject(Q("b2", 4, 0), "bob", "vision")},
      {R("held", {0})}, kNow, {}, projects);
  // a1 starts (2 of 2 GPUs); b1 would hold 3; carol's run is no project's; b2
  // asks no GPU and is the project's second run of 3.
  EXPECT_EQ(Started(d), (std::vector<std::string>{"a1", "c1", "b2"}));
  const Waiting* w = WaitingOf(d, "b1");
  ASSERT_TRUE(w && w->quota);
  EXPECT_EQ(w->reason, WaitReason::kQuota);
  EXPECT_EQ(w->quota->project, "vision");
  EXPECT_EQ(w->quota->user, "bob");
  EXPECT_EQ(w->quota->kind, QuotaKind::kGpus);
  EXPECT_EQ(w->detail, "project vision holds 2 of its 2 GPUs; this run needs 1");
  EXPECT_FALSE(d.reservation);  // held by quota: never the head
}

TEST(ProjectQuota, TheUsersLimitIsCheckedFirstAndBothMustAllow) {
  Accounts users{{"alice", Limited(1)}};
  Accounts projects{{"vision", Limited(4)}};
  users["alice"].gpus_held = 1;
  Decision d =
      Schedule(Node(8), {InProject(Q("a1", 1, 1), "alice", "vision")}, {}, kNow, users, projects);
  ASSERT_TRUE(WaitingOf(d, "a1") && WaitingOf(d, "a1")->quota);
  EXPECT_EQ(WaitingOf(d, "a1")->quota->project, "");  // the user's limit, named as before
  // GPU-hours: the project's window, only for runs that ask for GPUs.
  Account hours;
  hours.limits.gpu_hours = 10;
  hours.limits.period_ms = 24 * kHourMs;
  hours.gpu_hours_used = 12.5;
  Decision h = Schedule(
      Node(8),
      {InProject(Q("g", 1, 1), "bob", "vision"), InProject(Q("cpu", 2, 0), "bob", "vision"),
       InProject(Q("o", 3, 1), "bob", "other")},
      {}, kNow, {}, {{"vision", hours}});
  EXPECT_EQ(Started(h), (std::vector<std::string>{"cpu", "o"}));
  EXPECT_EQ(WaitingOf(h, "g")->detail,
            "project vision used 12.5 of its 10 GPU-hours in the last 1d");
  EXPECT_EQ(WaitingOf(h, "g")->quota->period_ms, 24 * kHourMs);
}

TEST(FairShare, TheLighterUserGoesFirstWithinAPriority) {
  Accounts acc;
  acc["alice"].share_usage = 50;  // used the GPUs lately
  acc["bob"].share_usage = 1;
  std::vector<QueuedJob> q;
  for (int i = 0; i < 500; ++i) q.push_back(ByUser(Q("a" + std::to_string(i), i, 1), "alice"));
  q.push_back(ByUser(Q("b0", 1000, 1), "bob"));
  Decision d = Schedule(Node(2), q, {R("x", {0})}, kNow, acc);
  EXPECT_EQ(Started(d), std::vector<std::string>{"b0"});
  // Without usage figures: FIFO, as before.
  Decision fifo = Schedule(Node(2), q, {R("x", {0})}, kNow);
  EXPECT_EQ(Started(fifo), std::vector<std::string>{"a0"});
}

TEST(FairShare, PriorityStillComesFirst) {
  Accounts acc;
  acc["alice"].share_usage = 50;
  Decision d = Schedule(
      Node(1),
      {ByUser(Q("b", 1, 1, kPriorityNormal), "bob"), ByUser(Q("a", 2, 1, kPriorityHigh), "alice")},
      {}, kNow, acc);
  EXPECT_EQ(Started(d), std::vector<std::string>{"a"});
}

TEST(FairShare, SameUsageKeepsSubmitOrder) {
  Accounts acc;
  acc["alice"].share_usage = 3;
  acc["bob"].share_usage = 3;
  Decision d = Schedule(Node(1), {ByUser(Q("b", 2, 1), "bob"), ByUser(Q("a", 1, 1), "alice")}, {},
                        kNow, acc);
  EXPECT_EQ(Started(d), std::vector<std::string>{"a"});
}

TEST(FairShare, NeverPreemptsTheSamePriority) {
  Accounts acc;
  acc["alice"].share_usage = 500;
  Decision d = Schedule(Node(1), {ByUser(Q("b", 1, 1), "bob")}, {R("alice-run", {0})}, kNow, acc);
  EXPECT_TRUE(d.preempt.empty());
  EXPECT_EQ(*WaitOf(d, "b"), WaitReason::kReserved);
}

}  // namespace
}  // namespace lathe::sched

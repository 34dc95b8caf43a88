#include "lathe/deploy/reconcile.h"

#include <gtest/gtest.h>

#include <fstream>
#include <random>
#include <set>
#include <sstream>

#include "lathe/common/i18n.h"
#include "lathe/deploy/test_util/fake_cluster.h"

namespace lathe::deploy {
namespace {

using Phase = ReplicaObs::Phase;
using Traffic = std::map<std::string, int>;

std::string Arg(const Event& e, const std::string& key) {
  for (const MsgArg& a : e.args) {
    if (a.key == key) return a.value;
  }
  return "<none>";
}

// A deployment serving v1 on `replicas` ready replicas, on `gpus` GPUs.
FakeCluster Serving(int replicas, int gpus) {
  FakeCluster c(gpus);
  c.goal.version = "m/1";
  c.goal.min_replicas = c.goal.max_replicas = replicas;
  for (int i = 0; i < replicas; ++i) c.AddReady("m/1");
  c.Tick();
  EXPECT_EQ(c.state.stable_version, "m/1");
  EXPECT_EQ(c.last.health, "healthy") << c.last.reason;
  return c;
}

int Starting(const FakeCluster& c, const std::string& v) {
  return c.Count(v, Phase::kPending) + c.Count(v, Phase::kStarting);
}

// --- rollouts ---

TEST(Rollout, SurgeStartsEveryNewReplicaAtOnceWhenTheSlotsAreFree) {
  FakeCluster c = Serving(2, 4);
  c.goal.version = "m/2";
  const Decision& d = c.Tick();
  ASSERT_EQ(d.start.size(), 1u);
  EXPECT_EQ(d.start[0], (std::pair<std::string, int>{"m/2", 2}));
  EXPECT_TRUE(d.drain.empty());
  EXPECT_EQ(d.traffic, (Traffic{{"m/1", 100}}));
  EXPECT_EQ(d.health, "progressing");
  EXPECT_EQ(c.state.rolling_to, "m/2");
  ASSERT_TRUE(c.Saw("deploy.rollout_started"));
  EXPECT_EQ(Arg(*c.Last("deploy.rollout_started"), "surge"), "2");
  // Readiness wait: while the new replicas start, the old keep all the traffic.
  while (c.Count("m/2", Phase::kReady) == 0) {
    c.Tick();
    EXPECT_EQ(c.Live("m/1"), 2);
    if (c.Count("m/2", Phase::kReady) == 0) {
      EXPECT_EQ(c.last.traffic, (Traffic{{"m/1", 100}}));
    }
    ASSERT_LT(c.ticks, 20);
  }
  // Both became ready in the same step: all traffic moves, the old drain.
  c.Tick();
  EXPECT_EQ(c.last.traffic, (Traffic{{"m/2", 100}}));
  EXPECT_EQ(c.last.drain.size(), 2u);
  EXPECT_EQ(c.state.stable_version, "m/2");
  EXPECT_EQ(c.state.rolling_to, "");
  ASSERT_TRUE(c.Saw("deploy.rolled_out"));
  EXPECT_EQ(Arg(*c.Last("deploy.rolled_out"), "from"), "m/1");
  ASSERT_TRUE(
      c.TickUntil([&] { return c.Live("m/1") + c.Count("m/1", Phase::kDraining) == 0; }, 10));
  EXPECT_EQ(c.Seen("deploy.replica_stopped"), 2);
  EXPECT_EQ(c.last.health, "healthy");
  EXPECT_EQ(c.Starts("m/2"), 2);
}

TEST(Rollout, PartialSurgeShiftsTrafficInProportionAndDrainsAsNewOnesCover) {
  FakeCluster c = Serving(4, 6);  // two free slots for four replicas
  c.goal.version = "m/2";
  c.Tick();
  EXPECT_EQ(c.last.start[0].second, 2);
  ASSERT_TRUE(c.TickUntil([&] { return c.Count("m/2", Phase::kReady) == 2; }, 20));
  c.Tick();
  // 2 new ready of 4 wanted: two old go, traffic splits 2 : 2.
  EXPECT_EQ(c.last.drain.size(), 2u);
  EXPECT_EQ(c.last.traffic, (Traffic{{"m/1", 50}, {"m/2", 50}}));
  ASSERT_TRUE(c.TickUntil([&] { return c.state.stable_version == "m/2"; }, 50));
  EXPECT_EQ(c.Starts("m/2"), 4);
  EXPECT_FALSE(c.lost_last_ready);
  EXPECT_LE(c.max_live_over_limit, 0);
}

TEST(Rollout, WithNoFreeSlotOneOldReplicaIsDrainedBeforeEachNewOne) {
  FakeCluster c = Serving(3, 3);
  c.goal.version = "m/2";
  const Decision& first = c.Tick();
  ASSERT_EQ(first.drain.size(), 1u);  // one old out of traffic first
  ASSERT_EQ(first.start.size(), 1u);
  EXPECT_EQ(first.start[0].second, 1);  // and one new, placed when the old one's GPU frees
  int most_new_starting = 0;
  while (c.state.stable_version != "m/2") {
    c.Tick();
    most_new_starting = std::max(most_new_starting, Starting(c, "m/2"));
    EXPECT_GE(c.Ready(), 1) << "at tick " << c.ticks;
    EXPECT_LE(static_cast<int>(c.last.drain.size()), 1);
    ASSERT_LT(c.ticks, 100);
  }
  EXPECT_EQ(most_new_starting, 1);
  EXPECT_EQ(c.Starts("m/2"), 3);
  EXPECT_FALSE(c.lost_last_ready);
  EXPECT_TRUE(c.Saw("deploy.rolled_out"));
}

TEST(Rollout, OneReplicaAndNoFreeSlotWaitsRatherThanDrainTheLastReadyOne) {
  FakeCluster c = Serving(1, 1);
  c.goal.version = "m/2";
  for (int i = 0; i < 5; ++i) {
    c.Tick();
    EXPECT_TRUE(c.last.drain.empty());
    EXPECT_TRUE(c.last.start.empty());
    EXPECT_EQ(c.last.traffic, (Traffic{{"m/1", 100}}));
  }
  EXPECT_EQ(c.last.health, "progressing");
  EXPECT_EQ(c.last.reason_id, "deploy.health.waiting_slot");
  // A GPU frees up: the new replica starts beside the old one.
  c.SetGpus(2);
  c.Tick();
  ASSERT_EQ(c.last.start.size(), 1u);
  EXPECT_TRUE(c.last.drain.empty());
  ASSERT_TRUE(c.TickUntil([&] { return c.state.stable_version == "m/2"; }, 20));
  EXPECT_FALSE(c.lost_last_ready);
}

TEST(Rollback, ANewReplicaThatEndsBeforeReadyRollsBackAndIsNotRetried) {
  FakeCluster c = Serving(2, 4);
  c.behavior["m/2"].crash_after_ms = 3000;
  c.behavior["m/2"].end_reason = "exit 1";
  c.goal.version = "m/2";
  ASSERT_TRUE(c.TickUntil([&] { return c.Saw("deploy.rolled_back"); }, 20));
  const Event& e = *c.Last("deploy.rolled_back");
  EXPECT_EQ(e.level, "error");
  EXPECT_EQ(Arg(e, "reason"), "exit 1");
  EXPECT_EQ(Arg(e, "stable"), "m/1");
  EXPECT_EQ(c.state.failed_versions, std::vector<std::string>{"m/2"});
  EXPECT_EQ(c.state.stable_version, "m/1");
  EXPECT_EQ(c.state.rolling_to, "");
  EXPECT_EQ(c.last.traffic, (Traffic{{"m/1", 100}}));
  EXPECT_EQ(c.last.health, "degraded");
  EXPECT_NE(c.last.reason.find("m/2"), std::string::npos) << c.last.reason;
  EXPECT_NE(c.last.reason.find("exit 1"), std::string::npos) << c.last.reason;
  // The other new replica goes too; the old version never stopped serving.
  const int started = c.Starts("m/2");
  for (int i = 0; i < 30; ++i) {
    c.Tick();
    EXPECT_EQ(c.Count("m/1", Phase::kReady), 2);
    EXPECT_EQ(c.last.traffic, (Traffic{{"m/1", 100}}));
    EXPECT_EQ(c.last.health, "degraded");
  }
  EXPECT_EQ(c.Starts("m/2"), started);  // not retried
  EXPECT_EQ(c.Live("m/2"), 0);
  EXPECT_EQ(c.Seen("deploy.rolled_back"), 1);
  // A new goal is a new try: m/3 rolls out; asking for m/2 again retries it.
  c.goal.version = "m/3";
  ASSERT_TRUE(c.TickUntil([&] { return c.state.stable_version == "m/3"; }, 30));
  EXPECT_EQ(c.last.health, "healthy");
  c.behavior["m/2"].crash_after_ms = -1;
  c.goal.version = "m/2";
  ASSERT_TRUE(c.TickUntil([&] { return c.state.stable_version == "m/2"; }, 30));
  EXPECT_TRUE(c.state.failed_versions.empty());
}

// One at a time on a full node, the old replicas may all be gone when the
// last new one fails: the new version's ready replica serves on until the old
// version is back, then goes.
TEST(Rollback, AfterTheOldReplicasWereReplacedTheNewReadyOnesServeUntilTheOldAreBack) {
  FakeCluster c = Serving(2, 2);
  c.goal.version = "m/2";
  ASSERT_TRUE(c.TickUntil(
      [&] { return c.Count("m/2", Phase::kReady) == 1 && c.Count("m/2", Phase::kStarting) == 1; },
      30));
  ASSERT_EQ(c.Count("m/1", Phase::kReady), 0);
  for (const ReplicaObs& r : c.replicas) {
    if (r.version == "m/2" && r.phase == Phase::kStarting) {
      c.Crash(r.run, "exit 137");
      break;
    }
  }
  c.Tick();
  EXPECT_TRUE(c.Saw("deploy.rolled_back"));
  EXPECT_EQ(c.last.traffic, (Traffic{{"m/2", 100}}));  // nothing else is ready
  EXPECT_TRUE(c.last.drain.empty());
  ASSERT_EQ(c.last.start.size(), 1u);
  EXPECT_EQ(c.last.start[0].first, "m/1");
  ASSERT_TRUE(c.TickUntil([&] { return c.Count("m/1", Phase::kReady) == 2; }, 30));
  ASSERT_TRUE(
      c.TickUntil([&] { return c.Live("m/2") + c.Count("m/2", Phase::kDraining) == 0; }, 10));
  EXPECT_EQ(c.last.traffic, (Traffic{{"m/1", 100}}));
  EXPECT_EQ(c.last.health, "degraded");
  EXPECT_FALSE(c.lost_last_ready);
  EXPECT_EQ(c.Starts("m/2"), 2);
}

TEST(Rollback, ANewReplicaNotReadyInTimeRollsBackNamingTheTimeout) {
  FakeCluster c = Serving(1, 2);
  c.behavior["m/2"].never_ready = true;
  c.goal.version = "m/2";
  const int64_t started = c.now;
  ASSERT_TRUE(c.TickUntil([&] { return c.Saw("deploy.rolled_back_not_ready"); }, 400, 1000));
  // Not before the timeout (300 s from when it began starting).
  EXPECT_GE(c.now - started, c.goal.ready_timeout_ms);
  EXPECT_LE(c.now - started, c.goal.ready_timeout_ms + 5000);
  EXPECT_EQ(Arg(*c.Last("deploy.rolled_back_not_ready"), "duration"), "5m");
  EXPECT_EQ(c.state.failed_versions, std::vector<std::string>{"m/2"});
  EXPECT_EQ(c.last.traffic, (Traffic{{"m/1", 100}}));
  EXPECT_NE(c.last.reason.find("not ready after 5m"), std::string::npos) << c.last.reason;
  c.Tick();
  EXPECT_EQ(c.Live("m/2"), 0);
  EXPECT_TRUE(c.last.start.empty());
}

TEST(Rollback, AFirstVersionThatNeverStartsIsFailedAndRetriedWithBackoff) {
  FakeCluster c(2);
  c.behavior["m/1"].crash_after_ms = 0;
  c.behavior["m/1"].end_reason = "exit 3";
  c.goal.version = "m/1";
  for (int i = 0; i < 60; ++i) c.Tick();
  EXPECT_EQ(c.last.health, "failed");
  EXPECT_NE(c.last.reason.find("exit 3"), std::string::npos) << c.last.reason;
  EXPECT_TRUE(c.state.failed_versions.empty());  // nothing to roll back to: it keeps trying
  // Backoff 1, 2, 4, 8, 16, 32 s...: far fewer than one start a tick, more than one.
  EXPECT_GE(c.Starts("m/1"), 4);
  EXPECT_LE(c.Starts("m/1"), 9);
  const Event& e = *c.Last("deploy.replica_crashed");
  EXPECT_EQ(Arg(e, "reason"), "exit 3");
  EXPECT_NE(Arg(e, "delay"), "1s");  // it grew
  // Fixed: the next start after the backoff comes up and serves.
  c.behavior["m/1"].crash_after_ms = -1;
  ASSERT_TRUE(c.TickUntil([&] { return c.last.health == "healthy"; }, 120));
  EXPECT_EQ(c.state.stable_version, "m/1");
  EXPECT_TRUE(c.Saw("deploy.serving"));
}

// --- canary ---

TEST(Canary, HoldsAtTheShareUntilPromotedThenFinishes) {
  FakeCluster c = Serving(2, 4);
  c.goal.version = "m/2";
  c.goal.canary_percent = 10;
  c.Tick();
  ASSERT_EQ(c.last.start.size(), 1u);
  EXPECT_EQ(c.last.start[0], (std::pair<std::string, int>{"m/2", 1}));
  EXPECT_TRUE(c.Saw("deploy.canary_started"));
  ASSERT_TRUE(c.TickUntil([&] { return c.Count("m/2", Phase::kReady) == 1; }, 20));
  for (int i = 0; i < 50; ++i) {
    c.Tick();
    EXPECT_EQ(c.last.traffic, (Traffic{{"m/1", 90}, {"m/2", 10}}));
    EXPECT_EQ(c.Count("m/1", Phase::kReady), 2);  // the old replicas stay
    EXPECT_TRUE(c.last.drain.empty());
    EXPECT_TRUE(c.last.start.empty());
  }
  EXPECT_EQ(c.last.health, "progressing");
  EXPECT_EQ(c.last.reason_id, "deploy.health.canary");
  EXPECT_EQ(c.state.stable_version, "m/1");
  c.goal.promoted = true;
  ASSERT_TRUE(c.TickUntil([&] { return c.state.stable_version == "m/2"; }, 30));
  EXPECT_TRUE(c.Saw("deploy.canary_promoted"));
  EXPECT_TRUE(c.Saw("deploy.rolled_out"));
  EXPECT_EQ(c.last.traffic, (Traffic{{"m/2", 100}}));
  EXPECT_EQ(c.Starts("m/2"), 2);
}

TEST(Canary, WithNoFreeSlotBorrowsOneOldReplicaButNeverTheLast) {
  FakeCluster c = Serving(2, 2);
  c.goal.version = "m/2";
  c.goal.canary_percent = 10;
  c.Tick();
  EXPECT_EQ(c.last.drain.size(), 1u);
  ASSERT_TRUE(c.TickUntil([&] { return c.Count("m/2", Phase::kReady) == 1; }, 20));
  c.Tick();
  EXPECT_EQ(c.last.traffic, (Traffic{{"m/1", 90}, {"m/2", 10}}));
  EXPECT_EQ(c.Count("m/1", Phase::kReady), 1);
  EXPECT_FALSE(c.lost_last_ready);
}

TEST(Canary, GoingBackToTheStableVersionDrainsTheNewOnes) {
  FakeCluster c = Serving(2, 4);
  c.goal.version = "m/2";
  c.goal.canary_percent = 10;
  ASSERT_TRUE(c.TickUntil([&] { return c.Count("m/2", Phase::kReady) == 1; }, 20));
  c.Tick();
  c.goal.version = "m/1";
  c.Tick();
  EXPECT_EQ(c.last.drain.size(), 1u);
  EXPECT_EQ(c.last.traffic, (Traffic{{"m/1", 100}}));
  EXPECT_TRUE(c.Saw("deploy.rollout_cancelled"));
  EXPECT_EQ(c.state.rolling_to, "");
  EXPECT_TRUE(c.state.failed_versions.empty());
  ASSERT_TRUE(
      c.TickUntil([&] { return c.Live("m/2") + c.Count("m/2", Phase::kDraining) == 0; }, 10));
  EXPECT_EQ(c.last.health, "healthy");
  EXPECT_EQ(c.state.stable_version, "m/1");
}

// --- replacement, preemption, crash loops ---

TEST(Replicas, APreemptedReplicaIsWantedBackAndTheDeploymentSaysWhy) {
  FakeCluster c = Serving(2, 2);
  const std::string victim = c.replicas[0].run;
  c.Preempt(victim);
  c.Tick();
  ASSERT_EQ(c.last.start.size(), 1u);
  EXPECT_EQ(c.last.start[0], (std::pair<std::string, int>{"m/1", 1}));
  EXPECT_EQ(c.last.health, "degraded");
  EXPECT_NE(c.last.reason.find("1 of 2"), std::string::npos) << c.last.reason;
  EXPECT_NE(c.last.reason.find(victim), std::string::npos) << c.last.reason;
  EXPECT_NE(c.last.reason.find("preempted"), std::string::npos) << c.last.reason;
  EXPECT_TRUE(c.Saw("deploy.replica_preempted"));
  EXPECT_TRUE(c.Saw("deploy.starting"));
  // Still degraded while the replacement starts; healthy once it is ready.
  c.Tick();
  EXPECT_EQ(c.last.health, "degraded");
  ASSERT_TRUE(c.TickUntil([&] { return c.last.health == "healthy"; }, 20));
  EXPECT_EQ(c.Count("m/1", Phase::kReady), 2);
  EXPECT_TRUE(c.state.preempted.empty());
  EXPECT_EQ(c.Starts("m/1"), 1);
}

TEST(Replicas, AReplicaTheSchedulerHoldsSaysWhyItWaits) {
  FakeCluster c = Serving(1, 1);
  c.goal.min_replicas = c.goal.max_replicas = 2;
  c.Tick();  // the second replica is queued: no free GPU
  ReplicaObs* held = nullptr;
  for (ReplicaObs& r : c.replicas) {
    if (r.phase == Phase::kPending) held = &r;
  }
  ASSERT_NE(held, nullptr);
  held->waiting = "alice holds 1 of their 1 GPUs; this run needs 1";
  c.Tick();
  EXPECT_EQ(c.last.health, "progressing");
  EXPECT_EQ(c.last.reason_id, "deploy.health.queued");
  EXPECT_NE(c.last.reason.find("1 of 2"), std::string::npos) << c.last.reason;
  EXPECT_NE(c.last.reason.find("alice holds 1 of their 1 GPUs"), std::string::npos)
      << c.last.reason;
}

TEST(Replicas, ACrashLoopIsRestartedWithAGrowingBackoffNotEveryTick) {
  FakeCluster c = Serving(1, 1);
  c.behavior["m/1"].crash_after_ms = 0;
  c.behavior["m/1"].end_reason = "exit 1";
  c.Crash(c.replicas[0].run, "exit 1");
  std::vector<int64_t> start_times;
  for (int i = 0; i < 120; ++i) {
    c.Tick();
    if (!c.last.start.empty()) start_times.push_back(c.now);
  }
  ASSERT_GE(start_times.size(), 4u);
  EXPECT_LE(start_times.size(), 12u);  // 120 ticks of 1 s
  // The gaps grow, up to the cap.
  for (size_t i = 2; i < start_times.size(); ++i) {
    EXPECT_GE(start_times[i] - start_times[i - 1], start_times[i - 1] - start_times[i - 2])
        << "start " << i;
  }
  EXPECT_LE(start_times.back() - start_times[start_times.size() - 2], kBackoffMaxMs + 4000);
  EXPECT_EQ(c.last.health, "degraded");  // it served before: degraded, not failed
  EXPECT_EQ(c.last.reason_id, "deploy.health.crashing");
  const Event& e = *c.Last("deploy.replica_crashed");
  EXPECT_EQ(e.level, "warning");
  EXPECT_EQ(Arg(e, "reason"), "exit 1");
  EXPECT_GE(std::stoi(Arg(e, "count")), 4);
}

TEST(Replicas, AStoppedReplicaThatTheReconcilerStoppedIsNoFailure) {
  FakeCluster c = Serving(2, 3);
  c.goal.version = "m/2";
  ASSERT_TRUE(c.TickUntil([&] { return c.state.stable_version == "m/2"; }, 30));
  c.TickUntil([] { return false; }, 10);
  EXPECT_FALSE(c.Saw("deploy.replica_crashed"));
  EXPECT_TRUE(c.state.backoff.empty());
}

// `lathe stop` of a replica by its owner: it exits 143, but that is the
// stop's doing, not a failure: replaced at once, deploy.replica_ended.
TEST(Replicas, AReplicaStoppedByHandIsReplacedWithoutAFailure) {
  FakeCluster c = Serving(1, 2);
  const std::string stopped = c.replicas[0].run;
  c.Crash(stopped, "exited with code 143");
  c.Find(stopped)->stopped = true;
  ASSERT_TRUE(c.TickUntil([&] { return !c.last.start.empty(); }, 2));
  EXPECT_FALSE(c.Saw("deploy.replica_crashed"));
  EXPECT_TRUE(c.state.backoff.empty());
  const Event* e = c.Last("deploy.replica_ended");
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->level, "info");
  EXPECT_EQ(Arg(*e, "run"), stopped);
}

// --- autoscaling ---

FakeCluster Autoscaled(int min, int max, int64_t load) {
  FakeCluster c(8);
  c.goal.version = "m/1";
  c.goal.min_replicas = min;
  c.goal.max_replicas = max;
  c.AddReady("m/1");
  c.SetLoad(load);
  c.state.stable_version = "m/1";
  c.state.goal_version = "m/1";
  c.state.desired = 1;
  return c;
}

TEST(Autoscale, UpOnlyAfterTheUpscaleDelayAndByTheNeed) {
  FakeCluster c = Autoscaled(1, 3, 9);
  const int64_t t0 = c.now;
  while (c.now - t0 < c.goal.upscale_delay_ms) {
    c.Tick();
    EXPECT_EQ(c.state.desired, 1) << "at +" << (c.now - t0);
    EXPECT_TRUE(c.last.start.empty());
  }
  c.Tick();  // held 30 s
  EXPECT_EQ(c.state.desired, 3);
  ASSERT_EQ(c.last.start.size(), 1u);
  EXPECT_EQ(c.last.start[0].second, 2);
  const Event& e = *c.Last("deploy.scaled_up");
  EXPECT_EQ(Arg(e, "load"), "9");
  EXPECT_EQ(Arg(e, "queued"), "0");  // the replica reports nothing: the front's count alone
  EXPECT_EQ(Arg(e, "replicas"), "1");
  EXPECT_EQ(Arg(e, "target"), "2");
  EXPECT_EQ(Arg(e, "from"), "1");
  EXPECT_EQ(Arg(e, "to"), "3");
  EXPECT_EQ(Arg(e, "duration"), "30s");
}

TEST(Autoscale, AReplicasOwnDeepQueueScalesUpWhenTheFrontCountsFew) {
  // The front counts 1 request in flight; the replica says 1 is computing
  // and 8 more wait in its batcher (e.g. the front restarted meanwhile).
  FakeCluster c = Autoscaled(1, 3, 1);
  ReplicaObs& r = c.replicas[0];
  r.running = 1;
  r.queued = 8;
  const int64_t t0 = c.now;
  while (c.now - t0 < c.goal.upscale_delay_ms) {
    c.Tick();
    EXPECT_EQ(c.state.desired, 1);
  }
  c.Tick();
  EXPECT_EQ(c.state.desired, 3);  // ⌈9 / 2⌉ = 5, within 1..3
  const Event& e = *c.Last("deploy.scaled_up");
  EXPECT_EQ(Arg(e, "load"), "9");
  EXPECT_EQ(Arg(e, "queued"), "8");
}

TEST(Autoscale, ARequestQueuedInAReplicaIsNotCountedTwice) {
  // 4 in flight at the front, and the same 4 at the replica: 1 computing, 3
  // queued. Load 4 wants 2 replicas; counted twice (8) it would want 4.
  FakeCluster c = Autoscaled(1, 4, 4);
  c.replicas[0].running = 1;
  c.replicas[0].queued = 3;
  ASSERT_TRUE(c.TickUntil([&] { return c.Saw("deploy.scaled_up"); }, 60));
  EXPECT_EQ(c.state.desired, 2);
  const Event& e = *c.Last("deploy.scaled_up");
  EXPECT_EQ(Arg(e, "load"), "4");
  EXPECT_EQ(Arg(e, "queued"), "3");
  // The two ready replicas then report what the front counts: still 2.
  ASSERT_TRUE(c.TickUntil([&] { return c.Count("m/1", Phase::kReady) == 2; }, 60));
  for (ReplicaObs& x : c.replicas) {
    x.running = 1;
    x.queued = x.in_flight - 1;
  }
  for (int i = 0; i < 100; ++i) c.Tick();
  EXPECT_EQ(c.state.desired, 2);
}

TEST(Autoscale, ABreakInTheLoadRestartsTheDelay) {
  FakeCluster c = Autoscaled(1, 3, 9);
  for (int i = 0; i < 20; ++i) c.Tick();
  c.SetLoad(1);  // below: the timer clears
  c.Tick();
  EXPECT_EQ(c.state.above_since_ms, -1);
  c.SetLoad(9);
  const int64_t again = c.now;
  while (c.now - again < c.goal.upscale_delay_ms) {
    c.Tick();
    EXPECT_EQ(c.state.desired, 1);
  }
  c.Tick();
  EXPECT_EQ(c.state.desired, 3);
}

TEST(Autoscale, DownOnlyAfterTheLongerDelayDrainingTheIdlestSurplus) {
  FakeCluster c = Autoscaled(1, 3, 9);
  ASSERT_TRUE(c.TickUntil([&] { return c.Count("m/1", Phase::kReady) == 3; }, 60));
  c.SetLoad(2);  // need 1
  const int64_t t0 = c.now;
  while (c.now - t0 < c.goal.downscale_delay_ms) {
    c.Tick(5000);
    EXPECT_EQ(c.state.desired, 3) << "at +" << (c.now - t0);
    EXPECT_TRUE(c.last.drain.empty());
  }
  // The replicas carry 1, 1, 0 in flight: the idle one and one other go.
  std::map<std::string, int64_t> in_flight;
  for (const ReplicaObs& r : c.replicas) in_flight[r.run] = r.in_flight;
  c.Tick(5000);
  EXPECT_EQ(c.state.desired, 1);
  ASSERT_EQ(c.last.drain.size(), 2u);
  int64_t drained_in_flight = 0;
  for (const std::string& run : c.last.drain) drained_in_flight += in_flight[run];
  EXPECT_EQ(drained_in_flight, 1);
  const Event& e = *c.Last("deploy.scaled_down");
  EXPECT_EQ(Arg(e, "from"), "3");
  EXPECT_EQ(Arg(e, "to"), "1");
  EXPECT_EQ(Arg(e, "duration"), "10m");
  ASSERT_TRUE(c.TickUntil([&] { return c.Count("m/1", Phase::kDraining) == 0; }, 10));
  EXPECT_EQ(c.Count("m/1", Phase::kReady), 1);
  EXPECT_EQ(c.last.health, "healthy");
}

TEST(Autoscale, FixedReplicasIgnoreTheLoad) {
  FakeCluster c = Serving(2, 4);
  c.load = 100;
  for (int i = 0; i < 100; ++i) c.Tick();
  EXPECT_EQ(c.state.desired, 2);
  EXPECT_EQ(c.Starts("m/1"), 0);
  EXPECT_FALSE(c.Saw("deploy.scaled_up"));
}

TEST(Autoscale, ToZeroAfterTheGraceAndBackOnAHeldRequest) {
  FakeCluster c = Autoscaled(0, 2, 1);
  for (int i = 0; i < 100; ++i) c.Tick();  // one request in flight: not idle
  EXPECT_EQ(c.state.desired, 1);
  EXPECT_EQ(c.state.idle_since_ms, -1);
  c.SetLoad(0);
  const int64_t t0 = c.now;
  while (c.now - t0 < c.goal.zero_grace_ms) {
    c.Tick();
    EXPECT_EQ(c.state.desired, 1);
  }
  c.Tick();
  EXPECT_EQ(c.state.desired, 0);
  ASSERT_EQ(c.last.drain.size(), 1u);  // the last ready one goes too
  EXPECT_TRUE(c.last.traffic.empty());
  EXPECT_EQ(c.last.health, "scaled_to_zero");
  EXPECT_TRUE(c.Saw("deploy.scaled_to_zero"));
  ASSERT_TRUE(c.TickUntil([&] { return c.replicas.empty(); }, 10));
  for (int i = 0; i < 100; ++i) c.Tick();  // stays at zero, nothing started
  EXPECT_EQ(c.Starts("m/1"), 0);
  EXPECT_EQ(c.last.health, "scaled_to_zero");
  // A request arrives: the front holds it; one replica starts at once.
  c.goal.held_requests = 3;
  c.Tick();
  EXPECT_EQ(c.state.desired, 1);
  ASSERT_EQ(c.last.start.size(), 1u);
  EXPECT_EQ(c.last.start[0], (std::pair<std::string, int>{"m/1", 1}));
  EXPECT_EQ(Arg(*c.Last("deploy.scaling_from_zero"), "held"), "3");
  EXPECT_EQ(c.last.health, "progressing");
  ASSERT_TRUE(c.TickUntil([&] { return c.Ready() == 1; }, 10));
  c.goal.held_requests = 0;
  c.load = 3;
  c.Tick();
  EXPECT_EQ(c.last.traffic, (Traffic{{"m/1", 100}}));
  EXPECT_EQ(c.last.health, "healthy");
}

TEST(Autoscale, TheFirstCountIsMinOrOneForHeldRequests) {
  Goal g;
  g.version = "m/1";
  g.min_replicas = 0;
  g.max_replicas = 4;
  EXPECT_EQ(Reconcile(g, {}, State{}, 0).next.desired, 0);
  g.held_requests = 1;
  Decision d = Reconcile(g, {}, State{}, 0);
  EXPECT_EQ(d.next.desired, 1);
  ASSERT_EQ(d.start.size(), 1u);
  g.min_replicas = 2;
  EXPECT_EQ(Reconcile(g, {}, State{}, 0).next.desired, 2);
}

// --- invariants over a random walk ---

TEST(Invariants, NeverMoreThanMaxPlusSurgeNorTheLastReadyReplicaDrained) {
  std::mt19937 rng(20240611);
  for (int run = 0; run < 20; ++run) {
    const int gpus = 1 + static_cast<int>(rng() % 5);
    FakeCluster c(gpus);
    c.goal.version = "m/1";
    c.goal.min_replicas = static_cast<int>(rng() % 2);
    c.goal.max_replicas = 1 + static_cast<int>(rng() % 4);
    c.goal.canary_percent = rng() % 3 == 0 ? 20 : 0;
    c.goal.upscale_delay_ms = 5000;
    c.goal.downscale_delay_ms = 20000;
    c.goal.ready_timeout_ms = 30000;
    c.behavior["m/3"].crash_after_ms = 4000;
    c.behavior["m/4"].never_ready = true;
    for (int i = 0; i < 400; ++i) {
      switch (rng() % 40) {
        case 0:
          c.goal.version = "m/" + std::to_string(1 + rng() % 4);
          break;
        case 1:
          c.goal.promoted = !c.goal.promoted;
          break;
        case 2:
          if (!c.replicas.empty()) c.Preempt(c.replicas[rng() % c.replicas.size()].run);
          break;
        case 3:
          c.goal.held_requests = rng() % 3;
          break;
        default:
          break;
      }
      if (rng() % 10 == 0) c.load = rng() % 12;
      c.Tick();
      const Decision& d = c.last;
      for (const auto& [v, n] : d.start) {
        EXPECT_FALSE(std::count(c.state.failed_versions.begin(), c.state.failed_versions.end(), v))
            << "started a failed version " << v;
        EXPECT_GT(n, 0);
      }
      if (!d.traffic.empty()) {
        int sum = 0;
        for (const auto& [v, p] : d.traffic) sum += p;
        EXPECT_EQ(sum, 100);
      }
      ASSERT_LE(c.max_live_over_limit, 0) << "run " << run << " tick " << i;
      ASSERT_FALSE(c.lost_last_ready) << "run " << run << " tick " << i;
      ASSERT_LE(c.state.desired, c.goal.max_replicas);
    }
  }
}

TEST(Reconcile, TheSameInputsGiveTheSameDecision) {
  FakeCluster c = Serving(2, 3);
  c.goal.version = "m/2";
  c.Tick();
  c.Tick();
  Decision a = Reconcile(c.goal, c.replicas, c.state, c.now);
  Decision b = Reconcile(c.goal, c.replicas, c.state, c.now);
  EXPECT_EQ(a.start, b.start);
  EXPECT_EQ(a.drain, b.drain);
  EXPECT_EQ(a.stop, b.stop);
  EXPECT_EQ(a.traffic, b.traffic);
  EXPECT_EQ(a.next, b.next);
  EXPECT_EQ(a.reason, b.reason);
}

// --- the stored state ---

TEST(StateJson, RoundTripsEveryField) {
  State s;
  s.stable_version = "m/1";
  s.rolling_to = "m/2";
  s.failed_versions = {"m/0"};
  s.failed_reason = "exit 1";
  s.desired = 3;
  s.above_since_ms = 11;
  s.below_since_ms = 12;
  s.idle_since_ms = 13;
  s.goal_version = "m/2";
  s.canary = true;
  s.backoff["m/2"] = Backoff{2, 5000, "exit 2"};
  s.drained = {{"r1", 100}, {"r2", 200}};
  s.stopped = {"r3"};
  s.noted_ended = {"r4"};
  s.ready_seen = {"r5", "r6"};
  s.preempted = {"r7"};
  auto text = ToJson(s).dump();
  auto back = StateFromJson(Json::parse(text));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, s);
  // A state the reconciler made on its way through a rollout round-trips too.
  FakeCluster c = Serving(2, 2);
  c.goal.version = "m/2";
  for (int i = 0; i < 3; ++i) c.Tick();
  auto mid = StateFromJson(Json::parse(ToJson(c.state).dump()));
  ASSERT_TRUE(mid.ok());
  EXPECT_EQ(*mid, c.state);
}

TEST(StateJson, MissingFieldsTakeTheirDefaultsAndWrongTypesNameTheField) {
  auto empty = StateFromJson(Json::object());
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(*empty, State{});
  auto bad = StateFromJson(Json{{"desired", "three"}});
  ASSERT_FALSE(bad.ok());
  EXPECT_TRUE(bad.status().IsInvalidArgument());
  EXPECT_EQ(bad.status().msg_id(), "deploy.state_field");
  EXPECT_NE(bad.status().message().find("desired"), std::string::npos);
  bad = StateFromJson(Json{{"backoff", {{"m/1", {{"failures", true}}}}}});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("failures"), std::string::npos);
  EXPECT_FALSE(StateFromJson(Json::array()).ok());
}

// A daemon restarted mid-rollout passes the stored state back: the rollout
// goes on from there.
TEST(StateJson, ARolloutResumesFromTheStoredState) {
  FakeCluster c = Serving(2, 3);
  c.goal.version = "m/2";
  for (int i = 0; i < 3; ++i) c.Tick();
  c.state = *StateFromJson(Json::parse(ToJson(c.state).dump()));
  ASSERT_TRUE(c.TickUntil([&] { return c.state.stable_version == "m/2"; }, 50));
  EXPECT_EQ(c.Seen("deploy.rollout_started"), 1);
  EXPECT_EQ(c.Starts("m/2"), 2);
}

// --- the catalog ---

// Every id the reconciler can emit (each "deploy.…" literal in its sources)
// is in the catalog in both languages.
TEST(Catalog, EveryIdInTheSourcesHasBothLanguages) {
  std::set<std::string> ids;
  for (const char* file : {"reconcile.cc", "autoscaler.cc"}) {
    std::ifstream in(std::string(LATHE_SOURCE_DIR) + "/src/lathe/deploy/" + file);
    std::stringstream ss;
    ss << in.rdbuf();
    const std::string text = ss.str();
    ASSERT_FALSE(text.empty()) << file;
    for (size_t at = text.find("\"deploy."); at != std::string::npos;
         at = text.find("\"deploy.", at + 1)) {
      ids.insert(text.substr(at + 1, text.find('"', at + 1) - at - 1));
    }
  }
  EXPECT_GE(ids.size(), 25u);
  const Catalog& cat = Catalog::Default();
  for (const std::string& id : ids) {
    const DataEntry* e = cat.Find(id);
    ASSERT_NE(e, nullptr) << id;
    ASSERT_TRUE(e->text.count("text")) << id;
    EXPECT_FALSE(e->text.at("text").en.empty()) << id;
    EXPECT_FALSE(e->text.at("text").zh.empty()) << id;
  }
}

// The arguments of what the scenarios emit fill every placeholder.
TEST(Catalog, EmittedEventsAndReasonsFillEveryPlaceholder) {
  std::vector<FakeCluster> runs;
  {
    FakeCluster c = Serving(2, 2);
    c.behavior["m/2"].crash_after_ms = 1000;
    c.goal.version = "m/2";
    c.TickUntil([&] { return c.Saw("deploy.rolled_back"); }, 20);
    c.Crash(c.replicas[0].run);
    for (int i = 0; i < 5; ++i) c.Tick();
    runs.push_back(c);
  }
  {
    FakeCluster c = Autoscaled(0, 3, 9);
    c.TickUntil([&] { return c.Saw("deploy.scaled_up"); }, 60);
    c.load = 0;
    c.TickUntil([&] { return c.last.health == "scaled_to_zero"; }, 200);
    c.goal.held_requests = 1;
    c.Tick();
    runs.push_back(c);
  }
  for (const FakeCluster& c : runs) {
    for (const Event& e : c.events) {
      for (Lang lang : {Lang::kEn, Lang::kZh}) {
        const std::string text = Tr(e.msg_id, lang, e.args);
        EXPECT_EQ(text.find('{'), std::string::npos) << e.msg_id << ": " << text;
      }
    }
    EXPECT_EQ(c.last.reason.find('{'), std::string::npos) << c.last.reason;
    EXPECT_TRUE(Catalog::Default().Has(c.last.reason_id)) << c.last.reason_id;
  }
}

}  // namespace
}  // namespace lathe::deploy

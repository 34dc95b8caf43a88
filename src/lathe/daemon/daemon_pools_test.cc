// The daemon with more than one backend: this node's, and a cluster pool's
// that places runs itself (config.yaml `pools:`). Both are fakes; time moves
// only when a test says.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "lathe/daemon/daemon.h"
#include "lathe/exec/test_util/fake_backend.h"
#include "lathe/os/files.h"
#include "lathe/os/test_util/fake_clock.h"

namespace lathe::daemon {
namespace {

using exec::FakeBackend;
using run::RunState;
using state::RunRecord;

class DaemonPoolsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/lathe-pools-test-XXXXXX";
    home_ = ::mkdtemp(tmpl);
    char work[] = "/tmp/lathe-pools-work-XXXXXX";  // where runs write: outside the home
    work_ = ::mkdtemp(work);
    cluster_.caps.places_runs = true;
    Open();
  }
  void TearDown() override {
    daemon_.reset();
    std::filesystem::remove_all(home_);
    std::filesystem::remove_all(work_);
  }

  // A daemon on the same home and the same fakes: a second call is a restart.
  void Open(std::string default_pool = "") {
    daemon_.reset();
    DaemonOptions o;
    o.home = home_;
    o.gpus = "sim:1x24GB";
    o.backend = &local_;
    o.pools = {{"cluster", &cluster_}};
    o.default_pool = std::move(default_pool);
    auto d = Daemon::Create(o, clock_);
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    daemon_ = std::move(d).value();
  }

  Result<daemon::Submission> TrySubmit(Json spec) {
    if (!spec.contains("command")) spec["command"] = {"train"};
    spec["workdir"] = "/tmp";
    return daemon_->Submit(me_, spec);
  }
  std::string Submit(Json spec) {
    auto s = TrySubmit(std::move(spec));
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return s.ok() ? s->run.id : "";
  }
  RunRecord Get(const std::string& id) {
    auto r = daemon_->Access(me_, id, AccessAction::kRead);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : RunRecord{};
  }
  void Step(int n = 1) {
    for (int i = 0; i < n; ++i) daemon_->StepForTest();
  }
  // The run's events of `type`, after stepping until there are `n` of them
  // (captures run in the background) or a generous number of passes.
  std::vector<state::EventRecord> EventsOf(const std::string& id, const std::string& type,
                                           size_t n) {
    std::vector<state::EventRecord> out;
    for (int i = 0; i < 500; ++i) {
      Step();
      out.clear();
      auto all = daemon_->Events(id, 0);
      EXPECT_TRUE(all.ok());
      if (!all.ok()) return out;
      for (auto& e : *all) {
        if (e.type == type) out.push_back(e);
      }
      if (out.size() >= n) return out;
      ::usleep(10000);
    }
    return out;
  }

  std::string home_, work_;
  os::FakeClock clock_;
  FakeBackend local_;
  FakeBackend cluster_;
  std::unique_ptr<Daemon> daemon_;
  Caller me_{::geteuid(), "me", true};
};

// A pool run never reaches this node's placement: a size the node does not
// have is the cluster's to judge, and the node's GPU stays free for a local run.
TEST_F(DaemonPoolsTest, APoolRunIsHandedToItsPoolNotPlacedOnThisNode) {
  std::string big = Submit({{"gpus", 8}, {"pool", "cluster"}});
  std::string here = Submit({{"gpus", 1}});
  Step(2);  // submitted, then seen running
  RunRecord r = Get(big);
  EXPECT_EQ(r.state, RunState::kRunning);
  EXPECT_EQ(r.backend, "cluster");
  EXPECT_EQ(r.spec.pool, "cluster");
  EXPECT_TRUE(r.gpus.empty());
  EXPECT_EQ(cluster_.Launches(big), 1);
  EXPECT_EQ(local_.Launches(big), 0);
  EXPECT_EQ(Get(here).state, RunState::kRunning);
  EXPECT_EQ(local_.Launches(here), 1);
  EXPECT_EQ(cluster_.Launches(here), 0);
  EXPECT_EQ(Get(here).gpus, std::vector<int>{0});
}

// Several nodes only where the backend runs one attempt on several (a Slurm
// pool), refused at submission elsewhere; a torchrun run's first process is
// `lathe __torchrun` with the GPUs per node and the nodes; spec.nccl becomes
// NCCL_* in the run's environment, where spec.env wins.
TEST_F(DaemonPoolsTest, SeveralNodesGoOnlyToAMultiNodePoolAsOneTorchrunPerNode) {
  auto here = TrySubmit({{"nodes", 2}});
  ASSERT_FALSE(here.ok());
  EXPECT_EQ(here.status().msg_id(), "spec.nodes_not_supported");
  EXPECT_NE(here.status().message().find("'nodes'"), std::string::npos);
  auto single = TrySubmit({{"nodes", 2}, {"pool", "cluster"}});  // not multi_node yet
  ASSERT_FALSE(single.ok());
  EXPECT_EQ(single.status().msg_id(), "spec.nodes_not_supported");
  EXPECT_NE(single.status().message().find("cluster"), std::string::npos);

  cluster_.caps.multi_node = true;
  std::string id = Submit({{"nodes", 2},
                           {"gpus", 4},
                           {"pool", "cluster"},
                           {"torchrun", true},
                           {"command", {"train.py", "--lr", "1"}},
                           {"nccl", {{"ib", false}, {"socket_ifname", "eth0"}}},
                           {"env", {{"NCCL_SOCKET_IFNAME", "ib0"}}}});
  std::string plain = Submit({{"nodes", 2}, {"pool", "cluster"}});
  Step(2);
  auto a = cluster_.Get(id, 1);
  ASSERT_TRUE(a.has_value());
  const exec::LaunchRequest& q = a->request;
  EXPECT_EQ(q.nodes, 2);
  EXPECT_EQ(q.gpu_count, 4);  // per node
  ASSERT_FALSE(q.argv.empty());
  EXPECT_EQ(std::vector<std::string>(q.argv.begin() + 1, q.argv.end()),
            (std::vector<std::string>{"__torchrun", "4", "2", id, "--", "train.py", "--lr", "1"}));
  EXPECT_EQ(q.env.at("NCCL_IB_DISABLE"), "1");
  EXPECT_EQ(q.env.at("NCCL_SOCKET_IFNAME"), "ib0");
  auto p = cluster_.Get(plain, 1);
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->request.argv, std::vector<std::string>{"train"});  // as it is, on the first node
  EXPECT_EQ(p->request.nodes, 2);
  EXPECT_EQ(p->request.env.count("NCCL_IB_DISABLE"), 0u);
}

// Exits, stops and ends go through the run's own backend.
TEST_F(DaemonPoolsTest, APoolRunIsWatchedAndStoppedThroughItsPool) {
  std::string a = Submit({{"pool", "cluster"}});
  std::string b = Submit({{"pool", "cluster"}});
  Step();
  cluster_.Exit(a, 3);
  ASSERT_TRUE(daemon_->StopRun(me_, b).ok());
  Step(2);
  EXPECT_EQ(Get(a).state, RunState::kFailed);
  EXPECT_EQ(Get(a).exit_code, 3);
  EXPECT_TRUE(cluster_.Get(a, 1)->released);
  EXPECT_EQ(Get(b).state, RunState::kStopped);
  EXPECT_EQ(cluster_.Get(b, 1)->signals,
            std::vector<exec::StopSignal>{exec::StopSignal::kGraceful});
}

TEST_F(DaemonPoolsTest, AnUnknownPoolIsRefusedAtSubmissionNamingTheField) {
  auto s = TrySubmit({{"pool", "nowhere"}});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().msg_id(), "spec.unknown_pool");
  EXPECT_NE(s.status().message().find("local, cluster"), std::string::npos) << s.status().message();
  int64_t total = 0;
  ASSERT_TRUE(daemon_->List(true, 10, &total).ok());
  EXPECT_EQ(total, 0);
}

TEST_F(DaemonPoolsTest, WhatThePoolsBackendCannotHonourIsRefusedAtSubmission) {
  cluster_.check = Status::Msg(Code::kInvalidArgument, "spec.limit_unavailable",
                               {{"field", "shm"}, {"controller", "-"}, {"note", "a cluster"}});
  auto s = TrySubmit({{"pool", "cluster"}});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().msg_id(), "spec.limit_unavailable");
  EXPECT_TRUE(TrySubmit({}).ok());  // this node's backend has no such objection
}

// default_pool sends jobs that name no pool to it; `local` keeps one here,
// and a notebook stays here unless it names a pool.
TEST_F(DaemonPoolsTest, TheDefaultPoolTakesJobsThatNameNone) {
  Open("cluster");
  std::string job = Submit({});
  std::string here = Submit({{"pool", "local"}});
  Step();
  EXPECT_EQ(Get(job).backend, "cluster");
  EXPECT_EQ(cluster_.Launches(job), 1);
  EXPECT_EQ(Get(here).backend, "fake");
  EXPECT_EQ(Get(here).spec.pool, "");
  EXPECT_EQ(local_.Launches(here), 1);
}

// After a restart each active run is re-adopted by the backend that runs it.
TEST_F(DaemonPoolsTest, ARestartReadoptsEachRunThroughItsOwnBackend) {
  std::string there = Submit({{"pool", "cluster"}});
  std::string here = Submit({});
  Step();
  Open();
  Step();
  EXPECT_EQ(Get(there).state, RunState::kRunning);
  EXPECT_EQ(Get(here).state, RunState::kRunning);
  cluster_.Exit(there, 0);
  local_.Exit(here, 0);
  Step(2);
  EXPECT_EQ(Get(there).state, RunState::kSucceeded);
  EXPECT_EQ(Get(here).state, RunState::kSucceeded);
}

// A pool taken out of the config: its queued runs fail saying so, its
// active ones are lost at the next start (nothing can watch them).
TEST_F(DaemonPoolsTest, RunsOfAPoolNoLongerConfiguredEndSayingWhy) {
  std::string active = Submit({{"pool", "cluster"}});
  Step();
  daemon_.reset();
  DaemonOptions o;
  o.home = home_;
  o.gpus = "sim:1x24GB";
  o.backend = &local_;
  auto d = Daemon::Create(o, clock_);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  daemon_ = std::move(d).value();
  Step();
  RunRecord r = Get(active);
  EXPECT_EQ(r.state, RunState::kLost);
  EXPECT_NE(r.reason.find("cluster"), std::string::npos) << r.reason;
  EXPECT_FALSE(TrySubmit({{"pool", "cluster"}}).ok());
}

// A run the cluster holds in its queue stays `starting`, showing the
// cluster's reason as why it waits, and runs when the cluster starts it.
TEST_F(DaemonPoolsTest, ARunHeldInThePoolsQueueSaysWhyAndRunsWhenStarted) {
  cluster_.hold_note = "PENDING (Resources)";
  std::string id = Submit({{"pool", "cluster"}, {"gpus", 2}});
  Step(3);
  EXPECT_EQ(Get(id).state, RunState::kStarting);
  EXPECT_EQ(daemon_->WaitingWhy(id), "in its pool's queue: PENDING (Resources)");
  EXPECT_EQ(daemon_->WaitingOn(id), "pool");
  EXPECT_EQ(cluster_.Get(id, 1)->request.gpu_count, 2);
  cluster_.Begin(id);
  Step();
  EXPECT_EQ(Get(id).state, RunState::kRunning);
  EXPECT_EQ(daemon_->WaitingWhy(id), "");
}

// What the cluster did to a run is not the program's failure: preempted or
// a node lost, it is requeued (as a preemption here: no retry used) and
// starts again as a new job; the job's time limit is the run's max_duration.
TEST_F(DaemonPoolsTest, APreemptionOrALostNodeRequeuesTheRunATimeLimitEndsIt) {
  std::string pre = Submit({{"pool", "cluster"}});
  std::string node = Submit({{"pool", "cluster"}, {"retry", 0}});
  std::string late = Submit({{"pool", "cluster"}, {"max_duration", "1h"}});
  std::string fixed = Submit({{"pool", "cluster"}, {"requeue", false}});
  Step(2);
  cluster_.EndByCluster(pre, "PREEMPTED");
  cluster_.EndByCluster(node, "NODE_FAIL");
  cluster_.EndByCluster(late, "TIMEOUT");
  cluster_.EndByCluster(fixed, "PREEMPTED");
  Step(3);
  for (const auto& id : {pre, node}) {
    RunRecord r = Get(id);
    EXPECT_EQ(cluster_.Launches(id), 2) << id;
    EXPECT_EQ(r.attempt, 2) << id;
    EXPECT_EQ(r.preemptions, 1) << id;
    EXPECT_EQ(r.retries_used, 0) << id;
    EXPECT_TRUE(run::IsActive(r.state)) << id;
  }
  RunRecord l = Get(late);
  EXPECT_EQ(l.state, RunState::kFailed);
  EXPECT_NE(l.reason.find("max_duration"), std::string::npos) << l.reason;
  EXPECT_EQ(cluster_.Launches(late), 1);
  RunRecord f = Get(fixed);
  EXPECT_EQ(f.state, RunState::kPreempted);
  EXPECT_NE(f.reason.find("PREEMPTED"), std::string::npos) << f.reason;
  EXPECT_EQ(cluster_.Launches(fixed), 1);
}

// A job cancelled in the cluster, not by Lathe (an admin's scancel), stops
// its run: not a failure, not a preemption, not requeued.
TEST_F(DaemonPoolsTest, AJobCancelledInTheClusterStopsItsRun) {
  std::string id = Submit({{"pool", "cluster"}});
  Step(2);
  cluster_.EndByCluster(id, "CANCELLED");
  Step(2);
  RunRecord r = Get(id);
  EXPECT_EQ(r.state, RunState::kStopped) << r.reason;
  EXPECT_NE(r.reason.find("cancelled in its pool, not by Lathe (CANCELLED"), std::string::npos)
      << r.reason;
  EXPECT_EQ(r.preemptions, 0);
  EXPECT_EQ(cluster_.Launches(id), 1);
}

// A program that exits 0 on its own has finished, even when its cluster
// calls the job preempted or timed out as it ended; one that exits 0 after
// being asked to stop has not.
TEST_F(DaemonPoolsTest, AProgramThatFinishedOnItsOwnSucceedsWhateverTheClusterSays) {
  std::string done = Submit({{"pool", "cluster"}});
  std::string cut = Submit({{"pool", "cluster"}});
  Step();
  cluster_.EndByCluster(done, "TIMEOUT", 0);
  cluster_.EndByCluster(cut, "PREEMPTED");
  Step(2);
  EXPECT_EQ(Get(done).state, RunState::kSucceeded) << Get(done).reason;
  EXPECT_EQ(cluster_.Launches(done), 1);
  EXPECT_GE(cluster_.Launches(cut), 2);  // preempted, then requeued
}

// A partition's time limit is not the run's: the run goes on in a new job
// (neither a preemption nor a retry), and its max_duration counts from the
// chain's first job, so the chain ends when that is used up.
TEST_F(DaemonPoolsTest, ARunLongerThanItsPartitionAllowsGoesOnAsAChainUntilItsOwnMaxDuration) {
  constexpr int64_t kHour = 3600 * 1000;
  std::string id = Submit({{"pool", "cluster"}, {"max_duration", "3h"}});
  Step(2);
  ASSERT_EQ(Get(id).state, RunState::kRunning);
  EXPECT_EQ(cluster_.Get(id, 1)->request.time_limit_ms, 3 * kHour);
  clock_.Advance(kHour);
  cluster_.EndByCluster(id, std::string(exec::kPartitionTimeLimit));
  for (int i = 0; i < 50 && cluster_.Launches(id) < 2; ++i) Step();
  ASSERT_EQ(cluster_.Launches(id), 2);
  RunRecord r = Get(id);
  EXPECT_EQ(r.preemptions, 0);
  EXPECT_EQ(r.retries_used, 0);
  EXPECT_GT(r.chain_started_at_ms, 0);
  EXPECT_EQ(cluster_.Get(id, 2)->request.time_limit_ms, 2 * kHour);  // what the chain has left
  Step();
  clock_.Advance(2 * kHour + 1000);  // the chain's three hours are up
  Step(3);
  r = Get(id);
  EXPECT_EQ(r.state, RunState::kFailed);
  EXPECT_NE(r.reason.find("max_duration"), std::string::npos) << r.reason;
  EXPECT_EQ(cluster_.Launches(id), 2);
  EXPECT_EQ(r.chain_started_at_ms, 0);
}

// A pool run's checkpoints are written on its node, where the daemon's
// inotify sees nothing: the daemon does not watch the directory, and takes a
// snapshot when the node's records grow, one per new record count.
TEST_F(DaemonPoolsTest, APoolRunsCheckpointsAreCapturedFromItsNodesRecords) {
  const std::string dir = work_ + "/ckpt";
  std::string id = Submit({{"pool", "cluster"}, {"checkpoints", {{"dir", dir}}}});
  Step(2);
  ASSERT_EQ(Get(id).state, RunState::kRunning);
  EXPECT_EQ(cluster_.Get(id, 1)->request.checkpoint_dir, dir);
  // Written "on the node" without a record: nothing is captured while it runs.
  ASSERT_TRUE(os::MakeDirs(dir + "/step_50").ok());
  ASSERT_TRUE(os::WriteFileAtomic(dir + "/step_50/model.txt", "weights-50").ok());
  Step(3);
  ::usleep(300000);  // longer than a watcher's quiet period: a watch would have fired
  EXPECT_TRUE(EventsOf(id, "checkpoint", 0).empty());
  cluster_.RecordCheckpoint(id);
  auto events = EventsOf(id, "checkpoint", 1);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].data.value("trigger", ""), "checkpoint 1 recorded on its node");
  EXPECT_EQ(events[0].data.value("resume_point", ""), "step_50");
  // The same count again captures nothing more; the next record does.
  Step(3);
  EXPECT_EQ(EventsOf(id, "checkpoint", 1).size(), 1u);
  ASSERT_TRUE(os::MakeDirs(dir + "/step_100").ok());
  ASSERT_TRUE(os::WriteFileAtomic(dir + "/step_100/model.txt", "weights-100").ok());
  cluster_.RecordCheckpoint(id);
  events = EventsOf(id, "checkpoint", 2);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[1].data.value("trigger", ""), "checkpoint 2 recorded on its node");
}

// Preempted by its cluster, the run comes back with the newest checkpoint
// put back into its directory and LATHE_RESUME_FROM naming it.
TEST_F(DaemonPoolsTest, APreemptedPoolRunResumesFromItsLastCapturedCheckpoint) {
  const std::string dir = work_ + "/ckpt";
  std::string id = Submit({{"pool", "cluster"}, {"checkpoints", {{"dir", dir}}}});
  Step(2);
  ASSERT_TRUE(os::MakeDirs(dir + "/step_50").ok());
  ASSERT_TRUE(os::WriteFileAtomic(dir + "/step_50/model.txt", "weights-50").ok());
  cluster_.RecordCheckpoint(id);
  ASSERT_EQ(EventsOf(id, "checkpoint", 1).size(), 1u);
  ASSERT_TRUE(os::RemoveAll(dir + "/step_50").ok());  // the node's copy is lost
  cluster_.EndByCluster(id, "PREEMPTED");
  for (int i = 0; i < 500 && cluster_.Launches(id) < 2; ++i) {
    Step();
    ::usleep(10000);
  }
  ASSERT_EQ(cluster_.Launches(id), 2);
  const auto second = cluster_.Get(id, 2);
  ASSERT_TRUE(second.has_value());
  EXPECT_EQ(second->request.env.at("LATHE_RESUME_FROM"), dir + "/step_50");
  auto back = os::ReadFile(dir + "/step_50/model.txt");
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, "weights-50");
  EXPECT_EQ(Get(id).retries_used, 0);  // a preemption is not a retry
}

// `lathe pools`: each pool as its backend describes it, with the caller's
// own runs there by state, and nobody else's.
TEST_F(DaemonPoolsTest, PoolsListTheCallersOwnRunsBesideWhatEachBackendSays) {
  exec::Partition debug;
  debug.name = "debug";
  debug.gpus_total = 2;
  cluster_.description.partition = "debug";
  cluster_.description.partitions = {debug};
  std::string running = Submit({{"pool", "cluster"}});
  Step(2);
  cluster_.hold_note = "PENDING (Resources)";
  std::string held = Submit({{"pool", "cluster"}});
  Step(2);
  std::string here = Submit({{"gpus", 1}});
  std::string queued_here = Submit({{"gpus", 1}});  // the node's one GPU is taken
  Step(2);
  ASSERT_EQ(Get(held).state, RunState::kStarting);
  ASSERT_EQ(Get(queued_here).state, RunState::kQueued);

  std::vector<PoolView> pools = daemon_->Pools(me_);
  ASSERT_EQ(pools.size(), 2u);
  EXPECT_EQ(pools[0].name, "local");
  EXPECT_TRUE(pools[0].is_default);
  EXPECT_EQ(pools[0].running, std::vector<std::string>{here});
  EXPECT_EQ(pools[0].queued, std::vector<std::string>{queued_here});
  EXPECT_EQ(pools[1].name, "cluster");
  EXPECT_FALSE(pools[1].is_default);
  EXPECT_TRUE(pools[1].caps.places_runs);
  EXPECT_EQ(pools[1].running, std::vector<std::string>{running});
  EXPECT_EQ(pools[1].starting, std::vector<std::string>{held});
  EXPECT_TRUE(pools[1].queued.empty());
  EXPECT_EQ(pools[1].description.partition, "debug");
  ASSERT_EQ(pools[1].description.partitions.size(), 1u);
  EXPECT_EQ(pools[1].description.partitions[0].gpus_total, 2);
  EXPECT_EQ(cluster_.describes.load(), 1);

  // Another user sees the pools and none of these runs, admin or not.
  for (bool admin : {false, true}) {
    Caller other{::geteuid() + 1, "other", admin};
    for (const PoolView& v : daemon_->Pools(other)) {
      EXPECT_TRUE(v.queued.empty() && v.starting.empty() && v.running.empty()) << v.name;
    }
  }
  // A run that ended is no longer listed.
  cluster_.Exit(running, 0);
  Step(2);
  EXPECT_TRUE(daemon_->Pools(me_)[1].running.empty());
}

}  // namespace
}  // namespace lathe::daemon

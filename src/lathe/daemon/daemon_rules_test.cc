// The daemon's run rules — retries, preemption, lost attempts, exits while
// it was down, deadlines, stop escalation — against a fake backend and a
// fake clock: no process is started, and time moves only when a test says.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include "lathe/daemon/daemon.h"
#include "lathe/exec/test_util/fake_backend.h"
#include "lathe/os/test_util/fake_clock.h"

namespace lathe::daemon {
namespace {

using exec::FakeBackend;
using exec::StopSignal;
using run::RunState;
using state::RunRecord;

class DaemonRulesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/lathe-rules-test-XXXXXX";
    home_ = ::mkdtemp(tmpl);
    Open();
  }
  void TearDown() override {
    daemon_.reset();
    std::filesystem::remove_all(home_);
  }

  // A daemon on the same home and the same fake backend: the second call is
  // a restart (the previous daemon is gone first, as after a crash).
  void Open() {
    daemon_.reset();
    DaemonOptions o;
    o.home = home_;
    o.gpus = "sim:1x24GB";
    o.kill_grace_ms = 5000;
    o.backend = &backend_;
    auto d = Daemon::Create(o, clock_);
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    daemon_ = std::move(d).value();
  }

  std::string Submit(Json spec) {
    if (!spec.contains("command")) spec["command"] = {"train"};
    spec["workdir"] = "/tmp";
    auto s = daemon_->Submit(me_, spec);
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

  std::string home_;
  os::FakeClock clock_;
  FakeBackend backend_;
  std::unique_ptr<Daemon> daemon_;
  Caller me_{::geteuid(), "me", true};
};

TEST_F(DaemonRulesTest, ARunIsLaunchedOnItsGpusAndSucceeds) {
  std::string id = Submit({{"gpus", 1}, {"env", {{"A", "1"}}}});
  Step();
  RunRecord r = Get(id);
  EXPECT_EQ(r.state, RunState::kRunning);
  EXPECT_EQ(r.backend, "fake");
  EXPECT_EQ(r.handle.value("run", ""), id);  // the launched handle is stored
  auto a = backend_.Get(id, 1);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->request.gpus, std::vector<int>{0});
  EXPECT_EQ(a->request.env.at("A"), "1");
  EXPECT_EQ(a->request.env.at("LATHE_RUN_ID"), id);
  EXPECT_EQ(a->request.user.uid, ::geteuid());
  backend_.Exit(id, 0);
  Step();
  r = Get(id);
  EXPECT_EQ(r.state, RunState::kSucceeded);
  EXPECT_TRUE(backend_.Get(id, 1)->released);
}

TEST_F(DaemonRulesTest, AFailureUsesARetryAndTheLastFailureEndsTheRun) {
  std::string id = Submit({{"retry", 1}});
  Step();
  backend_.Exit(id, 3);
  Step();
  RunRecord r = Get(id);
  EXPECT_EQ(r.retries_used, 1);
  EXPECT_EQ(r.state, RunState::kQueued);
  // The retry waits out its backoff (1 s after the first failure) first.
  Step();
  EXPECT_EQ(backend_.Launches(id), 1);
  EXPECT_EQ(daemon_->WaitingOn(id), "retry_backoff");
  EXPECT_NE(daemon_->WaitingWhy(id).find("retry 1 of 1 in 1s"), std::string::npos)
      << daemon_->WaitingWhy(id);
  clock_.Advance(1'000);
  Step();
  EXPECT_EQ(backend_.Launches(id), 2);
  backend_.Exit(id, 3);
  Step();
  r = Get(id);
  EXPECT_EQ(r.state, RunState::kFailed);
  EXPECT_EQ(r.attempt, 2);
  ASSERT_TRUE(r.exit_code);
  EXPECT_EQ(*r.exit_code, 3);
  EXPECT_EQ(backend_.Launches(id), 2);
}

TEST_F(DaemonRulesTest, EachRetryWaitsTwiceAsLongUpToTheCap) {
  std::string id = Submit({{"retry", 20}});
  Step();
  int64_t expected_ms = 1'000;
  for (int attempt = 1; attempt <= 12; ++attempt) {
    ASSERT_EQ(backend_.Launches(id), attempt);
    backend_.Exit(id, 1);
    Step();
    clock_.Advance(expected_ms - 1);
    Step();
    EXPECT_EQ(backend_.Launches(id), attempt) << "retry " << attempt << " started early";
    clock_.Advance(1);
    Step();
    expected_ms = std::min<int64_t>(expected_ms * 2, 300'000);
  }
  EXPECT_EQ(backend_.Launches(id), 13);
}

TEST_F(DaemonRulesTest, APreemptionRequeuesWithoutUsingARetry) {
  std::string low = Submit({{"gpus", 1}, {"priority", "low"}, {"retry", 0}});
  Step();
  ASSERT_EQ(Get(low).state, RunState::kRunning);
  std::string high = Submit({{"gpus", 1}, {"priority", "high"}});
  Step();  // the scheduler preempts `low`: a graceful stop
  auto a = backend_.Get(low, 1);
  ASSERT_TRUE(a);
  ASSERT_FALSE(a->signals.empty());
  EXPECT_EQ(a->signals[0], StopSignal::kGraceful);
  Step(3);  // `low` exits by the signal; `high` starts on the freed GPU
  EXPECT_EQ(Get(high).state, RunState::kRunning);
  RunRecord r = Get(low);
  EXPECT_EQ(r.state, RunState::kQueued);
  EXPECT_EQ(r.preemptions, 1);
  EXPECT_EQ(r.retries_used, 0);
  backend_.Exit(high, 0);
  Step(2);
  EXPECT_EQ(Get(low).state, RunState::kRunning);
  EXPECT_EQ(backend_.Launches(low), 2);
}

TEST_F(DaemonRulesTest, SchedulingLatencyRunsFromEachQueueingToItsPlacement) {
  std::string low = Submit({{"gpus", 1}, {"priority", "low"}});
  clock_.Advance(1'000);
  Step();  // `low` placed 1 s after its submission
  ASSERT_EQ(Get(low).state, RunState::kRunning);
  std::string high = Submit({{"gpus", 1}, {"priority", "high"}});
  Step();  // `low` is asked to stop
  clock_.Advance(2'000);
  Step(3);  // `low` preempted and requeued; `high` placed 2 s after its submission
  ASSERT_EQ(Get(high).state, RunState::kRunning);
  ASSERT_EQ(Get(low).state, RunState::kQueued);
  clock_.Advance(5'000);
  backend_.Exit(high, 0);
  Step(2);  // `low` placed again 5 s after its requeue (7 s after its submission)
  ASSERT_EQ(Get(low).state, RunState::kRunning);
  SchedulingLatency::Snapshot s = daemon_->CollectMetrics().latency;
  EXPECT_EQ(s.count, 3u);
  EXPECT_DOUBLE_EQ(s.sum_s, 1 + 2 + 5);
  std::vector<uint64_t> want(s.bounds_s.size(), 0);
  for (double v : {1.0, 2.0, 5.0}) {
    want[std::lower_bound(s.bounds_s.begin(), s.bounds_s.end(), v) - s.bounds_s.begin()]++;
  }
  EXPECT_EQ(s.counts, want);
}

TEST_F(DaemonRulesTest, AnAttemptThatVanishesIsLostAndRetried) {
  std::string id = Submit({{"retry", 1}});
  Step();
  backend_.Vanish(id);
  Step();
  RunRecord r = Get(id);
  EXPECT_EQ(r.retries_used, 1);
  EXPECT_TRUE(backend_.Get(id, 1)->released);
  auto events = daemon_->Events(id, 0);
  ASSERT_TRUE(events.ok());
  bool lost = false;
  for (const auto& e : *events) lost |= e.data.value("to", "") == "lost";
  EXPECT_TRUE(lost);
}

TEST_F(DaemonRulesTest, AHandleThatCannotBeReadoptedAfterARestartIsLost) {
  std::string id = Submit({});
  Step();
  ASSERT_EQ(Get(id).state, RunState::kRunning);
  backend_.Vanish(id);  // while no daemon watches
  Open();
  RunRecord r = Get(id);
  EXPECT_EQ(r.state, RunState::kLost);
  EXPECT_NE(r.reason.find("vanished"), std::string::npos) << r.reason;
}

TEST_F(DaemonRulesTest, ARunThatExitedWhileTheDaemonWasDownGetsItsExit) {
  std::string id = Submit({});
  Step();
  backend_.Exit(id, 0);
  Open();
  RunRecord r = Get(id);
  EXPECT_EQ(r.state, RunState::kSucceeded);
  auto events = daemon_->Events(id, 0);
  ASSERT_TRUE(events.ok());
  bool told = false;
  for (const auto& e : *events)
    told |= e.message.find("while the daemon was down") != std::string::npos;
  EXPECT_TRUE(told);
}

TEST_F(DaemonRulesTest, ARunningAttemptIsReadoptedAndFinishesLater) {
  std::string id = Submit({});
  Step();
  Open();
  EXPECT_EQ(Get(id).state, RunState::kRunning);
  backend_.Exit(id, 1);
  Step();
  EXPECT_EQ(Get(id).state, RunState::kFailed);
}

// A daemon that died after committing `starting` and before launching.
TEST_F(DaemonRulesTest, AnAttemptNeverLaunchedIsRequeuedWithoutARetry) {
  std::string id = Submit({{"retry", 1}});
  daemon_.reset();
  {
    auto store = state::RunStore::Open(home_ + "/lathe.db");
    ASSERT_TRUE(store.ok());
    auto r = (*store)->Get(id);
    ASSERT_TRUE(r.ok());
    r->attempt = 1;
    r->backend = "fake";
    ASSERT_TRUE((*store)->Transition(*r, RunState::kStarting, "placed", 2).ok());
  }
  Open();
  RunRecord r = Get(id);
  EXPECT_EQ(r.state, RunState::kQueued);
  EXPECT_EQ(r.retries_used, 0);
  Step();
  EXPECT_EQ(Get(id).state, RunState::kRunning);
  EXPECT_TRUE(backend_.Get(id, 2));
}

// A backend that answers "never started" for an attempt that was running
// cannot be believed into a requeue: the program may have run.
TEST_F(DaemonRulesTest, ARunningAttemptTheBackendDoesNotKnowIsLost) {
  std::string id = Submit({});
  Step();
  backend_.readopt_as = exec::Found::kNeverStarted;
  Open();
  EXPECT_EQ(Get(id).state, RunState::kLost);
}

TEST_F(DaemonRulesTest, ADeadlineStopsTheRunAndFailsIt) {
  std::string id = Submit({{"max_duration", "60s"}});
  Step();
  clock_.Advance(59'000);
  Step();
  EXPECT_TRUE(backend_.Get(id, 1)->signals.empty());
  clock_.Advance(2'000);
  Step(2);
  auto a = backend_.Get(id, 1);
  ASSERT_FALSE(a->signals.empty());
  EXPECT_EQ(a->signals[0], StopSignal::kGraceful);
  RunRecord r = Get(id);
  EXPECT_EQ(r.state, RunState::kFailed);
  EXPECT_NE(r.reason.find("max_duration"), std::string::npos) << r.reason;
}

TEST_F(DaemonRulesTest, AStopIgnoredForTheGraceIsEscalatedToAKill) {
  backend_.exit_on_signal = false;  // a program that ignores SIGTERM
  std::string id = Submit({});
  Step();
  ASSERT_TRUE(daemon_->StopRun(me_, id).ok());
  Step();
  EXPECT_EQ(backend_.Get(id, 1)->signals, std::vector<StopSignal>{StopSignal::kGraceful});
  clock_.Advance(5'001);
  Step();
  EXPECT_EQ(backend_.Get(id, 1)->signals,
            (std::vector<StopSignal>{StopSignal::kGraceful, StopSignal::kKill}));
  backend_.KillBySignal(id, 9);
  Step();
  EXPECT_EQ(Get(id).state, RunState::kStopped);
}

TEST_F(DaemonRulesTest, AStartErrorFailsTheRunWithoutARetry) {
  backend_.start_error = "command not found: train";
  std::string id = Submit({{"retry", 3}});
  Step();
  RunRecord r = Get(id);
  EXPECT_EQ(r.state, RunState::kFailed);
  EXPECT_EQ(r.reason, "command not found: train");
  EXPECT_EQ(backend_.Launches(id), 1);
}

TEST_F(DaemonRulesTest, ASpecTheBackendCannotHonourIsRefusedAtSubmission) {
  backend_.check = Status::Msg(Code::kInvalidArgument, "spec.limit_unavailable",
                               {{"field", "memory"}, {"controller", "memory"}, {"note", "none"}});
  auto s = daemon_->Submit(me_, Json{{"command", {"x"}}, {"workdir", "/tmp"}});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().msg_id(), "spec.limit_unavailable");
  int64_t total = 0;
  auto list = daemon_->List(true, 10, &total);
  ASSERT_TRUE(list.ok());
  EXPECT_EQ(total, 0);
}

// A backend that places runs itself (a cluster) gets every queued run at
// once, without this node's GPUs; the node's size does not limit the spec.
TEST_F(DaemonRulesTest, ABackendThatPlacesRunsGetsThemAllWithoutANodePlacement) {
  backend_.caps.places_runs = true;
  std::string a = Submit({{"gpus", 1}});
  std::string b = Submit({{"gpus", 1}});
  std::string big = Submit({{"gpus", 8}});  // more than this node has
  Step();
  for (const auto& id : {a, b, big}) EXPECT_EQ(Get(id).state, RunState::kStarting) << id;
  Step();  // the cluster says they run
  for (const auto& id : {a, b, big}) {
    EXPECT_EQ(Get(id).state, RunState::kRunning) << id;
    auto at = backend_.Get(id, 1);
    ASSERT_TRUE(at) << id;
    EXPECT_TRUE(at->request.gpus.empty()) << id;
  }
}

TEST_F(DaemonRulesTest, AnActiveRunReportsItsBackendsEndpoints) {
  backend_.endpoints = {{"p8888", "tcp", "127.0.0.1:8888"}};
  std::string id = Submit({});
  Step();
  Json e = daemon_->EndpointsJson(Get(id));
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0]["address"], "127.0.0.1:8888");
  backend_.Exit(id, 0);
  Step();
  EXPECT_TRUE(daemon_->EndpointsJson(Get(id)).empty());  // ended: nothing to reach
}

// Submissions against a full node: a run that cannot start does not cost a
// scheduling pass over the whole queue (each pass reads every queued run, so
// one per submission made submitting cost grow with the queue). One that
// could start, preempt, or a change of what runs, still gets its pass at once.
TEST_F(DaemonRulesTest, ASubmissionThatCannotStartCostsNoPassOverTheQueue) {
  std::string blocker = Submit({{"gpus", 1}});
  Step();
  ASSERT_EQ(Get(blocker).state, RunState::kRunning);
  Step();  // its start was a change: one more pass, with an empty queue
  const uint64_t passes = daemon_->SchedulingPasses();
  std::vector<std::string> waiting;
  for (int i = 0; i < 30; ++i) {
    waiting.push_back(Submit({{"gpus", 1}, {"priority", "low"}}));
    daemon_->StepForTest(/*force_pass=*/false);
  }
  // The first found no room to judge by (no pass since the queue was
  // empty); the other 29 were judged without a pass.
  EXPECT_EQ(daemon_->SchedulingPasses(), passes + 1);
  for (const std::string& id : waiting) {
    EXPECT_EQ(Get(id).state, RunState::kQueued);
    EXPECT_NE(daemon_->WaitingWhy(id).find("needs 1 GPU, 0 free"), std::string::npos)
        << id << ": " << daemon_->WaitingWhy(id);
  }
  // A run that fits (no GPU) gets its pass and starts at once.
  std::string cpu_only = Submit({{"gpus", 0}});
  daemon_->StepForTest(false);
  EXPECT_EQ(daemon_->SchedulingPasses(), passes + 2);
  EXPECT_EQ(Get(cpu_only).state, RunState::kRunning);
  daemon_->StepForTest(false);  // its start: a change, one pass
  const uint64_t after_start = daemon_->SchedulingPasses();
  // A higher priority than the (preemptible) blocker: a pass, which preempts it.
  std::string urgent = Submit({{"gpus", 1}, {"priority", "high"}});
  daemon_->StepForTest(false);
  EXPECT_EQ(daemon_->SchedulingPasses(), after_start + 1);
  EXPECT_EQ(daemon_->WaitingOn(urgent), "preempting");
  // Nothing new: no pass until the period has passed.
  daemon_->StepForTest(false);
  daemon_->StepForTest(false);
  const uint64_t quiet = daemon_->SchedulingPasses();
  daemon_->StepForTest(false);
  EXPECT_EQ(daemon_->SchedulingPasses(), quiet);
  clock_.Advance(kFullPassEveryMs);
  daemon_->StepForTest(false);
  EXPECT_EQ(daemon_->SchedulingPasses(), quiet + 1);
}

}  // namespace
}  // namespace lathe::daemon

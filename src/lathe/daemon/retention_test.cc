// Retention: which finished runs go (the pure selection), and the daemon's
// prune and policy against a fake backend and a fake clock.
#include "lathe/daemon/retention.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "lathe/daemon/daemon.h"
#include "lathe/exec/test_util/fake_backend.h"
#include "lathe/os/test_util/fake_clock.h"

namespace lathe::daemon {
namespace {

using run::RunState;
using state::RunRecord;

constexpr int64_t kDayMs = 24LL * 3600 * 1000;
constexpr int64_t kNow = 1'700'000'000'000;

RunRecord Rec(const std::string& id, RunState s, int64_t finished, uid_t uid = 1000,
              int64_t created = kNow - 100 * kDayMs) {
  RunRecord r;
  r.id = id;
  r.uid = uid;
  r.state = s;
  r.created_at_ms = created;
  r.finished_at_ms = finished;
  return r;
}

std::vector<std::string> Ids(const std::vector<RunRecord>& runs) {
  std::vector<std::string> out;
  for (const auto& r : runs) out.push_back(r.id);
  return out;
}

TEST(SelectForRemoval, TakesFinishedRunsThatEndedBeforeTheAgeOldestFirst) {
  std::vector<RunRecord> runs = {
      Rec("new", RunState::kSucceeded, kNow - 1 * kDayMs),
      Rec("old-b", RunState::kFailed, kNow - 40 * kDayMs),
      Rec("edge", RunState::kStopped, kNow - 30 * kDayMs),  // exactly 30 days: goes
      Rec("old-a", RunState::kLost, kNow - 60 * kDayMs),
      Rec("queued", RunState::kQueued, 0),  // created 100 days ago, never ended
      Rec("running", RunState::kRunning, 0),
      Rec("stopping", RunState::kStopping, 0),
      Rec("legacy", RunState::kSucceeded, 0, 1000, kNow - 50 * kDayMs),  // end unrecorded
  };
  PruneRequest req;
  req.older_than_ms = 30 * kDayMs;
  EXPECT_EQ(Ids(SelectForRemoval(runs, req, kNow)),
            (std::vector<std::string>{"old-a", "legacy", "old-b", "edge"}));
  // A day earlier, "edge" is a day too young.
  EXPECT_EQ(Ids(SelectForRemoval(runs, req, kNow - kDayMs)),
            (std::vector<std::string>{"old-a", "legacy", "old-b"}));
  req.limit = 2;
  EXPECT_EQ(Ids(SelectForRemoval(runs, req, kNow)), (std::vector<std::string>{"old-a", "legacy"}));
  // 0: every finished run, never a queued or active one.
  req = PruneRequest{};
  EXPECT_EQ(SelectForRemoval(runs, req, kNow).size(), 5u);
}

TEST(SelectForRemoval, KeepsToTheUserAskedFor) {
  std::vector<RunRecord> runs = {Rec("mine", RunState::kSucceeded, kNow - 2 * kDayMs, 1000),
                                 Rec("theirs", RunState::kSucceeded, kNow - 2 * kDayMs, 1001)};
  PruneRequest req;
  req.older_than_ms = kDayMs;
  req.uid = 1001;
  EXPECT_EQ(Ids(SelectForRemoval(runs, req, kNow)), std::vector<std::string>{"theirs"});
  req.uid.reset();
  EXPECT_EQ(SelectForRemoval(runs, req, kNow).size(), 2u);
}

class RetentionDaemonTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/lathe-retention-test-XXXXXX";
    home_ = ::mkdtemp(tmpl);
  }
  void TearDown() override {
    daemon_.reset();
    std::filesystem::remove_all(home_);
  }

  void Open(RetentionPolicy policy = {}) {
    daemon_.reset();
    DaemonOptions o;
    o.home = home_;
    o.gpus = "none";
    o.backend = &backend_;
    o.poll_ms = 10;
    o.retention = policy;
    auto d = Daemon::Create(o, clock_);
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    daemon_ = std::move(d).value();
  }

  std::string Submit() {
    auto s = daemon_->Submit(me_, {{"command", {"train"}}, {"workdir", "/tmp"}});
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return s.ok() ? s->run.id : "";
  }
  // A run that ran and succeeded now (by the fake clock).
  std::string Finished() {
    std::string id = Submit();
    daemon_->StepForTest();
    backend_.Exit(id, 0);
    daemon_->StepForTest();
    EXPECT_EQ(State(id), RunState::kSucceeded);
    return id;
  }
  std::optional<RunState> State(const std::string& id) {
    auto r = daemon_->Access(me_, id, AccessAction::kRead);
    if (!r.ok()) return std::nullopt;
    return r->state;
  }
  // Three runs: `old_` ended 10 days ago, `recent_` 1 day ago, `running_` runs.
  void ThreeRuns() {
    old_ = Finished();
    clock_.Advance(9 * kDayMs);
    recent_ = Finished();
    running_ = Submit();
    daemon_->StepForTest();
    ASSERT_EQ(State(running_), RunState::kRunning);
    clock_.Advance(kDayMs);
  }

  std::string home_;
  os::FakeClock clock_;
  exec::FakeBackend backend_;
  std::unique_ptr<Daemon> daemon_;
  Caller me_{::geteuid(), "me", false};
  std::string old_, recent_, running_;
};

TEST_F(RetentionDaemonTest, PruneRemovesExactlyTheOldFinishedRunsAndDryRunNothing) {
  Open();
  ThreeRuns();
  PruneRequest req;
  req.older_than_ms = 5 * kDayMs;
  req.uid = me_.uid;
  req.dry_run = true;
  auto dry = daemon_->PruneRuns(me_, req);
  ASSERT_TRUE(dry.ok()) << dry.status().ToString();
  ASSERT_EQ((*dry)["removed"].size(), 1u);
  EXPECT_EQ((*dry)["removed"][0]["id"], old_);
  EXPECT_EQ((*dry)["kept"], 1);
  EXPECT_EQ(State(old_), RunState::kSucceeded);  // still there

  req.dry_run = false;
  auto out = daemon_->PruneRuns(me_, req);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ASSERT_EQ((*out)["removed"].size(), 1u);
  EXPECT_EQ((*out)["removed"][0]["id"], old_);
  EXPECT_FALSE(State(old_).has_value());
  EXPECT_EQ(State(recent_), RunState::kSucceeded);
  EXPECT_EQ(State(running_), RunState::kRunning);

  // 0: every finished run, still not the running one.
  req.older_than_ms = 0;
  out = daemon_->PruneRuns(me_, req);
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)["removed"].size(), 1u);
  EXPECT_FALSE(State(recent_).has_value());
  EXPECT_EQ(State(running_), RunState::kRunning);
}

TEST_F(RetentionDaemonTest, OnlyAnAdminPrunesOtherUsersRuns) {
  Open();
  ThreeRuns();
  PruneRequest req;  // everyone's
  auto s = daemon_->PruneRuns(me_, req);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().msg_id(), "run.prune_others");
  req.uid = me_.uid + 1;
  EXPECT_EQ(daemon_->PruneRuns(me_, req).status().msg_id(), "run.prune_others");
  EXPECT_EQ(State(old_), RunState::kSucceeded);
  Caller admin{me_.uid + 1, "admin", true};
  req.uid.reset();
  auto out = daemon_->PruneRuns(admin, req);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)["removed"].size(), 2u);
}

TEST_F(RetentionDaemonTest, ThePolicyRemovesWhatItSaysAndZeroKeepsEverything) {
  Open();
  ThreeRuns();
  auto none = daemon_->ApplyRetention();
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE((*none)["removed"].empty());
  EXPECT_EQ(State(old_), RunState::kSucceeded);

  Open({.finished_runs_ms = 7 * kDayMs, .snapshots = true});  // a restart with a policy
  auto out = daemon_->ApplyRetention();
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ASSERT_EQ((*out)["removed"].size(), 1u);
  EXPECT_FALSE(State(old_).has_value());
  EXPECT_EQ(State(recent_), RunState::kSucceeded);
  EXPECT_EQ(State(running_), RunState::kRunning);
}

TEST_F(RetentionDaemonTest, TheSupervisorLoopAppliesThePolicy) {
  Open({.finished_runs_ms = 7 * kDayMs});
  ThreeRuns();
  ASSERT_TRUE(daemon_->Start().ok());
  for (int i = 0; i < 1000 && State(old_).has_value(); ++i) daemon_->WaitForChange(100);
  EXPECT_FALSE(State(old_).has_value());
  EXPECT_EQ(State(recent_), RunState::kSucceeded);
  // An hour later (by the fake clock) the next pass takes the one that aged.
  clock_.Advance(7 * kDayMs);
  daemon_->Kick();
  for (int i = 0; i < 1000 && State(recent_).has_value(); ++i) daemon_->WaitForChange(100);
  EXPECT_FALSE(State(recent_).has_value());
  EXPECT_EQ(State(running_), RunState::kRunning);
  daemon_->Stop();
}

}  // namespace
}  // namespace lathe::daemon

#include "lathe/daemon/daemon.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>

#include "lathe/exec/attempt_records.h"
#include "lathe/os/cgroup.h"
#include "lathe/os/clock.h"
#include "lathe/os/files.h"
#include "lathe/os/test_util/dead_pid.h"
#include "lathe/state/run_store.h"

namespace lathe::daemon {
namespace {

using run::RunState;
using state::RunRecord;

using os::DeadPid;

class DaemonRecoveryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/lathe-daemon-test-XXXXXX";
    home_ = ::mkdtemp(tmpl);
  }
  void TearDown() override { std::filesystem::remove_all(home_); }

  // A run recorded as running on a monitor that has gone (the daemon was
  // killed, then the monitor ended), as a daemon killed mid-run leaves it.
  RunRecord RunningWithGoneMonitor() {
    auto store = state::RunStore::Open(home_ + "/lathe.db");
    EXPECT_TRUE(store.ok()) << store.status().ToString();
    RunRecord r;
    r.id = "r-recover";
    r.name = r.id;
    r.uid = ::geteuid();
    r.user = "me";
    r.spec.command = {"sh", "-c", "exit 1"};
    r.run_dir = home_ + "/runs/" + r.id;
    EXPECT_TRUE((*store)->Insert(r, 1).ok());
    r.attempt = 1;
    EXPECT_TRUE((*store)->Transition(r, RunState::kStarting, "placed", 2).ok());
    pid_t dead = DeadPid();
    r.handle = {{"monitor_pid", dead}, {"monitor_start", 1}, {"child_pid", dead}};
    EXPECT_TRUE((*store)->Transition(r, RunState::kRunning, "started", 3).ok());
    std::string dir = r.run_dir + "/attempt-1";
    EXPECT_TRUE(os::MakeDirs(dir, 0700).ok());
    Json mon = {{"monitor_pid", dead}, {"monitor_start", 1}, {"child_pid", dead}};
    EXPECT_TRUE(os::WriteFileAtomic(dir + "/monitor.json", mon.dump()).ok());
    return r;
  }

  Result<std::unique_ptr<Daemon>> Open(os::Env* env) {
    DaemonOptions o;
    o.home = home_;
    o.gpus = "none";
    o.env = env;
    return Daemon::Create(o, os::RealClock());
  }

  std::string home_;
};

// Makes exit.json appear just after the daemon's first look for it, as a
// monitor does that writes it and exits while the daemon is starting.
class ExitAppearsAfterFirstRead : public os::EnvWrapper {
 public:
  ExitAppearsAfterFirstRead() : os::EnvWrapper(os::RealEnv()) {}
  Result<std::string> ReadFile(const std::string& path) override {
    bool exit_json = path.size() >= 10 && path.compare(path.size() - 10, 10, "/exit.json") == 0;
    if (exit_json && !written_.exchange(true)) {
      exec::ExitRecord e;
      e.exit_code = 1;
      e.finished_at_ms = 5;
      EXPECT_TRUE(os::WriteFileAtomic(path, exec::ExitToJson(e).dump()).ok());
      return Status::NotFound(path);  // what the daemon saw an instant before
    }
    return target().ReadFile(path);
  }
  bool ProcessAlive(pid_t, std::optional<uint64_t>) override { return false; }  // it has exited

 private:
  std::atomic<bool> written_{false};
};

TEST_F(DaemonRecoveryTest, ARunWhoseExitIsWrittenDuringRecoveryFinishesInsteadOfBeingLost) {
  RunRecord r = RunningWithGoneMonitor();
  ExitAppearsAfterFirstRead env;
  auto d = Open(&env);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  auto got = (*d)->Access(Caller{0, "root", true}, r.id, AccessAction::kRead);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->state, RunState::kFailed) << got->reason;
  ASSERT_TRUE(got->exit_code.has_value());
  EXPECT_EQ(*got->exit_code, 1);
}

TEST_F(DaemonRecoveryTest, ARunWithNeitherMonitorNorExitIsLost) {
  RunRecord r = RunningWithGoneMonitor();
  os::EnvWrapper env(os::RealEnv());
  auto d = Open(&env);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  auto got = (*d)->Access(Caller{0, "root", true}, r.id, AccessAction::kRead);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->state, RunState::kLost);
}

// A daemon killed after creating an attempt's cgroups but before starting its
// monitor: the run is requeued and the cgroups, never recorded, are removed.
TEST_F(DaemonRecoveryTest, CgroupsOfAnAttemptThatNeverStartedAreRemoved) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root for cgroups";
  os::CgroupSupport support = os::DetectCgroups();
  if (support.mode == os::CgroupSupport::Mode::kNone)
    GTEST_SKIP() << "no cgroups: " << support.note;
  RunRecord r;
  {
    auto store = state::RunStore::Open(home_ + "/lathe.db");
    ASSERT_TRUE(store.ok());
    r.id = "r-nostart";
    r.name = r.id;
    r.uid = ::geteuid();
    r.spec.command = {"true"};
    r.run_dir = home_ + "/runs/" + r.id;
    ASSERT_TRUE((*store)->Insert(r, 1).ok());
    r.attempt = 1;
    ASSERT_TRUE((*store)->Transition(r, RunState::kStarting, "placed", 2).ok());
  }
  auto cg = os::RunCgroup::Create(support, r.id + "-1", os::CgroupLimits{});
  ASSERT_TRUE(cg.ok()) << cg.status().ToString();
  std::vector<std::string> dirs = (*cg)->dirs();
  ASSERT_FALSE(dirs.empty());
  cg->reset();
  auto d = Open(nullptr);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  auto got = (*d)->Access(Caller{0, "root", true}, r.id, AccessAction::kRead);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->state, RunState::kQueued);
  for (const auto& dir : dirs) EXPECT_FALSE(std::filesystem::exists(dir)) << dir;
}

// The database holds every run's spec and environment: 0600 in a new home,
// and repaired in an old one whose files were left readable.
TEST_F(DaemonRecoveryTest, TheDatabaseAndItsSideFilesAreOwnerOnly) {
  for (int round = 0; round < 2; ++round) {
    {
      auto d = Open(nullptr);
      ASSERT_TRUE(d.ok()) << d.status().ToString();
      auto sub = (*d)->Submit(Caller{::geteuid(), "me", true},
                              Json{{"command", {"true"}}, {"workdir", "/tmp"}});
      ASSERT_TRUE(sub.ok()) << sub.status().ToString();
      for (const char* f : {"lathe.db", "lathe.db-wal", "lathe.db-shm"}) {
        struct stat st;
        ASSERT_EQ(::stat((home_ + "/" + f).c_str(), &st), 0) << f;
        EXPECT_EQ(st.st_mode & 0777, 0600u) << f << " in round " << round;
      }
      struct stat st;
      ASSERT_EQ(::stat((home_ + "/store").c_str(), &st), 0);
      EXPECT_EQ(st.st_mode & 0777, 0700u);
    }
    // An older Lathe left them world-readable; the next start repairs them.
    for (const char* f : {"lathe.db", "lathe.db-wal", "lathe.db-shm"}) {
      ::chmod((home_ + "/" + f).c_str(), 0644);
    }
  }
}

// A run of project ml that held 2 GPUs for an hour, then was removed: a
// daemon started afterwards (a restart) still counts its GPU-hours toward
// the project, from the ledger alone.
TEST_F(DaemonRecoveryTest, ARemovedRunStillCountsTowardItsProjectAfterARestart) {
  constexpr int64_t kHourMs = 3600 * 1000;
  const int64_t now = os::RealClock().NowMs();
  {
    auto store = state::RunStore::Open(home_ + "/lathe.db");
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    RunRecord r;
    r.id = "r-gone";
    r.name = r.id;
    r.uid = ::geteuid();
    r.user = "me";
    r.spec.command = {"true"};
    r.spec.gpus = 2;
    r.spec.project = "ml";
    r.run_dir = home_ + "/runs/" + r.id;
    ASSERT_TRUE((*store)->Insert(r, now - 3 * kHourMs).ok());
    r.attempt = 1;
    r.started_at_ms = now - 2 * kHourMs;
    ASSERT_TRUE((*store)->Transition(r, RunState::kStarting, "placed", r.started_at_ms).ok());
    ASSERT_TRUE((*store)->Transition(r, RunState::kRunning, "started", r.started_at_ms).ok());
    r.finished_at_ms = now - kHourMs;
    ASSERT_TRUE((*store)->Transition(r, RunState::kSucceeded, "exited", r.finished_at_ms).ok());
    ASSERT_TRUE((*store)->Delete(r.id).ok());
  }
  auto d = Open(nullptr);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  Json usage = (*d)->ProjectUsage("ml");
  EXPECT_NEAR(usage["gpu_hours"].get<double>(), 2.0, 1e-6) << usage.dump();
  EXPECT_NEAR(usage["gpu_hours_by_user"]["me"].get<double>(), 2.0, 1e-6) << usage.dump();
  EXPECT_EQ(usage["runs_active"], 0);
  EXPECT_NEAR((*d)->ProjectUsage("other")["gpu_hours"].get<double>(), 0.0, 1e-9);
}

}  // namespace
}  // namespace lathe::daemon

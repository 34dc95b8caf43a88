#include "lathe/exec/local_backend.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>

#include "lathe/os/files.h"
#include "lathe/os/process.h"
#include "lathe/os/test_util/dead_pid.h"
#include "lathe/os/test_util/fake_clock.h"

namespace lathe::exec {
namespace {

using os::DeadPid;

class LocalBackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/lathe-local-backend-XXXXXX";
    dir_ = ::mkdtemp(tmpl);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  LocalBackend Make(os::CgroupSupport cg = {}, bool can_mount = false) {
    LocalBackendOptions o;
    o.cgroups = std::move(cg);
    o.can_mount = can_mount;
    o.daemon_user = "lathe";
    o.clock = &clock_;
    return LocalBackend(o);
  }
  AttemptRef Ref(Json handle = Json::object()) {
    AttemptRef a;
    a.run_id = "r-x";
    a.attempt = 1;
    a.attempt_dir = dir_;
    a.handle = std::move(handle);
    return a;
  }
  void Write(const std::string& name, const Json& j) {
    ASSERT_TRUE(os::WriteFileAtomic(dir_ + "/" + name, j.dump()).ok());
  }

  std::string dir_;
  os::FakeClock clock_;
};

TEST_F(LocalBackendTest, TheHandleRoundTripsAndToleratesMissingFields) {
  LocalHandle h{42,
                777,
                43,
                {"/sys/fs/cgroup/pids/lathe/r-x-1"},
                {{"p8888", "tcp", "127.0.0.1:8888"}, {"web", "unix", "/home/u/web.sock"}}};
  LocalHandle back = LocalHandleFromJson(LocalHandleToJson(h));
  ASSERT_EQ(back.endpoints.size(), 2u);
  EXPECT_EQ(back.endpoints[1].name, "web");
  EXPECT_EQ(back.endpoints[1].kind, "unix");
  EXPECT_EQ(back.endpoints[1].address, "/home/u/web.sock");
  EXPECT_EQ(back.monitor_pid, 42);
  EXPECT_EQ(back.monitor_start, 777u);
  EXPECT_EQ(back.child_pid, 43);
  EXPECT_EQ(back.cgroup_dirs, h.cgroup_dirs);
  LocalHandle empty = LocalHandleFromJson(Json::object());
  EXPECT_EQ(empty.monitor_pid, 0);
  EXPECT_TRUE(empty.cgroup_dirs.empty());
  EXPECT_EQ(LocalHandleFromJson(Json("junk")).monitor_pid, 0);
}

TEST_F(LocalBackendTest, LimitsWithoutTheirControllerAreRefusedNamingTheField) {
  os::CgroupSupport cg;
  cg.note = "memory: not mounted";
  LocalBackend b = Make(cg);
  run::RunSpec spec;
  spec.command = {"x"};
  EXPECT_TRUE(b.Check(spec, RunUser{}).ok());
  spec.memory_bytes = 1 << 30;
  Status st = b.Check(spec, RunUser{});
  EXPECT_EQ(st.msg_id(), "spec.limit_unavailable");
  EXPECT_NE(st.message().find("memory"), std::string::npos) << st.message();
  spec.memory_bytes = 0;
  spec.shm_bytes = 1 << 20;
  EXPECT_EQ(b.Check(spec, RunUser{}).msg_id(), "spec.shm_needs_root");
  EXPECT_FALSE(b.Caps().memory_limit);
  EXPECT_FALSE(b.Caps().places_runs);
  cg.memory = true;
  spec.shm_bytes = 0;
  spec.memory_bytes = 1 << 30;
  EXPECT_TRUE(Make(cg, true).Check(spec, RunUser{}).ok());
}

TEST_F(LocalBackendTest, AReadOnlyWorkspaceNeedsADaemonRunningAsRoot) {
  run::RunSpec spec;
  spec.command = {"x"};
  spec.workspace.git = "https://h/r.git";
  EXPECT_TRUE(Make().Check(spec, RunUser{}).ok());
  spec.workspace.readonly = true;
  Status st = Make().Check(spec, RunUser{});
  EXPECT_EQ(st.msg_id(), "workspace.readonly_needs_root");
  EXPECT_NE(st.message().find("workspace.readonly"), std::string::npos) << st.message();
  EXPECT_TRUE(Make({}, /*can_mount=*/true).Check(spec, RunUser{}).ok());
}

TEST_F(LocalBackendTest, AnIsolatedNetworkNeedsADaemonRunningAsRoot) {
  run::RunSpec spec;
  spec.command = {"x"};
  spec.network = run::Network::kIsolated;
  LocalBackend user_mode = Make();
  Status st = user_mode.Check(spec, RunUser{});
  EXPECT_EQ(st.msg_id(), "spec.network_needs_root");
  EXPECT_TRUE(st.IsInvalidArgument());
  EXPECT_NE(st.message().find("network"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("lathe"), std::string::npos) << st.message();  // the daemon's user
  EXPECT_FALSE(user_mode.Caps().isolated_network);
  LocalBackend root = Make({}, /*can_mount=*/true);
  EXPECT_TRUE(root.Check(spec, RunUser{}).ok());
  EXPECT_TRUE(root.Caps().isolated_network);
  EXPECT_TRUE(CapabilitiesToJson(root.Caps())["isolated_network"].get<bool>());
}

TEST_F(LocalBackendTest, AnIsolatedRunsTcpEndpointsNameItsNamespace) {
  LocalHandle h;
  h.monitor_pid = 42;
  h.monitor_start = 777;
  h.child_pid = 43;
  h.endpoints = {{"p8888", "tcp", "127.0.0.1:8888"}, {"web", "unix", "/home/u/web.sock"}};
  h.isolated_network = true;
  h.netns_pid = 43;
  h.netns_start = 778;
  LocalHandle back = LocalHandleFromJson(LocalHandleToJson(h));
  EXPECT_TRUE(back.isolated_network);
  EXPECT_EQ(back.netns_pid, 43);
  EXPECT_EQ(back.netns_start, 778u);
  LocalBackend b = Make();
  auto eps = b.Endpoints(Ref(LocalHandleToJson(h)));
  ASSERT_EQ(eps.size(), 2u);
  EXPECT_EQ(eps[0].netns_pid, 43);
  EXPECT_EQ(eps[0].netns_start, 778u);
  EXPECT_EQ(eps[1].netns_pid, 0);  // a unix socket is reached through the file system
  // A run on the host's network names none.
  h.isolated_network = false;
  h.netns_pid = 0;
  h.netns_start = 0;
  EXPECT_FALSE(LocalHandleToJson(h).contains("network"));
  EXPECT_EQ(b.Endpoints(Ref(LocalHandleToJson(h)))[0].netns_pid, 0);
}

TEST_F(LocalBackendTest, PrepareChoosesFreeLoopbackPortsOnTheHostNetworkOnly) {
  LocalBackend b = Make();
  LaunchRequest q;
  q.run_id = "r-x";
  q.attempt = 1;
  q.attempt_dir = dir_;
  q.ports = {{"p6006", 6006, ""}, {"api", 8080, ""}, {"web", 0, "/home/u/web.sock"}};
  auto prepared = b.Prepare(q);
  ASSERT_TRUE(prepared.ok()) << prepared.status().ToString();
  LocalHandle h = LocalHandleFromJson(*prepared);
  ASSERT_EQ(h.endpoints.size(), 3u);
  EXPECT_EQ(h.endpoints[0].name, "p6006");
  EXPECT_EQ(h.endpoints[0].kind, "tcp");
  EXPECT_TRUE(h.endpoints[0].address.starts_with("127.0.0.1:"));
  EXPECT_NE(h.endpoints[0].address, "127.0.0.1:6006");  // one the backend chose, not the declared
  EXPECT_NE(h.endpoints[0].address, h.endpoints[1].address);
  EXPECT_EQ(h.endpoints[2].kind, "unix");
  EXPECT_EQ(h.endpoints[2].address, "/home/u/web.sock");
  // An isolated run has the loopback of its own: the declared ports.
  q.isolated_network = true;
  h = LocalHandleFromJson(*Make({}, /*can_mount=*/true).Prepare(q));
  ASSERT_EQ(h.endpoints.size(), 3u);
  EXPECT_EQ(h.endpoints[0].address, "127.0.0.1:6006");
  EXPECT_EQ(h.endpoints[1].address, "127.0.0.1:8080");
}

TEST_F(LocalBackendTest, ReadoptTakesAnIsolatedRunsNamespaceFromItsMonitorRecord) {
  LocalBackend b = Make();
  Write("launch.json", Json::object());
  const uint64_t me = os::ProcessStartTime(::getpid()).value_or(0);
  Write("monitor.json", Json{{"monitor_pid", ::getpid()},
                             {"monitor_start", me},
                             {"child_pid", 99},
                             {"child_start", 1234}});
  Readoption r = b.Readopt(Ref(Json{{"network", "isolated"}, {"cgroup_dirs", Json::array()}}));
  ASSERT_EQ(r.what, Found::kAlive);
  LocalHandle h = LocalHandleFromJson(r.handle);
  EXPECT_EQ(h.netns_pid, 99);
  EXPECT_EQ(h.netns_start, 1234u);
  // Not isolated: no namespace to enter.
  r = b.Readopt(Ref(Json::object()));
  EXPECT_EQ(LocalHandleFromJson(r.handle).netns_pid, 0);
}

TEST_F(LocalBackendTest, TheEnvironmentLayersBaseRequestAndExactlyThePlacedGpus) {
  LaunchRequest q;
  q.user.name = "ada";
  q.user.home = "/home/ada";
  q.user.shell = "/bin/zsh";
  q.env = {{"PATH", "/opt/bin"}, {"CUDA_VISIBLE_DEVICES", "0,1,2,3"}, {"LATHE_RUN_ID", "r-x"}};
  q.gpus = {2, 5};
  auto env = LocalBackend::Environment(q);
  EXPECT_EQ(env.at("HOME"), "/home/ada");
  EXPECT_EQ(env.at("USER"), "ada");
  EXPECT_EQ(env.at("LOGNAME"), "ada");
  EXPECT_EQ(env.at("PATH"), "/opt/bin");             // the run's own wins over the base
  EXPECT_EQ(env.at("CUDA_VISIBLE_DEVICES"), "2,5");  // the placement wins over the run's
  EXPECT_EQ(env.at("LATHE_RUN_ID"), "r-x");
  q.gpus.clear();
  EXPECT_EQ(LocalBackend::Environment(q).at("CUDA_VISIBLE_DEVICES"), "");  // none visible
}

TEST_F(LocalBackendTest, PollTellsStartingRunningExitedAndGone) {
  LocalBackend b = Make();
  // Still being launched: no monitor in the handle, no exit.
  auto s = b.Poll({Ref()});
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].phase, AttemptPhase::kStarting);
  // A live "monitor" (this process, with its start time).
  LocalHandle me{::getpid(), os::ProcessStartTime(::getpid()).value_or(0), ::getpid(), {}};
  EXPECT_EQ(b.Poll({Ref(LocalHandleToJson(me))})[0].phase, AttemptPhase::kRunning);
  // The same pid with another start time is pid reuse: not ours.
  LocalHandle reused = me;
  reused.monitor_start += 1;
  s = b.Poll({Ref(LocalHandleToJson(reused))});
  EXPECT_EQ(s[0].phase, AttemptPhase::kGone);
  EXPECT_NE(s[0].why.find("monitor"), std::string::npos);
  // exit.json wins over everything.
  ExitRecord e;
  e.exit_code = 7;
  Write("exit.json", ExitToJson(e));
  s = b.Poll({Ref(LocalHandleToJson(reused)), Ref()});
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].phase, AttemptPhase::kExited);
  EXPECT_EQ(*s[0].exit.exit_code, 7);
  EXPECT_EQ(s[1].phase, AttemptPhase::kExited);
}

TEST_F(LocalBackendTest, ReadoptFindsAliveExitedGoneAndNeverStarted) {
  LocalBackend b = Make();
  // Being launched and no launch.json: the monitor was never spawned.
  EXPECT_EQ(b.Readopt(Ref()).what, Found::kNeverStarted);
  // launch.json but no monitor ever answers (the fake clock makes the wait instant).
  Write("launch.json", Json::object());
  EXPECT_EQ(b.Readopt(Ref()).what, Found::kNeverStarted);
  // A monitor that is alive: re-adopted, the handle rebuilt from monitor.json.
  Write("monitor.json", Json{{"monitor_pid", ::getpid()},
                             {"monitor_start", os::ProcessStartTime(::getpid()).value_or(0)},
                             {"child_pid", 99}});
  Readoption r = b.Readopt(Ref());
  EXPECT_EQ(r.what, Found::kAlive);
  EXPECT_EQ(LocalHandleFromJson(r.handle).monitor_pid, ::getpid());
  EXPECT_EQ(LocalHandleFromJson(r.handle).child_pid, 99);
  // A monitor that died without an exit record: gone.
  pid_t dead = DeadPid();
  Write("monitor.json", Json{{"monitor_pid", dead}, {"monitor_start", 1}, {"child_pid", dead}});
  r = b.Readopt(Ref(LocalHandleToJson(LocalHandle{dead, 1, dead, {}})));
  EXPECT_EQ(r.what, Found::kGone);
  EXPECT_FALSE(r.why.empty());
  // One that recorded its exit: exited.
  ExitRecord e;
  e.signal = 9;
  Write("exit.json", ExitToJson(e));
  r = b.Readopt(Ref(LocalHandleToJson(LocalHandle{dead, 1, dead, {}})));
  EXPECT_EQ(r.what, Found::kExited);
  EXPECT_EQ(*r.exit.signal, 9);
}

TEST_F(LocalBackendTest, SignalBeforeTheMonitorIsKnownDoesNothing) {
  LocalBackend b = Make();
  EXPECT_TRUE(b.Signal(Ref(), StopSignal::kKill).ok());
  EXPECT_EQ(b.LogPath("/var/lib/lathe/runs/r-x"), "/var/lib/lathe/runs/r-x/log");
  EXPECT_TRUE(b.Endpoints(Ref()).empty());
}

}  // namespace
}  // namespace lathe::exec

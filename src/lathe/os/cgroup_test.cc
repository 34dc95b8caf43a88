#include "lathe/os/cgroup.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "lathe/common/ids.h"

namespace lathe::os {
namespace {

namespace fs = std::filesystem;

// ---- A fake cgroup tree in a temporary directory -------------------------------

class FakeTree {
 public:
  FakeTree() {
    char tmpl[] = "/tmp/lathe-cgroup-test-XXXXXX";
    root_ = ::mkdtemp(tmpl);
  }
  ~FakeTree() {
    std::error_code ec;
    fs::remove_all(root_, ec);
  }
  // Writes `content` to root/<rel>, creating directories.
  void File(const std::string& rel, const std::string& content) {
    fs::create_directories(fs::path(Abs(rel)).parent_path());
    std::ofstream(Abs(rel)) << content;
  }
  std::string Read(const std::string& rel) const {
    std::ifstream in(Abs(rel));
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  std::string Abs(const std::string& rel) const { return root_ + rel; }
  CgroupPaths Paths() {
    CgroupPaths p;
    p.proc_self_cgroup = Abs("/proc/self/cgroup");
    p.mountinfo = Abs("/proc/self/mountinfo");
    p.prefix = root_;
    return p;
  }

 private:
  std::string root_;
};

constexpr const char* kV1Mounts =
    "30 22 0:27 / /sys/fs/cgroup ro,nosuid - tmpfs tmpfs ro,mode=755\n"
    "31 30 0:28 / /sys/fs/cgroup/systemd rw,nosuid shared:9 - cgroup cgroup rw,xattr,name=systemd\n"
    "32 30 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid shared:10 - cgroup cgroup rw,cpu,cpuacct\n"
    "33 30 0:30 / /sys/fs/cgroup/memory rw,nosuid shared:11 - cgroup cgroup rw,memory\n"
    "34 30 0:31 / /sys/fs/cgroup/pids rw,nosuid shared:12 - cgroup cgroup rw,pids\n";

TEST(DetectCgroupsFake, PureV1) {
  FakeTree t;
  t.File("/proc/self/mountinfo", std::string("25 1 8:1 / / rw - ext4 /dev/sda1 rw\n") + kV1Mounts);
  t.File("/proc/self/cgroup",
         "5:pids:/user.slice/user-1000.slice\n"
         "4:memory:/user.slice/user-1000.slice/session-2.scope\n"
         "3:cpu,cpuacct:/user.slice\n"
         "1:name=systemd:/user.slice/user-1000.slice/session-2.scope\n");
  // What the kernel would create in each new `lathe` directory.
  t.File(
      "/sys/fs/cgroup/memory/user.slice/user-1000.slice/session-2.scope/lathe/"
      "memory.limit_in_bytes",
      "");
  t.File("/sys/fs/cgroup/cpu,cpuacct/user.slice/lathe/cpu.cfs_quota_us", "-1");
  t.File("/sys/fs/cgroup/pids/user.slice/user-1000.slice/lathe/pids.max", "max");

  CgroupSupport s = DetectCgroups(t.Paths());
  EXPECT_EQ(s.mode, CgroupSupport::Mode::kV1);
  EXPECT_TRUE(s.memory && s.cpu && s.pids) << s.note;
  EXPECT_EQ(s.memory_base,
            t.Abs("/sys/fs/cgroup/memory/user.slice/user-1000.slice/session-2.scope/lathe"));
  EXPECT_EQ(s.cpu_base, t.Abs("/sys/fs/cgroup/cpu,cpuacct/user.slice/lathe"));
  EXPECT_EQ(s.pids_base, t.Abs("/sys/fs/cgroup/pids/user.slice/user-1000.slice/lathe"));
  EXPECT_EQ(s.note, "");
}

TEST(DetectCgroupsFake, V1WithoutCfsBandwidthHasNoCpu) {
  FakeTree t;
  t.File("/proc/self/mountinfo", kV1Mounts);
  t.File("/proc/self/cgroup", "5:pids:/\n4:memory:/\n3:cpu,cpuacct:/\n");
  t.File("/sys/fs/cgroup/memory/lathe/memory.limit_in_bytes", "");
  t.File("/sys/fs/cgroup/pids/lathe/pids.max", "max");
  fs::create_directories(t.Abs("/sys/fs/cgroup/cpu,cpuacct"));  // no cpu.cfs_quota_us in it
  CgroupSupport s = DetectCgroups(t.Paths());
  EXPECT_EQ(s.mode, CgroupSupport::Mode::kV1);
  EXPECT_TRUE(s.memory);
  EXPECT_TRUE(s.pids);
  EXPECT_FALSE(s.cpu);
  EXPECT_EQ(s.cpu_base, "");
  EXPECT_NE(s.note.find("cpu: cgroup v1:"), std::string::npos) << s.note;
  EXPECT_NE(s.note.find("cpu.cfs_quota_us is missing"), std::string::npos) << s.note;
}

TEST(DetectCgroupsFake, V1MountOfASubtree) {
  // A container without a cgroup namespace: the host's /docker/abc is mounted
  // at the container's /sys/fs/cgroup/memory, and a space is escaped.
  FakeTree t;
  t.File("/proc/self/mountinfo",
         "40 30 0:31 /docker/abc /sys/fs/cgroup/mem\\040ory rw - cgroup cgroup rw,memory\n");
  t.File("/proc/self/cgroup", "4:memory:/docker/abc\n");
  t.File("/sys/fs/cgroup/mem ory/lathe/memory.limit_in_bytes", "");
  CgroupSupport s = DetectCgroups(t.Paths());
  EXPECT_TRUE(s.memory) << s.note;
  EXPECT_EQ(s.memory_base, t.Abs("/sys/fs/cgroup/mem ory/lathe"));
  EXPECT_FALSE(s.pids);
  EXPECT_NE(s.note.find("pids: no cgroup hierarchy has this controller"), std::string::npos)
      << s.note;
}

constexpr const char* kV2Own = "/sys/fs/cgroup/system.slice/lathe.service";

TEST(DetectCgroupsFake, PureV2) {
  FakeTree t;
  t.File("/proc/self/mountinfo",
         "25 1 8:1 / / rw - ext4 /dev/sda1 rw\n"
         "30 22 0:26 / /sys/fs/cgroup rw,nosuid shared:4 - cgroup2 cgroup2 rw,nsdelegate\n");
  t.File("/proc/self/cgroup", "0::/system.slice/lathe.service\n");
  std::string own = kV2Own;
  t.File(own + "/cgroup.controllers", "cpuset cpu io memory pids\n");
  t.File(own + "/cgroup.subtree_control", "cpu memory\n");  // pids not yet enabled
  t.File(own + "/lathe/cgroup.controllers", "cpu memory pids\n");
  t.File(own + "/lathe/cgroup.subtree_control", "");

  CgroupSupport s = DetectCgroups(t.Paths());
  EXPECT_EQ(s.mode, CgroupSupport::Mode::kV2);
  EXPECT_TRUE(s.memory && s.cpu && s.pids) << s.note;
  EXPECT_EQ(s.memory_base, t.Abs(own + "/lathe"));
  EXPECT_EQ(s.cpu_base, s.memory_base);
  EXPECT_EQ(s.pids_base, s.memory_base);
  EXPECT_EQ(t.Read(own + "/cgroup.subtree_control"), "+pids");  // DetectCgroups enabled it
  EXPECT_EQ(s.note, "");
}

TEST(DetectCgroupsFake, V2WithMemoryOnly) {
  FakeTree t;
  t.File("/proc/self/mountinfo", "30 22 0:26 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n");
  t.File("/proc/self/cgroup", "0::/system.slice/lathe.service\n");
  std::string own = kV2Own;
  t.File(own + "/cgroup.controllers", "memory\n");
  t.File(own + "/cgroup.subtree_control", "memory\n");
  t.File(own + "/lathe/cgroup.subtree_control", "memory\n");
  CgroupSupport s = DetectCgroups(t.Paths());
  EXPECT_EQ(s.mode, CgroupSupport::Mode::kV2);
  EXPECT_TRUE(s.memory);
  EXPECT_FALSE(s.cpu);
  EXPECT_FALSE(s.pids);
  EXPECT_EQ(s.memory_base, t.Abs(own + "/lathe"));
  EXPECT_NE(s.note.find("pids: cgroup v2: pids is not in"), std::string::npos) << s.note;
  EXPECT_NE(s.note.find("cpu: cgroup v2: cpu is not in"), std::string::npos) << s.note;
}

TEST(DetectCgroupsFake, HybridLikeThisMachine) {
  FakeTree t;
  t.File("/proc/self/mountinfo",
         "30 22 0:27 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
         "31 30 0:28 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n"
         "32 30 0:29 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct\n"
         "34 30 0:31 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n"
         "38 30 0:35 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids\n"
         "39 30 0:36 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd\n"
         "40 30 0:37 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n");
  t.File("/proc/self/cgroup",
         "9:name=systemd:/\n8:pids:/\n4:memory:/process_api/c993\n2:cpuacct:/\n1:cpu:/\n0::/\n");
  t.File("/sys/fs/cgroup/unified/cgroup.controllers", "hugetlb\n");
  t.File("/sys/fs/cgroup/unified/cgroup.subtree_control", "");
  t.File("/sys/fs/cgroup/memory/process_api/c993/lathe/memory.limit_in_bytes", "");
  t.File("/sys/fs/cgroup/cpu/lathe/cpu.cfs_quota_us", "-1");
  t.File("/sys/fs/cgroup/pids/lathe/pids.max", "max");

  CgroupSupport s = DetectCgroups(t.Paths());
  EXPECT_EQ(s.mode, CgroupSupport::Mode::kV1);
  EXPECT_TRUE(s.memory && s.cpu && s.pids) << s.note;
  EXPECT_EQ(s.memory_base, t.Abs("/sys/fs/cgroup/memory/process_api/c993/lathe"));
  EXPECT_EQ(s.cpu_base, t.Abs("/sys/fs/cgroup/cpu/lathe"));
  EXPECT_EQ(s.pids_base, t.Abs("/sys/fs/cgroup/pids/lathe"));
  EXPECT_EQ(s.note, "");  // v2 lacked them, but v1 had them: nothing is missing
  // Nothing was created on the v2 side.
  EXPECT_FALSE(fs::exists(t.Abs("/sys/fs/cgroup/unified/lathe")));
}

TEST(DetectCgroupsFake, None) {
  FakeTree t;
  t.File("/proc/self/mountinfo", "25 1 8:1 / / rw - ext4 /dev/sda1 rw\n");
  t.File("/proc/self/cgroup", "0::/\n");
  CgroupSupport s = DetectCgroups(t.Paths());
  EXPECT_EQ(s.mode, CgroupSupport::Mode::kNone);
  EXPECT_FALSE(s.memory || s.cpu || s.pids);
  EXPECT_EQ(s.memory_base, "");
  for (const char* c : {"memory: ", "cpu: ", "pids: "}) {
    EXPECT_NE(s.note.find(c), std::string::npos) << s.note;
  }
}

TEST(DetectCgroupsFake, UnreadableProcFiles) {
  CgroupPaths p;
  p.mountinfo = "/nonexistent/mountinfo";
  CgroupSupport s = DetectCgroups(p);
  EXPECT_EQ(s.mode, CgroupSupport::Mode::kNone);
  EXPECT_NE(s.note.find("/nonexistent/mountinfo"), std::string::npos) << s.note;
}

// ---- RunCgroup over fake trees: which files get which values ----------------------

CgroupSupport FakeV2Support(FakeTree& t, const std::string& run) {
  std::string base = std::string(kV2Own) + "/lathe";
  t.File(base + "/cgroup.controllers", "cpu memory pids\n");
  for (const char* f : {"cgroup.controllers", "cgroup.procs", "memory.max", "memory.swap.max",
                        "memory.oom.group", "cpu.max", "pids.max"}) {
    t.File(base + "/" + run + "/" + f, "");
  }
  CgroupSupport s;
  s.mode = CgroupSupport::Mode::kV2;
  s.memory = s.cpu = s.pids = true;
  s.memory_base = s.cpu_base = s.pids_base = t.Abs(base);
  return s;
}

TEST(RunCgroupFake, V2LimitsInOneDir) {
  FakeTree t;
  CgroupSupport s = FakeV2Support(t, "r1");
  CgroupLimits l{64ull << 20, 1.5, 100};
  auto cg = RunCgroup::Create(s, "r1", l);
  ASSERT_TRUE(cg.ok()) << cg.status().ToString();
  std::string dir = std::string(kV2Own) + "/lathe/r1";
  EXPECT_EQ((*cg)->dirs(), std::vector<std::string>{t.Abs(dir)});
  EXPECT_EQ(t.Read(dir + "/memory.max"), "67108864");
  EXPECT_EQ(t.Read(dir + "/memory.swap.max"), "0");
  EXPECT_EQ(t.Read(dir + "/memory.oom.group"), "1");
  EXPECT_EQ(t.Read(dir + "/cpu.max"), "150000 100000");
  EXPECT_EQ(t.Read(dir + "/pids.max"), "100");
  ASSERT_TRUE((*cg)->AddProcess(4242).ok());
  EXPECT_EQ(t.Read(dir + "/cgroup.procs"), "4242");
  EXPECT_EQ((*cg)->Pids(), std::vector<pid_t>{4242});

  t.File(dir + "/memory.events", "low 0\nhigh 0\nmax 12\noom 1\noom_kill 1\n");
  t.File(dir + "/memory.peak", "67100000\n");
  EXPECT_TRUE((*cg)->OomKilled());
  EXPECT_EQ((*cg)->MemoryPeakBytes().value_or(0), 67100000u);
}

TEST(RunCgroupFake, V1LimitsInOneDirPerController) {
  FakeTree t;
  CgroupSupport s;
  s.mode = CgroupSupport::Mode::kV1;
  s.memory = s.cpu = s.pids = true;
  s.memory_base = t.Abs("/memory/lathe");
  s.cpu_base = t.Abs("/cpu/lathe");
  s.pids_base = t.Abs("/pids/lathe");
  for (const char* f : {"memory.limit_in_bytes", "memory.memsw.limit_in_bytes", "cgroup.procs"}) {
    t.File(std::string("/memory/lathe/r2/") + f, "");
  }
  t.File("/cpu/lathe/r2/cpu.cfs_period_us", "");
  t.File("/cpu/lathe/r2/cpu.cfs_quota_us", "");
  t.File("/pids/lathe/r2/pids.max", "");
  auto cg = RunCgroup::Create(s, "r2", {1000000000, 0.25, 7});
  ASSERT_TRUE(cg.ok()) << cg.status().ToString();
  EXPECT_EQ((*cg)->dirs(),
            (std::vector<std::string>{t.Abs("/memory/lathe/r2"), t.Abs("/pids/lathe/r2"),
                                      t.Abs("/cpu/lathe/r2")}));
  EXPECT_EQ(t.Read("/memory/lathe/r2/memory.limit_in_bytes"), "1000000000");
  EXPECT_EQ(t.Read("/memory/lathe/r2/memory.memsw.limit_in_bytes"), "1000000000");
  EXPECT_EQ(t.Read("/cpu/lathe/r2/cpu.cfs_period_us"), "100000");
  EXPECT_EQ(t.Read("/cpu/lathe/r2/cpu.cfs_quota_us"), "25000");
  EXPECT_EQ(t.Read("/pids/lathe/r2/pids.max"), "7");

  // OOM evidence: the kernel's counter, or (before 4.13) failcnt + a peak at the limit.
  t.File("/memory/lathe/r2/memory.oom_control", "oom_kill_disable 0\nunder_oom 0\noom_kill 0\n");
  EXPECT_FALSE((*cg)->OomKilled());
  t.File("/memory/lathe/r2/memory.oom_control", "oom_kill_disable 0\nunder_oom 0\n");
  t.File("/memory/lathe/r2/memory.failcnt", "3\n");
  t.File("/memory/lathe/r2/memory.max_usage_in_bytes", "999999488\n");
  EXPECT_TRUE((*cg)->OomKilled());
  EXPECT_EQ((*cg)->MemoryPeakBytes().value_or(0), 999999488u);
  // A container's kill, in a sub-cgroup gone by now: no counter says it, the
  // peak at the limit does.
  t.File("/memory/lathe/r2/memory.oom_control", "oom_kill_disable 0\nunder_oom 0\noom_kill 0\n");
  t.File("/memory/lathe/r2/memory.failcnt", "0\n");
  EXPECT_TRUE((*cg)->MemoryLimitReached());
  EXPECT_FALSE((*cg)->OomKilled());  // the kernel counted no kill here
  t.File("/memory/lathe/r2/memory.max_usage_in_bytes", "500000000\n");
  EXPECT_FALSE((*cg)->MemoryLimitReached());  // far from the limit
}

TEST(RunCgroupFake, NoLimitsStillCreatesMemoryAndPidsButNotCpu) {
  FakeTree t;
  CgroupSupport s;
  s.mode = CgroupSupport::Mode::kV1;
  s.memory = s.cpu = s.pids = true;
  s.memory_base = t.Abs("/memory/lathe");
  s.cpu_base = t.Abs("/cpu/lathe");
  s.pids_base = t.Abs("/pids/lathe");
  fs::create_directories(t.Abs("/memory/lathe"));
  fs::create_directories(t.Abs("/cpu/lathe"));
  fs::create_directories(t.Abs("/pids/lathe"));
  auto cg = RunCgroup::Create(s, "r3", {});
  ASSERT_TRUE(cg.ok()) << cg.status().ToString();
  EXPECT_EQ((*cg)->dirs(),
            (std::vector<std::string>{t.Abs("/memory/lathe/r3"), t.Abs("/pids/lathe/r3")}));
  EXPECT_TRUE(fs::is_directory(t.Abs("/pids/lathe/r3")));
  EXPECT_FALSE(fs::exists(t.Abs("/cpu/lathe/r3")));
  EXPECT_TRUE((*cg)->Destroy().ok());  // empty directories: rmdir works on a fake tree too
  EXPECT_FALSE(fs::exists(t.Abs("/memory/lathe/r3")));
}

TEST(RunCgroupFake, RefusesWhatCannotBeDone) {
  FakeTree t;
  CgroupSupport s;
  s.mode = CgroupSupport::Mode::kV1;
  s.memory = true;
  s.memory_base = t.Abs("/memory/lathe");
  s.note = "cpu: cgroup v1: no hierarchy\npids: no cgroup hierarchy has this controller";
  fs::create_directories(s.memory_base);

  auto cpu = RunCgroup::Create(s, "r4", {std::nullopt, 2.0, std::nullopt});
  ASSERT_FALSE(cpu.ok());
  EXPECT_EQ(cpu.status().code(), Code::kFailedPrecondition);
  EXPECT_NE(cpu.status().message().find("cpu cgroup controller is unavailable"), std::string::npos);
  EXPECT_NE(cpu.status().message().find("cpu: cgroup v1: no hierarchy"), std::string::npos);
  auto pids = RunCgroup::Create(s, "r4", {std::nullopt, std::nullopt, 10});
  ASSERT_FALSE(pids.ok());
  EXPECT_NE(pids.status().message().find("pids"), std::string::npos);
  EXPECT_FALSE(fs::exists(s.memory_base + "/r4"));  // refused before creating anything

  for (const char* bad : {"", "..", "a/b", "a b", "-x"}) {
    auto r = RunCgroup::Create(s, bad, {});
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_TRUE(r.status().IsInvalidArgument()) << bad;
  }
  EXPECT_TRUE(
      RunCgroup::Create(s, "r4", {0ull, std::nullopt, std::nullopt}).status().IsInvalidArgument());
  EXPECT_TRUE(
      RunCgroup::Create(s, "r4", {std::nullopt, 0.0, std::nullopt}).status().IsInvalidArgument());
  EXPECT_TRUE(
      RunCgroup::Create(s, "r4", {std::nullopt, std::nullopt, 0}).status().IsInvalidArgument());

  CgroupSupport none;
  none.note = "memory: x\ncpu: y\npids: z";
  auto r = RunCgroup::Create(none, "r5", {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kFailedPrecondition);
}

TEST(RunCgroupFake, OpenReadsWhatEachDirHolds) {
  FakeTree t;
  CgroupSupport s = FakeV2Support(t, "r6");
  std::string dir = t.Abs(std::string(kV2Own) + "/lathe/r6");
  auto cg = RunCgroup::Open({dir});
  ASSERT_TRUE(cg.ok()) << cg.status().ToString();
  EXPECT_EQ((*cg)->dirs(), std::vector<std::string>{dir});
  t.File(std::string(kV2Own) + "/lathe/r6/memory.peak", "77\n");
  EXPECT_EQ((*cg)->MemoryPeakBytes().value_or(0), 77u);  // found the v2 memory dir

  auto missing = RunCgroup::Open({dir, t.Abs("/nope")});
  ASSERT_FALSE(missing.ok());
  EXPECT_TRUE(missing.status().IsNotFound());
}

TEST(RunCgroupFake, UsageOfV2AndV1) {
  FakeTree t;
  t.File("/v2/r7/cgroup.controllers", "memory pids\n");
  t.File("/v2/r7/memory.max", "max\n");
  t.File("/v2/r7/memory.current", "123456\n");
  t.File("/v2/r7/cpu.stat", "usage_usec 4500000\nuser_usec 4000000\nsystem_usec 500000\n");
  auto v2 = RunCgroup::Open({t.Abs("/v2/r7")});
  ASSERT_TRUE(v2.ok()) << v2.status().ToString();
  EXPECT_EQ((*v2)->MemoryCurrentBytes().value_or(0), 123456u);
  EXPECT_EQ((*v2)->CpuUsageUsec().value_or(0), 4500000u);

  t.File("/memory/r8/memory.limit_in_bytes", "9223372036854771712\n");
  t.File("/memory/r8/memory.usage_in_bytes", "2048\n");
  t.File("/pids/r8/pids.max", "max\n");
  auto v1 = RunCgroup::Open({t.Abs("/memory/r8"), t.Abs("/pids/r8")});
  ASSERT_TRUE(v1.ok()) << v1.status().ToString();
  EXPECT_EQ((*v1)->MemoryCurrentBytes().value_or(0), 2048u);
  EXPECT_TRUE((*v1)->CpuUsageUsec().status().IsNotFound());  // no cpuacct dir: sum the processes
  t.File("/cpu,cpuacct/r8/cpu.cfs_quota_us", "-1\n");
  t.File("/cpu,cpuacct/r8/cpuacct.usage", "3000000000\n");
  auto with_cpu = RunCgroup::Open({t.Abs("/memory/r8"), t.Abs("/cpu,cpuacct/r8")});
  ASSERT_TRUE(with_cpu.ok());
  EXPECT_EQ((*with_cpu)->CpuUsageUsec().value_or(0), 3000000u);
}

// ---- The real cgroups of this machine ----------------------------------------------

class RealCgroupTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // Not a uid check: a user with a delegated cgroup v2 subtree can run these.
    support_ = DetectCgroups();
    if (!support_.memory || !support_.pids) {
      GTEST_SKIP() << "no writable memory and pids cgroups here (not root, or no cgroups): "
                   << support_.note;
    }
    run_id_ = NewId("t");
  }
  void TearDown() override {
    if (cg_) {
      (void)cg_->KillAll(SIGKILL);
      (void)cg_->Destroy();
    }
    ::prctl(PR_SET_CHILD_SUBREAPER, 0);
  }

  // Forks a child that waits until the parent has put it into the run's
  // cgroup, then runs `body` and exits with its return value.
  template <typename Body>
  pid_t ForkIntoCgroup(Body body) {
    int fds[2];
    EXPECT_EQ(::pipe(fds), 0);
    pid_t pid = ::fork();
    if (pid == 0) {
      ::close(fds[1]);
      char c;
      if (::read(fds[0], &c, 1) != 1) ::_exit(100);
      ::_exit(body());
    }
    ::close(fds[0]);
    Status st = cg_->AddProcess(pid);
    EXPECT_TRUE(st.ok()) << st.ToString();
    EXPECT_EQ(::write(fds[1], "g", 1), 1);
    ::close(fds[1]);
    return pid;
  }

  // Polls Pids() until it has `n` entries (up to 5 s).
  std::vector<pid_t> WaitForPids(size_t n) {
    std::vector<pid_t> pids;
    for (int i = 0; i < 500 && (pids = cg_->Pids()).size() != n; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return pids;
  }

  CgroupSupport support_;
  std::string run_id_;
  std::unique_ptr<RunCgroup> cg_;
};

TEST_F(RealCgroupTest, LimitsAreWrittenAndOpenFindsThem) {
  CgroupLimits limits{64ull << 20, support_.cpu ? std::optional<double>(0.5) : std::nullopt, 50};
  auto cg = RunCgroup::Create(support_, run_id_, limits);
  ASSERT_TRUE(cg.ok()) << cg.status().ToString();
  cg_ = std::move(*cg);
  for (const std::string& d : cg_->dirs()) EXPECT_TRUE(fs::is_directory(d)) << d;
  auto reopened = RunCgroup::Open(cg_->dirs());
  ASSERT_TRUE(reopened.ok()) << reopened.status().ToString();
  EXPECT_EQ((*reopened)->dirs(), cg_->dirs());
  EXPECT_TRUE((*reopened)->Pids().empty());
  EXPECT_FALSE((*reopened)->OomKilled());
  EXPECT_TRUE((*reopened)->MemoryPeakBytes().ok());
  ASSERT_TRUE(cg_->Destroy().ok());
  for (const std::string& d : cg_->dirs()) EXPECT_FALSE(fs::exists(d)) << d;
}

TEST_F(RealCgroupTest, MemoryLimitOomKillsTheRun) {
  constexpr uint64_t kLimit = 64ull << 20;
  constexpr size_t kAlloc = 256ull << 20;
  auto cg = RunCgroup::Create(support_, run_id_, {kLimit, std::nullopt, std::nullopt});
  ASSERT_TRUE(cg.ok()) << cg.status().ToString();
  cg_ = std::move(*cg);
  pid_t child = ForkIntoCgroup([] {
    void* p = ::mmap(nullptr, kAlloc, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return 101;
    for (size_t off = 0; off < kAlloc; off += 4096) static_cast<char*>(p)[off] = 1;
    return 0;  // not reached when the limit works
  });
  int wstatus = 0;
  ASSERT_EQ(::waitpid(child, &wstatus, 0), child);
  ASSERT_TRUE(WIFSIGNALED(wstatus)) << "child exited with " << WEXITSTATUS(wstatus);
  EXPECT_EQ(WTERMSIG(wstatus), SIGKILL);
  EXPECT_TRUE(cg_->OomKilled());
  auto peak = cg_->MemoryPeakBytes();
  ASSERT_TRUE(peak.ok()) << peak.status().ToString();
  EXPECT_GT(*peak, kLimit / 2);
  EXPECT_LE(*peak, kLimit);
  EXPECT_TRUE(cg_->Destroy().ok());
}

TEST_F(RealCgroupTest, KillAllReachesASetsidGrandchild) {
  ASSERT_EQ(::prctl(PR_SET_CHILD_SUBREAPER, 1), 0);  // so the grandchild can be reaped here
  auto cg = RunCgroup::Create(support_, run_id_, {});
  ASSERT_TRUE(cg.ok()) << cg.status().ToString();
  cg_ = std::move(*cg);
  pid_t child = ForkIntoCgroup([] {
    ::setsid();
    if (::fork() == 0) {
      ::setsid();
      while (true) ::pause();
    }
    while (true) ::pause();
    return 0;
  });
  std::vector<pid_t> pids = WaitForPids(2);
  ASSERT_EQ(pids.size(), 2u);
  pid_t grandchild = pids[0] == child ? pids[1] : pids[0];
  EXPECT_NE(grandchild, child);

  Status st = cg_->KillAll(SIGKILL);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_TRUE(cg_->Pids().empty());
  for (pid_t p : {child, grandchild}) {
    int wstatus = 0;
    ASSERT_EQ(::waitpid(p, &wstatus, 0), p);
    EXPECT_TRUE(WIFSIGNALED(wstatus) && WTERMSIG(wstatus) == SIGKILL) << p;
  }
  ASSERT_TRUE(cg_->Destroy().ok());
  for (const std::string& d : cg_->dirs()) EXPECT_FALSE(fs::exists(d)) << d;
}

TEST_F(RealCgroupTest, KillAllWithSigtermReachesEveryProcessOnce) {
  ASSERT_EQ(::prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
  auto cg = RunCgroup::Create(support_, run_id_, {});
  ASSERT_TRUE(cg.ok()) << cg.status().ToString();
  cg_ = std::move(*cg);
  pid_t child = ForkIntoCgroup([] {
    if (::fork() == 0) {
      while (true) ::pause();
    }
    while (true) ::pause();
    return 0;
  });
  std::vector<pid_t> pids = WaitForPids(2);
  ASSERT_EQ(pids.size(), 2u);
  ASSERT_TRUE(cg_->KillAll(SIGTERM).ok());
  for (pid_t p : pids) {
    int wstatus = 0;
    ASSERT_EQ(::waitpid(p, &wstatus, 0), p);
    EXPECT_TRUE(WIFSIGNALED(wstatus) && WTERMSIG(wstatus) == SIGTERM) << p;
  }
  (void)child;
  EXPECT_TRUE(cg_->Destroy().ok());
}

TEST_F(RealCgroupTest, DestroyRefusesWhileProcessesRemain) {
  auto cg = RunCgroup::Create(support_, run_id_, {});
  ASSERT_TRUE(cg.ok()) << cg.status().ToString();
  cg_ = std::move(*cg);
  pid_t child = ForkIntoCgroup([] {
    while (true) ::pause();
    return 0;
  });
  ASSERT_EQ(WaitForPids(1), std::vector<pid_t>{child});
  Status busy = cg_->Destroy();
  EXPECT_EQ(busy.code(), Code::kFailedPrecondition) << busy.ToString();
  EXPECT_NE(busy.message().find(std::to_string(child)), std::string::npos) << busy.message();
  ASSERT_TRUE(cg_->KillAll(SIGKILL).ok());
  int wstatus = 0;
  ASSERT_EQ(::waitpid(child, &wstatus, 0), child);
  EXPECT_TRUE(cg_->Destroy().ok());
}

TEST_F(RealCgroupTest, PidsLimitStopsForks) {
  auto cg = RunCgroup::Create(support_, run_id_, {std::nullopt, std::nullopt, 3});
  ASSERT_TRUE(cg.ok()) << cg.status().ToString();
  cg_ = std::move(*cg);
  pid_t child = ForkIntoCgroup([] {
    int refused = 0;
    for (int i = 0; i < 6; ++i) {
      pid_t p = ::fork();
      if (p == 0) {
        ::pause();
        ::_exit(0);
      }
      if (p < 0) ++refused;
    }
    return refused > 0 ? 0 : 1;  // the 3rd fork onwards must fail
  });
  int wstatus = 0;
  ASSERT_EQ(::waitpid(child, &wstatus, 0), child);
  EXPECT_TRUE(WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0);
  EXPECT_TRUE(cg_->KillAll(SIGKILL).ok());
  EXPECT_TRUE(cg_->Destroy().ok());
}

}  // namespace
}  // namespace lathe::os

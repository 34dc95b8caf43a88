// The doctor's checks against fabricated machines (test_util/fake_system.h,
// GPUs through a fake NVML table), the report formats, and one run against
// the real machine.
#include "lathe/doctor/doctor.h"

#include <gtest/gtest.h>

#include <re2/re2.h>

#include "lathe/common/embedded.h"
#include "lathe/doctor/checks_network.h"
#include "lathe/doctor/real_system.h"
#include "lathe/doctor/report_format.h"
#include "lathe/doctor/test_util/fake_nvml.h"
#include "lathe/doctor/test_util/fake_system.h"

namespace lathe::doctor {
namespace {

using testing::FakeNvml;
using testing::FakeNvmlGpu;
using testing::FakeSystemView;
using testing::HealthyMachine;
using testing::kGiB;
using testing::kMiB;

Report RunOn(const FakeSystemView& m, DoctorOptions o = {}) {
  auto r = RunDoctor(m, o);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? std::move(r).value() : Report{};
}

const CheckOutcome& Get(const Report& r, std::string_view id) {
  for (const auto& c : r.checks) {
    if (c.check->id == id) return c;
  }
  static CheckOutcome none;
  ADD_FAILURE() << "no check " << id;
  return none;
}

std::string Outcome(const FakeSystemView& m, std::string_view id) {
  return Get(RunOn(m), id).finding.outcome;
}

std::string Value(const CheckOutcome& c, const std::string& key) {
  for (const auto& a : c.finding.args) {
    if (a.key == key) return a.value;
  }
  return "<none>";
}

// Every text shown for every check is complete: no placeholder left unfilled.
void ExpectFilled(const Report& r) {
  for (Lang lang : {Lang::kEn, Lang::kZh}) {
    Json j = ReportToJson(r, lang, false);
    for (const auto& c : j["checks"]) {
      for (const char* k : {"finding", "scenario", "cause", "verify", "fix"}) {
        if (!c[k].is_string()) continue;
        EXPECT_FALSE(RE2::PartialMatch(c[k].get<std::string>(), R"(\{[a-z_]+\})"))
            << c["id"] << " " << k << ": " << c[k];
      }
    }
  }
}

void AddGpus(FakeSystemView& m, FakeNvml state) {
  m.gpus = testing::SampleFakeNvml(state);
  ASSERT_TRUE(m.gpus.ok()) << m.gpus.status().ToString();
}

FakeNvml TwoA100() {
  FakeNvml n;
  n.gpus = {FakeNvmlGpu{}, FakeNvmlGpu{}};
  return n;
}

constexpr const char* kTorchCu121 =
    R"({"importable": true, "version": "2.3.1+cu121", "cuda": "12.1", "cuda_available": true,
        "cuda_error": "", "arch_list": ["sm_50","sm_60","sm_70","sm_75","sm_80","sm_86","sm_90"],
        "capabilities": ["8.0", "8.0"]})";

// ---- texts ------------------------------------------------------------------

TEST(CheckTexts, EmbeddedFileLoadsAndEveryCheckHasATitle) {
  auto t = CheckTexts::FromYaml(FindEmbedded("doctor_checks.yaml"), "doctor_checks.yaml");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  for (const auto& c : AllChecks()) EXPECT_NE(t->Title(c.id), nullptr) << c.id;
  for (const auto& [id, o] : t->outcomes()) {
    bool problem = o.severity == Severity::kWarn || o.severity == Severity::kFail;
    EXPECT_EQ(problem, !o.verify.empty()) << id;
  }
}

TEST(CheckTexts, RejectsProblemsWithoutVerifyOrTranslation) {
  const char* no_verify = R"(- id: x.bad
  severity: warn
  finding: {en: "a", zh: "甲"}
  scenario: {en: "a", zh: "甲"}
  cause: {en: "a", zh: "甲"}
  fix: {en: "a", zh: "甲"}
)";
  auto r = CheckTexts::FromYaml(no_verify, "t.yaml");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("verify"), std::string::npos);
  auto zh = CheckTexts::FromYaml("- id: x.ok\n  severity: ok\n  finding: {en: \"a\"}\n", "t.yaml");
  ASSERT_FALSE(zh.ok());
  EXPECT_NE(zh.status().message().find("zh"), std::string::npos);
  auto dup = CheckTexts::FromYaml(
      "- id: a\n  title: {en: a, zh: 甲}\n- id: a\n  title: {en: a, zh: 甲}\n", "t.yaml");
  EXPECT_FALSE(dup.ok());
  auto sev = CheckTexts::FromYaml("- id: a\n  severity: bad\n  finding: {en: a, zh: 甲}\n", "t");
  EXPECT_FALSE(sev.ok());
}

// ---- a healthy machine ---------------------------------------------------------

TEST(Doctor, HealthyMachineHasNoProblems) {
  FakeSystemView m = HealthyMachine();
  Report r = RunOn(m);
  EXPECT_EQ(r.fail, 0);
  EXPECT_EQ(r.warn, 1);  // the daemon is not running
  EXPECT_EQ(Get(r, "lathe.daemon").severity, Severity::kWarn);
  EXPECT_EQ(Get(r, "gpu.driver").finding.outcome, "gpu.driver.no_gpu");
  EXPECT_EQ(Get(r, "gpu.torch").finding.outcome, "gpu.torch.not_installed");
  EXPECT_EQ(Get(r, "sys.shm").finding.outcome, "sys.shm.ok");
  EXPECT_EQ(Get(r, "net.dns").finding.outcome, "net.dns.ok");
  EXPECT_EQ(Value(Get(r, "net.dns"), "address"), "151.101.0.223");
  EXPECT_EQ(r.checks.size(), AllChecks().size());
  EXPECT_EQ(DoctorExitCode(r, false), 0);
  EXPECT_EQ(DoctorExitCode(r, true), 1);  // --strict counts the warning
  ExpectFilled(r);
}

TEST(Doctor, FastSkipsSlowProbes) {
  FakeSystemView m = HealthyMachine();
  DoctorOptions o;
  o.fast = true;
  Report r = RunOn(m, o);
  EXPECT_EQ(Get(r, "gpu.torch").finding.outcome, "gpu.torch.fast");
  EXPECT_EQ(Get(r, "net.dns").finding.outcome, "net.dns.fast");
  EXPECT_EQ(m.run_count, 0);  // no python, no getent (and no nvcc on this machine)
}

TEST(Doctor, OnlyOneGroup) {
  FakeSystemView m = HealthyMachine();
  DoctorOptions o;
  o.only = "network";
  Report r = RunOn(m, o);
  ASSERT_EQ(r.checks.size(), 4u);
  for (const auto& c : r.checks) EXPECT_EQ(c.check->group, "network");
  o.only = "disks";
  auto bad = RunDoctor(m, o);
  ASSERT_FALSE(bad.ok());
  EXPECT_TRUE(bad.status().IsInvalidArgument());
  EXPECT_EQ(bad.status().msg_id(), "doctor.bad_group");
}

// ---- system -------------------------------------------------------------------

TEST(SystemChecks, DockerDefaultShmFails) {
  FakeSystemView m = HealthyMachine();
  m.statfs["/dev/shm"] = {64 * kMiB, 60 * kMiB, 100000, 99990};
  Report r = RunOn(m);
  const CheckOutcome& c = Get(r, "sys.shm");
  EXPECT_EQ(c.finding.outcome, "sys.shm.too_small");
  EXPECT_EQ(c.severity, Severity::kFail);
  EXPECT_EQ(Value(c, "size"), "64MiB");
  EXPECT_EQ(DoctorExitCode(r, false), 1);
  ExpectFilled(r);
}

TEST(SystemChecks, ShmOutOfInodesSmallAndMissing) {
  FakeSystemView m = HealthyMachine();
  m.statfs["/dev/shm"] = {32 * kGiB, 31 * kGiB, 1'000'000, 12};
  EXPECT_EQ(Outcome(m, "sys.shm"), "sys.shm.no_inodes");
  m.statfs["/dev/shm"] = {1 * kGiB, 1 * kGiB, 100000, 100000};
  EXPECT_EQ(Outcome(m, "sys.shm"), "sys.shm.small");
  m.statfs.erase("/dev/shm");
  EXPECT_EQ(Outcome(m, "sys.shm"), "sys.shm.missing");
}

TEST(SystemChecks, CgroupV2LimitBelowFreeWarns) {
  FakeSystemView m = HealthyMachine();
  m.files["/sys/fs/cgroup/user.slice/user-1000.slice/session-1.scope/memory.max"] = "8589934592\n";
  Report r = RunOn(m);
  const CheckOutcome& c = Get(r, "sys.cgroup_mem");
  EXPECT_EQ(c.finding.outcome, "sys.cgroup_mem.limited");
  EXPECT_EQ(c.severity, Severity::kWarn);
  EXPECT_EQ(Value(c, "limit"), "8GiB");
  EXPECT_EQ(Value(c, "total"), "64GiB");
  ExpectFilled(r);
}

TEST(SystemChecks, CgroupLimitOfAnAncestorCounts) {
  FakeSystemView m = HealthyMachine();
  m.AddFile("/sys/fs/cgroup/user.slice/memory.max", "4294967296\n");
  EXPECT_EQ(Value(Get(RunOn(m), "sys.cgroup_mem"), "limit"), "4GiB");
}

TEST(SystemChecks, CgroupV1Limit) {
  FakeSystemView m = HealthyMachine();
  m.files["/proc/self/cgroup"] = "4:memory:/docker/abc\n3:cpu,cpuacct:/docker/abc\n0::/\n";
  m.AddFile("/sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes", "17179869184\n");
  m.AddFile("/sys/fs/cgroup/memory/memory.limit_in_bytes", "9223372036854771712\n");
  m.AddFile("/sys/fs/cgroup/memory/docker/abc/memory.usage_in_bytes", "1073741824\n");
  Report r_c = RunOn(m);
  const CheckOutcome& c = Get(r_c, "sys.cgroup_mem");
  EXPECT_EQ(c.finding.outcome, "sys.cgroup_mem.limited");
  EXPECT_EQ(Value(c, "limit"), "16GiB");
  EXPECT_EQ(Value(c, "usage"), "1GiB");
  m.files["/sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes"] = "9223372036854771712\n";
  EXPECT_EQ(Outcome(m, "sys.cgroup_mem"), "sys.cgroup_mem.unlimited");
}

TEST(SystemChecks, OomKillsOfTheMachineAndOfThisCgroup) {
  FakeSystemView m = HealthyMachine();
  Report ok = RunOn(m);
  EXPECT_EQ(Get(ok, "sys.oom").finding.outcome, "sys.oom.ok");
  EXPECT_EQ(Value(Get(ok, "sys.oom"), "uptime"), "3d2h");
  // Killed elsewhere on the machine: /proc/vmstat counts every kill since boot.
  m.files["/proc/vmstat"] = "nr_free_pages 1000\noom_kill 3\n";
  Report host = RunOn(m);
  const CheckOutcome& h = Get(host, "sys.oom");
  EXPECT_EQ(h.finding.outcome, "sys.oom.killed");
  EXPECT_EQ(h.severity, Severity::kWarn);
  EXPECT_EQ(Value(h, "count"), "3");
  ExpectFilled(host);
  // Killed at this cgroup's own limit (a container's): named with the cgroup.
  const std::string cg = "/sys/fs/cgroup/user.slice/user-1000.slice/session-1.scope";
  m.files[cg + "/memory.events"] = "low 0\nhigh 0\nmax 12\noom 2\noom_kill 2\n";
  Report in_cg = RunOn(m);
  const CheckOutcome& c = Get(in_cg, "sys.oom");
  EXPECT_EQ(c.finding.outcome, "sys.oom.cgroup_killed");
  EXPECT_EQ(Value(c, "count"), "2");
  EXPECT_EQ(Value(c, "path"), cg);
  ExpectFilled(in_cg);
  // cgroup v1 keeps the count in memory.oom_control.
  m.files["/proc/self/cgroup"] = "4:memory:/docker/abc\n0::/\n";
  m.AddFile("/sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes", "17179869184\n");
  m.AddFile("/sys/fs/cgroup/memory/docker/abc/memory.oom_control",
            "oom_kill_disable 0\nunder_oom 0\noom_kill 5\n");
  EXPECT_EQ(Value(Get(RunOn(m), "sys.oom"), "count"), "5");
  // A kernel without the counter (older than 4.13): skipped, not ok.
  FakeSystemView old = HealthyMachine();
  old.files["/proc/vmstat"] = "nr_free_pages 1000\n";
  old.files.erase(cg + "/memory.events");
  EXPECT_EQ(Outcome(old, "sys.oom"), "sys.oom.unknown");
}

TEST(SystemChecks, Ulimits) {
  FakeSystemView m = HealthyMachine();
  m.nofile = {1024, 524288};
  m.nproc = {512, 512};
  Report r = RunOn(m);
  EXPECT_EQ(Get(r, "sys.nofile").finding.outcome, "sys.nofile.low");
  EXPECT_EQ(Value(Get(r, "sys.nofile"), "hard"), "524288");
  EXPECT_EQ(Get(r, "sys.nproc").finding.outcome, "sys.nproc.low");
  m.nofile = {kUnlimited, kUnlimited};
  EXPECT_EQ(Value(Get(RunOn(m), "sys.nofile"), "soft"), "unlimited");
}

TEST(SystemChecks, SwappinessMattersOnlyWithSwap) {
  FakeSystemView m = HealthyMachine();
  EXPECT_EQ(Outcome(m, "sys.swappiness"), "sys.swappiness.no_swap");
  m.files["/proc/meminfo"] = "MemTotal: 67108864 kB\nSwapTotal: 8388608 kB\n";
  EXPECT_EQ(Outcome(m, "sys.swappiness"), "sys.swappiness.high");
  m.files["/proc/sys/vm/swappiness"] = "1\n";
  EXPECT_EQ(Outcome(m, "sys.swappiness"), "sys.swappiness.ok");
}

TEST(SystemChecks, StrictOvercommit) {
  FakeSystemView m = HealthyMachine();
  m.files["/proc/sys/vm/overcommit_memory"] = "2\n";
  m.files["/proc/sys/vm/overcommit_ratio"] = "50\n";
  Report r_c = RunOn(m);
  const CheckOutcome& c = Get(r_c, "sys.overcommit");
  EXPECT_EQ(c.finding.outcome, "sys.overcommit.strict");
  EXPECT_EQ(Value(c, "ratio"), "50");
}

TEST(SystemChecks, SmallTmpfsAndBadTmpdir) {
  FakeSystemView m = HealthyMachine();
  m.files["/proc/self/mounts"] += "tmpfs /tmp tmpfs rw,size=2097152k 0 0\n";
  m.statfs["/tmp"] = {2 * kGiB, 2 * kGiB, 500000, 500000};
  EXPECT_EQ(Outcome(m, "sys.tmp"), "sys.tmp.small_tmpfs");
  m.env["TMPDIR"] = "/scratch/ann/tmp";
  EXPECT_EQ(Outcome(m, "sys.tmp"), "sys.tmp.tmpdir_bad");
  m.writable.insert("/scratch/ann/tmp");
  m.statfs["/scratch/ann/tmp"] = {4000 * kGiB, 3000 * kGiB, 1, 1};
  EXPECT_EQ(Outcome(m, "sys.tmp"), "sys.tmp.ok_tmpdir");
}

TEST(SystemChecks, DiskSpace) {
  FakeSystemView m = HealthyMachine();
  m.statfs["/work"] = {2000 * kGiB, 500 * kMiB, 1, 1};
  m.statfs["/tmp"] = {500 * kGiB, 5 * kGiB, 1, 1};
  Report r = RunOn(m);
  EXPECT_EQ(Get(r, "sys.disk_cwd").finding.outcome, "sys.disk.low");
  EXPECT_EQ(Get(r, "sys.disk_tmp").finding.outcome, "sys.disk.tight");
  EXPECT_EQ(Get(r, "sys.disk_home").finding.outcome, "sys.disk.ok");
  ExpectFilled(r);
}

TEST(SystemChecks, LatheHomeNotCreatedYetUsesItsParent) {
  FakeSystemView m = HealthyMachine();
  m.home = "/home/ann/.local/state/lathe-new";
  m.statfs["/home/ann"] = m.statfs["/tmp"];
  Report r = RunOn(m);
  EXPECT_EQ(Get(r, "sys.disk_home").finding.outcome, "sys.disk.ok");
  EXPECT_EQ(Get(r, "lathe.home").finding.outcome, "lathe.home.creatable");
}

TEST(SystemChecks, CpuQuotaBelowVisibleCpus) {
  FakeSystemView m = HealthyMachine();
  m.files["/sys/fs/cgroup/user.slice/user-1000.slice/session-1.scope/cpu.max"] = "400000 100000\n";
  Report r_c = RunOn(m);
  const CheckOutcome& c = Get(r_c, "sys.cpu");
  EXPECT_EQ(c.finding.outcome, "sys.cpu.quota");
  EXPECT_EQ(Value(c, "quota"), "4.0");
  EXPECT_EQ(Value(c, "workers"), "3");
}

TEST(SystemChecks, UnsynchronisedClock) {
  FakeSystemView m = HealthyMachine();
  m.clock_synced = false;
  EXPECT_EQ(Outcome(m, "sys.time"), "sys.time.unsynced");
  m.clock_synced = std::nullopt;
  EXPECT_EQ(Outcome(m, "sys.time"), "sys.time.unknown");
}

// ---- network ------------------------------------------------------------------

TEST(NetworkChecks, ProxyWithoutNoProxyForLocalhostFails) {
  FakeSystemView m = HealthyMachine();
  m.env["https_proxy"] = "http://proxy.corp:3128";
  m.env["HTTP_PROXY"] = "http://proxy.corp:3128";
  Report r = RunOn(m);
  const CheckOutcome& c = Get(r, "net.proxy");
  EXPECT_EQ(c.finding.outcome, "net.proxy.captures_localhost");
  EXPECT_EQ(c.severity, Severity::kFail);
  EXPECT_EQ(Value(c, "missing"), "localhost, 127.0.0.1");
  ExpectFilled(r);
  m.env["NO_PROXY"] = "localhost";
  EXPECT_EQ(Value(Get(RunOn(m), "net.proxy"), "missing"), "127.0.0.1");
  m.env["no_proxy"] = "127.0.0.0/8";
  EXPECT_EQ(Outcome(m, "net.proxy"), "net.proxy.bypassed");
}

TEST(NetworkChecks, NoProxyRules) {
  EXPECT_TRUE(NoProxyCovers("*", "localhost"));
  EXPECT_TRUE(NoProxyCovers(" example.com , localhost ", "localhost"));
  EXPECT_TRUE(NoProxyCovers(".localhost", "localhost"));
  EXPECT_TRUE(NoProxyCovers("10.0.0.0/8,127.0.0.0/8", "127.0.0.1"));
  EXPECT_FALSE(NoProxyCovers("127.0.0.0/31", "127.0.0.2"));
  EXPECT_FALSE(NoProxyCovers("localhost.corp", "localhost"));
  EXPECT_FALSE(NoProxyCovers("", "127.0.0.1"));
}

TEST(NetworkChecks, DnsFailureAndTimeout) {
  FakeSystemView m = HealthyMachine();
  m.SetCommand("getent ahosts", CommandOutput{2, "", ""});
  EXPECT_EQ(Outcome(m, "net.dns"), "net.dns.fail");
  m.SetCommand("getent ahosts", Status::DeadlineExceeded("getent did not finish"));
  EXPECT_EQ(Outcome(m, "net.dns"), "net.dns.timeout");
}

TEST(NetworkChecks, MixedMtu) {
  FakeSystemView m = HealthyMachine();
  m.AddFile("/sys/class/net/ib0/mtu", "4092\n");
  m.AddFile("/sys/class/net/docker0/mtu", "1500\n");
  Report r_c = RunOn(m);
  const CheckOutcome& c = Get(r_c, "net.mtu");
  EXPECT_EQ(c.finding.outcome, "net.mtu.mixed");
  EXPECT_EQ(Value(c, "list"), "eth0 1500, ib0 4092");
}

TEST(NetworkChecks, NcclVariables) {
  FakeSystemView m = HealthyMachine();
  EXPECT_EQ(Outcome(m, "net.nccl"), "net.nccl.none");
  m.env["NCCL_DEBUG"] = "INFO";
  EXPECT_EQ(Outcome(m, "net.nccl"), "net.nccl.set");
  m.env["NCCL_IB_DISABLE"] = "1";
  Report r_slow = RunOn(m);
  const CheckOutcome& slow = Get(r_slow, "net.nccl");
  EXPECT_EQ(slow.finding.outcome, "net.nccl.slow");
  EXPECT_EQ(Value(slow, "vars"), "NCCL_IB_DISABLE=1");
  m.env["NCCL_SOCKET_IFNAME"] = "ens5";
  EXPECT_EQ(Outcome(m, "net.nccl"), "net.nccl.bad_ifname");
  m.env["NCCL_SOCKET_IFNAME"] = "eth";
  EXPECT_EQ(Outcome(m, "net.nccl"), "net.nccl.slow");
  m.env["NCCL_SOCKET_IFNAME"] = "^docker,lo";
  EXPECT_EQ(Outcome(m, "net.nccl"), "net.nccl.slow");
}

// ---- GPUs through the fake NVML table ----------------------------------------------

TEST(GpuChecks, HealthyGpuServer) {
  FakeSystemView m = HealthyMachine();
  AddGpus(m, TwoA100());
  m.SetTorch(kTorchCu121);
  Report r = RunOn(m);
  for (const char* id : {"gpu.driver", "gpu.visible", "gpu.cuda", "gpu.torch", "gpu.arch",
                         "gpu.ecc", "gpu.clocks", "gpu.memory", "gpu.persistence", "gpu.mig"}) {
    EXPECT_EQ(Get(r, id).severity, Severity::kOk) << id << " " << Get(r, id).finding.outcome;
  }
  EXPECT_EQ(Value(Get(r, "gpu.driver"), "cuda"), "12.4");
  EXPECT_EQ(Value(Get(r, "gpu.driver"), "count"), "2");
  ExpectFilled(r);
}

TEST(GpuChecks, DriverCudaOlderThanTorchsFails) {
  FakeSystemView m = HealthyMachine();
  FakeNvml n = TwoA100();
  n.cuda_version = 11080;  // driver 520: CUDA 11.8
  AddGpus(m, n);
  m.SetTorch(kTorchCu121);
  Report r = RunOn(m);
  const CheckOutcome& c = Get(r, "gpu.cuda");
  EXPECT_EQ(c.finding.outcome, "gpu.cuda.torch_newer");
  EXPECT_EQ(c.severity, Severity::kFail);
  EXPECT_EQ(Value(c, "driver"), "11.8");
  EXPECT_EQ(Value(c, "torch"), "12.1");
  ExpectFilled(r);
  n.cuda_version = 12000;
  AddGpus(m, n);
  EXPECT_EQ(Outcome(m, "gpu.cuda"), "gpu.cuda.torch_minor_newer");
}

TEST(GpuChecks, ToolkitNewerThanDriverWarns) {
  FakeSystemView m = HealthyMachine();
  AddGpus(m, TwoA100());
  m.executables.insert("/usr/local/cuda/bin/nvcc");
  m.SetCommand("/usr/local/cuda/bin/nvcc --version",
               CommandOutput{0, "Cuda compilation tools, release 12.6, V12.6.77\n", ""});
  EXPECT_EQ(Outcome(m, "gpu.cuda"), "gpu.cuda.toolkit_newer");
}

TEST(GpuChecks, ThrottledGpuWarnsPowerCapDoesNot) {
  FakeSystemView m = HealthyMachine();
  FakeNvml n = TwoA100();
  n.gpus[1].throttle_reasons = nvmlClocksThrottleReasonHwThermalSlowdown;
  n.gpus[1].sm_clock_mhz = 900;
  n.gpus[1].temperature_c = 89;
  AddGpus(m, n);
  Report r = RunOn(m);
  const CheckOutcome& c = Get(r, "gpu.clocks");
  EXPECT_EQ(c.finding.outcome, "gpu.clocks.throttled");
  EXPECT_EQ(c.severity, Severity::kWarn);
  EXPECT_EQ(Value(c, "gpus"), "GPU 1: hw_thermal (SM 900/1410 MHz, 89°C)");
  n.gpus[1].throttle_reasons = nvmlClocksThrottleReasonSwPowerCap;
  AddGpus(m, n);
  EXPECT_EQ(Outcome(m, "gpu.clocks"), "gpu.clocks.power_capped");
}

TEST(GpuChecks, MemoryAlreadyHeldByProcessesOrByNoneListed) {
  FakeSystemView m = HealthyMachine();
  AddGpus(m, TwoA100());
  EXPECT_EQ(Outcome(m, "gpu.memory"), "gpu.memory.ok");
  // A display server's few hundred MiB is not a problem.
  FakeNvml n = TwoA100();
  n.gpus[0].memory_used = 400 * kMiB;
  n.gpus[0].processes = {{2001, 400 * kMiB}};
  AddGpus(m, n);
  EXPECT_EQ(Outcome(m, "gpu.memory"), "gpu.memory.ok");
  // Another user's job holds 70 GiB of GPU 1.
  n.gpus[1].memory_used = 70 * kGiB;
  n.gpus[1].processes = {{4242, 70 * kGiB}};
  AddGpus(m, n);
  Report busy = RunOn(m);
  const CheckOutcome& b = Get(busy, "gpu.memory");
  EXPECT_EQ(b.finding.outcome, "gpu.memory.busy");
  EXPECT_EQ(b.severity, Severity::kWarn);
  EXPECT_EQ(Value(b, "gpus"), "GPU 1 70GiB/80GiB (pid 4242)");
  ExpectFilled(busy);
  // Memory taken and no process to show for it: a leaked context or another namespace.
  n.gpus[1].processes.clear();
  AddGpus(m, n);
  Report unlisted = RunOn(m);
  EXPECT_EQ(Get(unlisted, "gpu.memory").finding.outcome, "gpu.memory.unlisted");
  EXPECT_EQ(Value(Get(unlisted, "gpu.memory"), "gpus"), "GPU 1 70GiB/80GiB");
  ExpectFilled(unlisted);
  // A driver that cannot list processes still shows the memory as taken.
  n.gpus[1].list_processes = false;
  AddGpus(m, n);
  EXPECT_EQ(Value(Get(RunOn(m), "gpu.memory"), "gpus"), "GPU 1 70GiB/80GiB");
  EXPECT_EQ(Outcome(m, "gpu.memory"), "gpu.memory.busy");
}

TEST(GpuChecks, EccPersistenceMig) {
  FakeSystemView m = HealthyMachine();
  FakeNvml n = TwoA100();
  n.gpus[0].ecc_uncorrected = 3;
  n.gpus[1].persistence = false;
  n.gpus[1].mig = NVML_DEVICE_MIG_ENABLE;
  AddGpus(m, n);
  Report r = RunOn(m);
  EXPECT_EQ(Get(r, "gpu.ecc").finding.outcome, "gpu.ecc.errors");
  EXPECT_EQ(Value(Get(r, "gpu.ecc"), "gpus"), "GPU 0 (3)");
  EXPECT_EQ(Get(r, "gpu.persistence").finding.outcome, "gpu.persistence.off");
  EXPECT_EQ(Get(r, "gpu.mig").finding.outcome, "gpu.mig.on");
}

TEST(GpuChecks, CudaVisibleDevices) {
  FakeSystemView m = HealthyMachine();
  AddGpus(m, TwoA100());
  m.env["CUDA_VISIBLE_DEVICES"] = "";
  EXPECT_EQ(Outcome(m, "gpu.visible"), "gpu.visible.hidden");
  m.env["CUDA_VISIBLE_DEVICES"] = "1,2";
  Report r_bad = RunOn(m);
  const CheckOutcome& bad = Get(r_bad, "gpu.visible");
  EXPECT_EQ(bad.finding.outcome, "gpu.visible.invalid");
  EXPECT_EQ(Value(bad, "bad"), "2");
  m.env["CUDA_VISIBLE_DEVICES"] = "GPU-fake-1";
  EXPECT_EQ(Outcome(m, "gpu.visible"), "gpu.visible.subset");
  FakeNvml mixed = TwoA100();
  mixed.gpus[1].name = "NVIDIA GeForce RTX 4090";
  AddGpus(m, mixed);
  m.env.erase("CUDA_VISIBLE_DEVICES");
  EXPECT_EQ(Outcome(m, "gpu.visible"), "gpu.visible.order");
  m.env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID";
  EXPECT_EQ(Outcome(m, "gpu.visible"), "gpu.visible.all");
}

TEST(GpuChecks, NoKernelImageForTheGpusArch) {
  FakeSystemView m = HealthyMachine();
  AddGpus(m, TwoA100());
  m.SetTorch(R"({"importable": true, "version": "1.12.1+cu113", "cuda": "11.3",
      "cuda_available": true, "arch_list": ["sm_37","sm_50","sm_60","sm_70","sm_75","sm_80"],
      "capabilities": ["9.0"]})");
  Report r_c = RunOn(m);
  const CheckOutcome& c = Get(r_c, "gpu.arch");
  EXPECT_EQ(c.finding.outcome, "gpu.arch.missing");
  EXPECT_EQ(Value(c, "sm"), "sm_90");
  // sm_80 cubins run on 8.6 (same major), and compute_80 PTX can JIT for 9.0.
  m.SetTorch(R"({"importable": true, "version": "2.0", "cuda": "11.8", "cuda_available": true,
      "arch_list": ["sm_80"], "capabilities": ["8.6"]})");
  EXPECT_EQ(Outcome(m, "gpu.arch"), "gpu.arch.ok");
  m.SetTorch(R"({"importable": true, "version": "2.0", "cuda": "11.8", "cuda_available": true,
      "arch_list": ["sm_80", "compute_80"], "capabilities": ["9.0"]})");
  EXPECT_EQ(Outcome(m, "gpu.arch"), "gpu.arch.ok");
}

TEST(GpuChecks, CpuOnlyTorchOnAGpuMachine) {
  FakeSystemView m = HealthyMachine();
  AddGpus(m, TwoA100());
  m.SetTorch(R"({"importable": true, "version": "2.3.1+cpu", "cuda": "", "cuda_available": false,
      "arch_list": [], "capabilities": []})");
  EXPECT_EQ(Outcome(m, "gpu.torch"), "gpu.torch.cpu_build");
  m.SetTorch(R"({"importable": true, "version": "2.3.1", "cuda": "12.1", "cuda_available": false,
      "cuda_error": "CUDA driver initialization failed", "arch_list": [], "capabilities": []})");
  Report r_c = RunOn(m);
  const CheckOutcome& c = Get(r_c, "gpu.torch");
  EXPECT_EQ(c.finding.outcome, "gpu.torch.cuda_unavailable");
  EXPECT_EQ(Value(c, "reason"), "CUDA driver initialization failed");
}

TEST(GpuChecks, TorchImportTimesOut) {
  FakeSystemView m = HealthyMachine();
  m.SetCommand("/usr/bin/python3 -c", Status::DeadlineExceeded("killed"));
  EXPECT_EQ(Outcome(m, "gpu.torch"), "gpu.torch.timeout");
}

TEST(GpuChecks, HardwareWithoutDriverFails) {
  FakeSystemView m = HealthyMachine();
  m.AddFile("/sys/bus/pci/devices/0000:3b:00.0/vendor", "0x10de\n");
  m.AddFile("/sys/bus/pci/devices/0000:3b:00.0/class", "0x030200\n");
  m.dirs["/sys/bus/pci/devices"] = {"0000:3b:00.0"};
  Report r_c = RunOn(m);
  const CheckOutcome& c = Get(r_c, "gpu.driver");
  EXPECT_EQ(c.finding.outcome, "gpu.driver.not_loaded");
  EXPECT_EQ(c.severity, Severity::kFail);
  EXPECT_EQ(Value(c, "devices"), "0000:3b:00.0");
}

// ---- lathe ---------------------------------------------------------------------

TEST(LatheChecks, DaemonAndHome) {
  FakeSystemView m = HealthyMachine();
  m.daemon = Status::OK();
  Report r = RunOn(m);
  EXPECT_EQ(Get(r, "lathe.daemon").finding.outcome, "lathe.daemon.ok");
  EXPECT_EQ(Get(r, "lathe.capture").finding.outcome, "lathe.capture.ok");
  m.writable.clear();
  m.writable.insert("/tmp");
  EXPECT_EQ(Outcome(m, "lathe.home"), "lathe.home.not_writable");
  // A user of the system daemon: its home is root's, and nothing proposes to hand it over.
  m.home_is_others = true;
  EXPECT_EQ(Outcome(m, "lathe.home"), "lathe.home.system");
  Report u = RunOn(m);
  EXPECT_EQ(Get(u, "lathe.home").severity, Severity::kOk);
}

TEST(LatheChecks, StoreFsckSummary) {
  FakeSystemView m = HealthyMachine();
  EXPECT_EQ(Outcome(m, "lathe.store"), "lathe.store.none");
  m.unreadable_store_dir = "/var/lib/lathe/store";  // a user and the system daemon's store
  EXPECT_EQ(Outcome(m, "lathe.store"), "lathe.store.not_readable");
  m.unreadable_store_dir.clear();
  m.store_dir = "/var/lib/lathe/store";
  m.SetCommand(
      "lathe snap",
      CommandOutput{0, R"({"ok":true,"packs":3,"chunks":120,"snapshots":7,"problems":[]})", ""});
  Report r = RunOn(m);
  EXPECT_EQ(Get(r, "lathe.store").finding.outcome, "lathe.store.ok");
  EXPECT_EQ(Value(Get(r, "lathe.store"), "snapshots"), "7");
  m.SetCommand("lathe snap", CommandOutput{1, R"({"ok":false,"packs":3,"chunks":120,"snapshots":7,
      "problems":[{"snapshot":"ab","file":"ckpt/model.pt","chunk":"cd","pack":"","what":"hash mismatch"}]})",
                                           ""});
  r = RunOn(m);
  EXPECT_EQ(Get(r, "lathe.store").finding.outcome, "lathe.store.damaged");
  EXPECT_EQ(Value(Get(r, "lathe.store"), "first"), "ckpt/model.pt: hash mismatch");
  EXPECT_EQ(Get(r, "lathe.store").severity, Severity::kFail);
  m.SetCommand("lathe snap", Status::DeadlineExceeded("killed after 10 s"));
  EXPECT_EQ(Outcome(m, "lathe.store"), "lathe.store.slow");
  m.SetCommand("lathe snap", CommandOutput{1, "", "cannot open index.db"});
  EXPECT_EQ(Outcome(m, "lathe.store"), "lathe.store.error");
  DoctorOptions fast;
  fast.fast = true;
  EXPECT_EQ(Get(RunOn(m, fast), "lathe.store").finding.outcome, "lathe.store.fast");
}

TEST(LatheChecks, CaptureRoundTripNeedsTheDaemonAndReportsItsLatency) {
  FakeSystemView m = HealthyMachine();
  m.capture = CaptureResult{"0123456789abcdef0123", 420, "", ""};
  EXPECT_EQ(Outcome(m, "lathe.capture"), "lathe.capture.no_daemon");
  m.daemon = Status::OK();
  Report r = RunOn(m);
  EXPECT_EQ(Get(r, "lathe.capture").finding.outcome, "lathe.capture.ok");
  EXPECT_EQ(Value(Get(r, "lathe.capture"), "ms"), "420");
  EXPECT_EQ(Value(Get(r, "lathe.capture"), "snapshot"), "0123456789ab");
  // Captured, but the test run could not be removed: a warning naming it.
  m.capture = CaptureResult{"0123456789abcdef0123", 420, "r3k7q0m9x2a", "test run did not end"};
  Report left = RunOn(m);
  const CheckOutcome& l = Get(left, "lathe.capture");
  EXPECT_EQ(l.finding.outcome, "lathe.capture.left_behind");
  EXPECT_EQ(l.severity, Severity::kWarn);
  EXPECT_EQ(Value(l, "run"), "r3k7q0m9x2a");
  ExpectFilled(left);
  m.capture = Status::FailedPrecondition("checkpoint snapshot skipped: below the reserve");
  r = RunOn(m);
  EXPECT_EQ(Get(r, "lathe.capture").finding.outcome, "lathe.capture.fail");
  EXPECT_NE(Value(Get(r, "lathe.capture"), "error").find("reserve"), std::string::npos);
  ExpectFilled(r);
  DoctorOptions fast;
  fast.fast = true;
  EXPECT_EQ(Get(RunOn(m, fast), "lathe.capture").finding.outcome, "lathe.capture.fast");
}

// ---- formats ---------------------------------------------------------------------

Report ProblemReport() {
  FakeSystemView m = HealthyMachine();
  m.statfs["/dev/shm"] = {64 * kMiB, 60 * kMiB, 100000, 99990};
  m.env["http_proxy"] = "http://proxy:3128";
  m.env["TMPDIR"] = "/scratch/it's here";
  return RunOn(m);
}

TEST(ReportFormat, TableHasSymbolsDetailsAndNoColourUnlessAsked) {
  Report r = ProblemReport();
  std::string en = FormatReportTable(r, {Lang::kEn, false, true});
  EXPECT_NE(en.find("✓ sys.nofile"), std::string::npos);
  EXPECT_NE(en.find("✗ sys.shm"), std::string::npos);
  EXPECT_NE(en.find("⚠ lathe.daemon"), std::string::npos);
  EXPECT_NE(en.find("verify:   df -h /dev/shm; df -i /dev/shm"), std::string::npos);
  EXPECT_EQ(en.find("\033["), std::string::npos);
  EXPECT_NE(en.find("failed"), std::string::npos);
  std::string zh = FormatReportTable(r, {Lang::kZh, true, true});
  EXPECT_NE(zh.find("/dev/shm 只有 64MiB"), std::string::npos);
  EXPECT_NE(zh.find("场景："), std::string::npos);
  EXPECT_NE(zh.find("\033[31m✗"), std::string::npos);
}

TEST(ReportFormat, JsonCarriesSeverityValuesAndTexts) {
  Report r = ProblemReport();
  Json j = ReportToJson(r, Lang::kZh, false);
  EXPECT_EQ(j["lang"], "zh");
  EXPECT_EQ(j["exit_code"], 1);
  EXPECT_GE(j["summary"]["fail"].get<int>(), 2);
  bool seen = false;
  for (const auto& c : j["checks"]) {
    if (c["id"] != "sys.shm") continue;
    seen = true;
    EXPECT_EQ(c["severity"], "fail");
    EXPECT_EQ(c["values"]["size"], "64MiB");
    EXPECT_TRUE(c["scenario"].is_string());
    EXPECT_EQ(c["verify"], "df -h /dev/shm; df -i /dev/shm");
  }
  EXPECT_TRUE(seen);
}

TEST(ReportFormat, FixScriptQuotesValuesAndOnlyCoversProblems) {
  Report r = ProblemReport();
  std::string s = FormatFixScript(r, Lang::kEn);
  EXPECT_TRUE(s.starts_with("#!/bin/sh\n"));
  EXPECT_NE(s.find("sudo mount -o remount,size=16g /dev/shm"), std::string::npos);
  EXPECT_NE(s.find("export no_proxy=\"localhost,127.0.0.1,::1"), std::string::npos);
  EXPECT_NE(s.find("mkdir -p '/scratch/it'\\''s here'"), std::string::npos);
  EXPECT_EQ(s.find("sys.nofile"), std::string::npos);  // ok checks have no fix
  FakeSystemView healthy = HealthyMachine();
  healthy.daemon = Status::OK();
  std::string none = FormatFixScript(RunOn(healthy), Lang::kZh);
  EXPECT_NE(none.find("没有需要修复的问题"), std::string::npos);
}

TEST(ReportFormat, ShellQuote) {
  EXPECT_EQ(ShellQuote("a b"), "'a b'");
  EXPECT_EQ(ShellQuote("it's"), "'it'\\''s'");
  EXPECT_EQ(ShellQuote("$(rm -rf /)"), "'$(rm -rf /)'");
}

// ---- the real machine ------------------------------------------------------------------

TEST(RealMachine, ReportIsSane) {
  RealSystemOptions ro;
  ro.lathe_home = "/tmp/lathe-doctor-test-home";
  auto view = NewRealSystemView(ro);
  DoctorOptions o;
  o.fast = true;
  auto r = RunDoctor(*view, o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->checks.size(), AllChecks().size());
  for (const auto& c : r->checks) {
    EXPECT_NE(c.finding.outcome, "doctor.missing_text") << c.check->id;
    EXPECT_NE(c.text, nullptr) << c.check->id;
  }
  EXPECT_EQ(r->ok + r->warn + r->fail + r->skipped, static_cast<int>(r->checks.size()));
  // Facts every Linux machine has.
  EXPECT_NE(Get(*r, "sys.nofile").severity, Severity::kSkipped);
  EXPECT_EQ(Get(*r, "sys.disk_tmp").severity == Severity::kSkipped, false);
  EXPECT_EQ(Get(*r, "lathe.daemon").finding.outcome, "lathe.daemon.down");  // not checked here
  ExpectFilled(*r);
  std::string table = FormatReportTable(*r, {Lang::kEn, false, true});
  EXPECT_NE(table.find("sys.shm"), std::string::npos);
}

}  // namespace
}  // namespace lathe::doctor

namespace lathe::doctor {
namespace {

using testing::HealthyMachine;

TEST(ImageChecks, PodmanAndTheStoresSpace) {
  testing::FakeSystemView m = HealthyMachine();
  Report r = RunOn(m);
  EXPECT_EQ(Get(r, "lathe.images").finding.outcome, "lathe.images.ok");
  m.executables.erase("/usr/sbin/runc");
  EXPECT_EQ(Outcome(m, "lathe.images"), "lathe.images.missing");
  m = HealthyMachine();
  m.statfs[m.home] = {500ULL << 30, 10ULL << 30, 30'000'000, 29'000'000};
  EXPECT_EQ(Outcome(m, "lathe.images"), "lathe.images.tight");
}

// A fabricated CDI spec made for one driver and a module of another loaded.
TEST(ImageChecks, AStaleCdiSpecFailsWithTheFix) {
  testing::FakeSystemView m = HealthyMachine();
  EXPECT_EQ(Outcome(m, "gpu.cdi"), "gpu.cdi.none");
  m.dirs["/etc/cdi"] = {"nvidia.yaml"};
  m.files["/etc/cdi/nvidia.yaml"] =
      "cdiVersion: 0.5.0\nkind: nvidia.com/gpu\ncontainerEdits:\n  mounts:\n"
      "  - hostPath: /usr/lib/x86_64-linux-gnu/libnvidia-ml.so.535.104.05\n";
  EXPECT_EQ(Outcome(m, "gpu.cdi"), "gpu.cdi.no_driver");
  m.files["/sys/module/nvidia/version"] = "550.54.14\n";
  Report r = RunOn(m);
  const auto& c = Get(r, "gpu.cdi");
  EXPECT_EQ(c.finding.outcome, "gpu.cdi.stale");
  EXPECT_EQ(c.severity, Severity::kFail);
  EXPECT_EQ(Value(c, "spec"), "535.104.05");
  EXPECT_EQ(Value(c, "loaded"), "550.54.14");
  m.files["/sys/module/nvidia/version"] = "535.104.05\n";
  EXPECT_EQ(Outcome(m, "gpu.cdi"), "gpu.cdi.ok");
}

}  // namespace
}  // namespace lathe::doctor

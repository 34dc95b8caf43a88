// The cluster group against fabricated Slurm answers: each check's decision
// for the outputs scontrol, munge, sdiag, sinfo and srun give when things
// work and when they do not, the parsers, and both languages.
#include "lathe/doctor/checks_cluster.h"

#include <gtest/gtest.h>

#include "lathe/doctor/cluster_probes.h"
#include "lathe/doctor/doctor.h"
#include "lathe/doctor/report_format.h"
#include "lathe/doctor/test_util/fake_system.h"

namespace lathe::doctor {
namespace {

using testing::FakeSystemView;
using testing::HealthyMachine;
using testing::kGiB;

constexpr const char* kConf = "/shared/slurm/slurm.conf";
constexpr const char* kSock = "/shared/munge/munge.sock";

ClusterPool Pool(const std::string& partition = "debug") {
  return {"cluster", partition, "", "", "/shared/lathe", kConf, "/opt/lathe/bin/lathe", "/usr/bin"};
}

CommandOutput Ok(const std::string& out) { return CommandOutput{0, out, ""}; }

std::string Sdiag(int64_t epoch_s) {
  return "*******************************************************\n"
         "sdiag output at Sun Dec 06 19:33:13 2026 (" +
         std::to_string(epoch_s) + ")\nData since      Sun Dec 06 19:33:13 2026 (1796585593)\n";
}

// A machine whose pool `cluster` answers as a healthy Slurm 22.05 with one
// node of two fake GPUs in partition debug.
FakeSystemView ClusterMachine() {
  FakeSystemView m = HealthyMachine();
  m.AddFile(kConf, "ClusterName=lab\nAuthType=auth/munge\nAuthInfo=socket=" + std::string(kSock) +
                       "  # private munged\nPartitionName=debug Default=YES\n");
  m.executables.insert("/usr/bin/munge");
  m.executables.insert("/usr/bin/unmunge");
  m.statfs["/shared/lathe"] = {100 * kGiB, 50 * kGiB, 1000, 900};
  m.user_writable.insert("/shared/lathe");
  m.SetCommand("/bin/sh -c", Ok("STATUS:          Success (0)\nENCODE_HOST:     n1\nTTL: 300\n"));
  m.SetCommand("/usr/bin/scontrol ping", Ok("Slurmctld(primary) at ctl is UP\n"));
  m.SetCommand("/usr/bin/sdiag", Ok(Sdiag(m.now_ms / 1000)));
  m.SetCommand("/usr/bin/sinfo --noheader",
               Ok("debug*|n1|gpu:fake:2(S:0)|idle\ncpu|n2|(null)|idle\n"));
  return m;
}

Report RunCluster(const FakeSystemView& m, std::vector<ClusterPool> pools, bool job = false) {
  DoctorOptions o;
  o.only = "cluster";
  o.probes.cluster_options.config_file = "/var/lib/lathe/config.yaml";
  o.probes.cluster_options.pools = std::move(pools);
  o.probes.cluster_options.run_job = job;
  auto r = RunDoctor(m, o);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? std::move(r).value() : Report{};
}

std::vector<const CheckOutcome*> All(const Report& r, std::string_view id) {
  std::vector<const CheckOutcome*> out;
  for (const auto& c : r.checks) {
    if (c.check->id == id) out.push_back(&c);
  }
  return out;
}

const CheckOutcome& One(const Report& r, std::string_view id) {
  auto all = All(r, id);
  static CheckOutcome none;
  if (all.size() != 1) {
    ADD_FAILURE() << all.size() << " findings for " << id;
    return none;
  }
  return *all[0];
}

std::string Value(const CheckOutcome& c, const std::string& key) {
  for (const auto& a : c.finding.args) {
    if (a.key == key) return a.value;
  }
  return "<none>";
}

std::string Text(const Report& r, Lang lang) { return FormatReportTable(r, {lang, false, true}); }

// ---- no pool ------------------------------------------------------------------

TEST(ClusterChecks, WithoutPoolsEveryCheckSkipsWithTheReason) {
  FakeSystemView m = HealthyMachine();
  Report r = RunCluster(m, {});
  EXPECT_EQ(r.fail + r.warn + r.ok, 0);
  EXPECT_EQ(r.skipped, 8);
  EXPECT_EQ(One(r, "cluster.pools").finding.outcome, "cluster.pools.none");
  EXPECT_EQ(One(r, "cluster.ping").finding.outcome, "cluster.skipped.no_pool");
  EXPECT_NE(Text(r, Lang::kEn).find("no Slurm pool in /var/lib/lathe/config.yaml"),
            std::string::npos);
  EXPECT_EQ(m.run_count, 0);
}

TEST(ClusterChecks, BrokenConfigFailsUnreadableConfigSkips) {
  FakeSystemView m = HealthyMachine();
  DoctorOptions o;
  o.only = "cluster";
  o.probes.cluster_options.config_file = "/var/lib/lathe/config.yaml";
  o.probes.cluster_options.config_error = "pools.cluster.shared_dir: an absolute path";
  auto r = RunDoctor(m, o);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(One(*r, "cluster.pools").finding.outcome, "cluster.pools.no_config");
  EXPECT_EQ(One(*r, "cluster.pools").severity, Severity::kFail);
  EXPECT_EQ(One(*r, "cluster.munge").finding.outcome, "cluster.skipped.no_config");
  o.probes.cluster_options.config_unreadable = true;
  r = RunDoctor(m, o);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->fail, 0);
  EXPECT_EQ(One(*r, "cluster.pools").finding.outcome, "cluster.skipped.no_config");
}

// ---- a healthy cluster ------------------------------------------------------------

TEST(ClusterChecks, HealthyClusterPassesWithSlurmConfSet) {
  FakeSystemView m = ClusterMachine();
  Report r = RunCluster(m, {Pool()});
  EXPECT_EQ(r.fail, 0) << Text(r, Lang::kEn);
  EXPECT_EQ(r.warn, 0) << Text(r, Lang::kEn);
  EXPECT_EQ(One(r, "cluster.ping").finding.outcome, "cluster.ping.ok");
  EXPECT_EQ(One(r, "cluster.munge").finding.outcome, "cluster.munge.ok");
  EXPECT_EQ(Value(One(r, "cluster.munge"), "socket"), kSock);
  EXPECT_EQ(One(r, "cluster.clock").finding.outcome, "cluster.clock.ok");
  const CheckOutcome& part = One(r, "cluster.partition");
  EXPECT_EQ(part.finding.outcome, "cluster.partition.ok");
  EXPECT_EQ(Value(part, "gpus"), "2");
  EXPECT_EQ(Value(part, "types"), "fake");
  EXPECT_EQ(One(r, "cluster.shared_dir").finding.outcome, "cluster.shared_dir.ok");
  EXPECT_EQ(Value(One(r, "cluster.shared_dir"), "user"), "ann");
  // The test job only with --cluster.
  EXPECT_EQ(One(r, "cluster.shared_job").finding.outcome, "cluster.skipped.no_flag");
  EXPECT_EQ(One(r, "cluster.lathe_path").finding.outcome, "cluster.skipped.no_flag");
  // Every Slurm command got the pool's slurm.conf.
  ASSERT_FALSE(m.env_log.empty());
  for (const auto& line : m.env_log) {
    EXPECT_NE(line.find(std::string("SLURM_CONF=") + kConf), std::string::npos) << line;
  }
  EXPECT_NE(Text(r, Lang::kEn).find("partition debug, 1 node(s) (1 up), 2 GPU(s) (fake)"),
            std::string::npos)
      << Text(r, Lang::kEn);
}

TEST(ClusterChecks, OnePoolPerLine) {
  FakeSystemView m = ClusterMachine();
  ClusterPool second = Pool("cpu");
  second.name = "cpus";
  Report r = RunCluster(m, {Pool(), second});
  auto parts = All(r, "cluster.partition");
  ASSERT_EQ(parts.size(), 2u);
  EXPECT_EQ(parts[0]->finding.outcome, "cluster.partition.ok");
  EXPECT_EQ(parts[1]->finding.outcome, "cluster.partition.no_gpus");
  EXPECT_EQ(Value(*parts[1], "pool"), "cpus");
}

// ---- the controller ------------------------------------------------------------

TEST(ClusterChecks, ControllerDownFailsWithTheFixAndSkipsWhatNeedsIt) {
  FakeSystemView m = ClusterMachine();
  m.SetCommand("/usr/bin/scontrol ping",
               CommandOutput{1, "Slurmctld(primary) at ctl is DOWN\n*****\n", ""});
  Report r = RunCluster(m, {Pool()});
  const CheckOutcome& ping = One(r, "cluster.ping");
  EXPECT_EQ(ping.finding.outcome, "cluster.ping.down");
  EXPECT_EQ(ping.severity, Severity::kFail);
  EXPECT_EQ(Value(ping, "output"), "Slurmctld(primary) at ctl is DOWN");
  EXPECT_EQ(One(r, "cluster.partition").finding.outcome, "cluster.skipped.unreachable");
  EXPECT_EQ(One(r, "cluster.clock").finding.outcome, "cluster.skipped.unreachable");
  // munge and the shared directory do not need the controller.
  EXPECT_EQ(One(r, "cluster.munge").finding.outcome, "cluster.munge.ok");
  EXPECT_EQ(One(r, "cluster.shared_dir").finding.outcome, "cluster.shared_dir.ok");
  std::string en = Text(r, Lang::kEn);
  EXPECT_NE(en.find("Start slurmctld on the controller"), std::string::npos) << en;
  EXPECT_NE(en.find(std::string("SLURM_CONF=") + kConf + " scontrol ping"), std::string::npos);
  std::string zh = Text(r, Lang::kZh);
  EXPECT_NE(zh.find("Slurm 控制器没有响应"), std::string::npos) << zh;
  EXPECT_NE(zh.find("启动 slurmctld"), std::string::npos) << zh;
}

TEST(ClusterChecks, ControllerTimeoutNamesTheTimeout) {
  FakeSystemView m = ClusterMachine();
  m.SetCommand("/usr/bin/scontrol ping", Status::DeadlineExceeded("killed after 15000 ms"));
  Report r = RunCluster(m, {Pool()});
  const CheckOutcome& ping = One(r, "cluster.ping");
  EXPECT_EQ(ping.finding.outcome, "cluster.ping.timeout");
  EXPECT_EQ(Value(ping, "timeout"), "15 s");
  EXPECT_NE(Text(r, Lang::kEn).find("`/usr/bin/scontrol ping` did not answer within 15 s"),
            std::string::npos);
}

TEST(ClusterChecks, NoScontrolInBinDir) {
  FakeSystemView m = ClusterMachine();
  m.commands.erase("/usr/bin/scontrol ping");
  Report r = RunCluster(m, {Pool()});
  EXPECT_EQ(One(r, "cluster.ping").finding.outcome, "cluster.ping.cannot_run");
}

// ---- munge ------------------------------------------------------------------------

TEST(ClusterChecks, MungeFailureQuotesItsStatus) {
  FakeSystemView m = ClusterMachine();
  m.SetCommand("/bin/sh -c",
               CommandOutput{1, "",
                             "munge: Error: Failed to access \"/shared/munge/munge.sock\": No "
                             "such file or directory\n"});
  Report r = RunCluster(m, {Pool()});
  const CheckOutcome& c = One(r, "cluster.munge");
  EXPECT_EQ(c.finding.outcome, "cluster.munge.fail");
  EXPECT_NE(Value(c, "status").find("Failed to access"), std::string::npos);
  m.SetCommand("/bin/sh -c", CommandOutput{15, "STATUS:          Expired credential (15)\n", ""});
  r = RunCluster(m, {Pool()});
  EXPECT_EQ(Value(One(r, "cluster.munge"), "status"), "Expired credential (15)");
  m.executables.erase("/usr/bin/unmunge");
  r = RunCluster(m, {Pool()});
  EXPECT_EQ(One(r, "cluster.munge").finding.outcome, "cluster.munge.missing");
}

// ---- the clock --------------------------------------------------------------------------

TEST(ClusterChecks, ClockSkew) {
  FakeSystemView m = ClusterMachine();
  m.SetCommand("/usr/bin/sdiag", Ok(Sdiag(m.now_ms / 1000 - 30)));  // this host 30 s ahead
  Report r = RunCluster(m, {Pool()});
  EXPECT_EQ(One(r, "cluster.clock").finding.outcome, "cluster.clock.warn");
  EXPECT_EQ(Value(One(r, "cluster.clock"), "skew"), "+29.0 s");
  m.SetCommand("/usr/bin/sdiag", Ok(Sdiag(m.now_ms / 1000 + 400)));  // 400 s behind
  r = RunCluster(m, {Pool()});
  EXPECT_EQ(One(r, "cluster.clock").finding.outcome, "cluster.clock.fail");
  EXPECT_EQ(Value(One(r, "cluster.clock"), "skew"), "-400.0 s");
  EXPECT_NE(Text(r, Lang::kEn).find("Expired credential"), std::string::npos);
  m.SetCommand("/usr/bin/sdiag", CommandOutput{1, "", "sdiag: error: Access denied\n"});
  r = RunCluster(m, {Pool()});
  EXPECT_EQ(One(r, "cluster.clock").finding.outcome, "cluster.clock.unknown");
}

// ---- the partition ------------------------------------------------------------------------

TEST(ClusterChecks, MissingPartitionIsNamedWithThoseThatExist) {
  FakeSystemView m = ClusterMachine();
  Report r = RunCluster(m, {Pool("gpu-a100")});
  const CheckOutcome& c = One(r, "cluster.partition");
  EXPECT_EQ(c.finding.outcome, "cluster.partition.not_found");
  EXPECT_EQ(c.severity, Severity::kFail);
  EXPECT_EQ(Value(c, "partition"), "gpu-a100");
  EXPECT_EQ(Value(c, "partitions"), "debug (default), cpu");
  EXPECT_NE(Text(r, Lang::kEn).find("partition gpu-a100 does not exist"), std::string::npos);
  EXPECT_NE(Text(r, Lang::kZh).find("分区 gpu-a100 不存在"), std::string::npos);
}

TEST(ClusterChecks, DefaultPartitionNodesDownAndNoDefault) {
  FakeSystemView m = ClusterMachine();
  Report r = RunCluster(m, {Pool("")});
  EXPECT_EQ(One(r, "cluster.partition").finding.outcome, "cluster.partition.ok");
  EXPECT_EQ(Value(One(r, "cluster.partition"), "partition"), "debug");
  m.SetCommand("/usr/bin/sinfo --noheader",
               Ok("debug|n1|gpu:a100:4(S:0,1)|down*\ndebug|n2|gpu:a100:4(S:0,1)|drain\n"));
  r = RunCluster(m, {Pool("")});
  EXPECT_EQ(One(r, "cluster.partition").finding.outcome, "cluster.partition.no_default");
  r = RunCluster(m, {Pool("debug")});
  EXPECT_EQ(One(r, "cluster.partition").finding.outcome, "cluster.partition.no_node_up");
  EXPECT_EQ(Value(One(r, "cluster.partition"), "gpus"), "8");
}

// ---- the shared directory ----------------------------------------------------------------

TEST(ClusterChecks, SharedDirMissingNotWritableOrOnlyForAdminMadeDirs) {
  FakeSystemView m = ClusterMachine();
  m.user_writable.clear();
  Report r = RunCluster(m, {Pool()});
  EXPECT_EQ(One(r, "cluster.shared_dir").finding.outcome, "cluster.shared_dir.not_writable");
  EXPECT_NE(Text(r, Lang::kEn).find("chmod 1777 /shared/lathe"), std::string::npos);
  // The user's own directory, made by an administrator, is what counts.
  m.statfs["/shared/lathe/ann"] = m.statfs["/shared/lathe"];
  m.user_writable.insert("/shared/lathe/ann");
  r = RunCluster(m, {Pool()});
  EXPECT_EQ(One(r, "cluster.shared_dir").finding.outcome, "cluster.shared_dir.ok");
  EXPECT_EQ(Value(One(r, "cluster.shared_dir"), "probed"), "/shared/lathe/ann");
  m.statfs.erase("/shared/lathe");
  r = RunCluster(m, {Pool()});
  EXPECT_EQ(One(r, "cluster.shared_dir").finding.outcome, "cluster.shared_dir.missing");
}

// ---- the test job --------------------------------------------------------------------------

TEST(ClusterChecks, TestJobSeesTheMarkerAndLathe) {
  FakeSystemView m = ClusterMachine();
  m.SetCommand("/usr/bin/srun --job-name", Ok("marker=written\nnode=n1\nlathe=0.1.0\n"));
  m.jobs_share_files = true;
  Report r = RunCluster(m, {Pool()}, true);
  EXPECT_EQ(r.fail, 0) << Text(r, Lang::kEn);
  const CheckOutcome& job = One(r, "cluster.shared_job");
  EXPECT_EQ(job.finding.outcome, "cluster.shared_job.ok");
  EXPECT_TRUE(Value(job, "marker").starts_with("/shared/lathe/.lathe-doctor-"));
  ASSERT_EQ(m.removed.size(), 1u);  // the marker is removed again
  EXPECT_EQ(m.removed[0], Value(job, "marker"));
  // A job on a node whose shared_dir is a local directory: its file is not seen here.
  m.jobs_share_files = false;
  m.job_files.clear();
  r = RunCluster(m, {Pool()}, true);
  EXPECT_EQ(One(r, "cluster.shared_job").finding.outcome, "cluster.shared_job.not_shared");
  EXPECT_EQ(Value(One(r, "cluster.shared_job"), "node"), "n1");
  EXPECT_EQ(One(r, "cluster.lathe_path").finding.outcome, "cluster.lathe_path.ok");
  EXPECT_EQ(Value(One(r, "cluster.lathe_path"), "version"), "0.1.0");

  m.SetCommand("/usr/bin/srun --job-name", Ok("marker=written\nnode=n1\nlathe=missing\n"));
  r = RunCluster(m, {Pool()}, true);
  EXPECT_EQ(One(r, "cluster.lathe_path").finding.outcome, "cluster.lathe_path.missing");
  EXPECT_NE(Text(r, Lang::kEn).find("n1 finds no executable /opt/lathe/bin/lathe"),
            std::string::npos);

  m.SetCommand("/usr/bin/srun --job-name",
               Ok("marker=failed: sh: 1: cannot create /shared/lathe/.x: Read-only file "
                  "system\nnode=n1\nlathe=0.1.0\n"));
  r = RunCluster(m, {Pool()}, true);
  EXPECT_EQ(One(r, "cluster.shared_job").finding.outcome, "cluster.shared_job.cannot_write");
  EXPECT_NE(Value(One(r, "cluster.shared_job"), "error").find("Read-only file system"),
            std::string::npos);
}

TEST(ClusterChecks, TestJobTimeoutCancelsTheJob) {
  FakeSystemView m = ClusterMachine();
  m.SetCommand("/usr/bin/srun --job-name", Status::DeadlineExceeded("killed after 60000 ms"));
  m.SetCommand("/usr/bin/scancel --name=", Ok(""));
  Report r = RunCluster(m, {Pool()}, true);
  EXPECT_EQ(One(r, "cluster.shared_job").finding.outcome, "cluster.shared_job.timeout");
  EXPECT_EQ(Value(One(r, "cluster.shared_job"), "timeout"), "60 s");
  EXPECT_EQ(One(r, "cluster.lathe_path").finding.outcome, "cluster.lathe_path.no_job");
  bool cancelled = false;
  for (const auto& l : m.env_log) cancelled = cancelled || l.starts_with("/usr/bin/scancel");
  EXPECT_TRUE(cancelled);
  m.SetCommand(
      "/usr/bin/srun --job-name",
      CommandOutput{1, "", "srun: error: Unable to allocate resources: Invalid account\n"});
  r = RunCluster(m, {Pool()}, true);
  EXPECT_EQ(One(r, "cluster.shared_job").finding.outcome, "cluster.shared_job.failed");
  EXPECT_EQ(Value(One(r, "cluster.shared_job"), "error"),
            "srun: error: Unable to allocate resources: Invalid account");
}

// ---- parsers -----------------------------------------------------------------------------

TEST(ClusterParsers, MungeSocketFromConf) {
  EXPECT_EQ(MungeSocketFromConf("AuthType=auth/munge\n"), "");
  EXPECT_EQ(MungeSocketFromConf("authinfo = ttl=60, socket=/run/m.sock # x\n"), "/run/m.sock");
  EXPECT_EQ(MungeSocketFromConf("#AuthInfo=socket=/no\nAuthInfo=socket=/yes\n"), "/yes");
}

TEST(ClusterParsers, SdiagAndGres) {
  EXPECT_EQ(SdiagServerTimeMs(Sdiag(1796585593)), 1796585593000);
  EXPECT_EQ(SdiagServerTimeMs("sdiag: error"), -1);
  std::vector<std::string> types;
  EXPECT_EQ(GresGpus("gpu:a100:4(S:0,1),shard:8,gpu:h100:2", &types), 6);
  EXPECT_EQ(types, (std::vector<std::string>{"a100", "h100"}));
  EXPECT_EQ(GresGpus("gpu:2", nullptr), 2);
  EXPECT_EQ(GresGpus("(null)", nullptr), 0);
}

TEST(ClusterParsers, JobReport) {
  JobReport r = ParseJobReport("marker=written\nnode=n7\nlathe=lathe 0.1.0\n");
  EXPECT_TRUE(r.complete && r.marker_written && r.lathe_found);
  EXPECT_EQ(r.node, "n7");
  EXPECT_FALSE(ParseJobReport("node=n7\n").complete);
}

}  // namespace
}  // namespace lathe::doctor

#include "lathe/exec/slurm/slurm_batch.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "lathe/exec/slurm/slurm_commands.h"
#include "lathe/os/command.h"
#include "lathe/os/files.h"

// The golden files are in slurm/testdata/; LATHE_UPDATE_GOLDEN=1 rewrites
// them from what the code makes now (then read the diff before committing).
namespace lathe::exec {
namespace {

const std::string kTestdata = std::string(LATHE_SOURCE_DIR) + "/src/lathe/exec/slurm/testdata/";

void ExpectGolden(const std::string& name, const std::string& actual) {
  const std::string path = kTestdata + name;
  if (const char* u = std::getenv("LATHE_UPDATE_GOLDEN"); u != nullptr && std::string(u) == "1") {
    ASSERT_TRUE(os::WriteFileAtomic(path, actual).ok());
    return;
  }
  auto expected = os::ReadFile(path);
  ASSERT_TRUE(expected.ok()) << path << ": " << expected.status().ToString()
                             << " (LATHE_UPDATE_GOLDEN=1 writes it)";
  EXPECT_EQ(actual, *expected) << "differs from " << path;
}

// What survives a shell: `sh -c 'printf %s <quoted>'` prints `s` back.
std::string ThroughShell(const std::string& s) {
  auto r = os::RunCommand({"/bin/sh", "-c", "printf %s " + ShellQuote(s)}, 10000);
  return r.ok() && r->exit_code == 0 ? r->out : "<failed>";
}

// Every string a person may put in a run, and then some.
const std::string kHostile =
    "two words 'single' \"double\" $(touch /tmp/lathe-pwned) `id` $HOME ${PATH} \\ ; | & > < * ? "
    "\n#SBATCH --uid=0\nnew line\ttab %j %u %% ~ !";

SlurmPoolOptions Pool() {
  SlurmPoolOptions o;
  o.name = "cluster";
  o.partition = "gpu";
  o.account = "lab";
  o.qos = "normal";
  o.shared_dir = "/shared/lathe";
  o.signal_grace_ms = 90000;
  o.slurm_conf = "/etc/slurm/cluster.conf";
  o.lathe_path = "/opt/lathe/bin/lathe";
  o.bin_dir = "/opt/slurm/bin";
  return o;
}

LaunchRequest Request() {
  LaunchRequest r;
  r.run_id = "r-7f3a";
  r.run_name = "train";
  r.attempt = 2;
  r.user = RunUser{1001, 1001, {1001, 27}, "alice", "/home/alice", "/bin/bash"};
  r.argv = {"python3", "train.py", "--lr", "3e-4"};
  r.env = {{"LATHE_RUN_ID", "r-7f3a"}, {"WANDB_MODE", "offline"}};
  r.workdir = "/shared/lathe/alice/code";
  r.gpu_count = 2;
  r.cpus = 3.5;
  r.memory_bytes = (16ull << 30) + 1;    // a byte over 16 GiB: 16385 MiB
  r.time_limit_ms = 90 * 60 * 1000 + 1;  // 91 minutes
  r.attempt_dir = "/var/lib/lathe/runs/r-7f3a/attempt-2";
  r.umask = 027;
  r.checkpoint_dir = "/shared/lathe/alice/ckpt";
  return r;
}

// The launch config as the node reads it, without what comes from this
// process's own environment (LANG, LC_ALL, TZ).
std::string LaunchJson(const LaunchRequest& r, const SlurmAttemptPaths& p) {
  LaunchConfig c = SlurmLaunchConfig(Pool(), r, p);
  for (const char* k : {"LANG", "LC_ALL", "TZ"}) c.env.erase(k);
  return LaunchToJson(c).dump(2) + "\n";
}

std::string ArgvJson(const std::vector<std::string>& argv) { return Json(argv).dump(2) + "\n"; }

TEST(SlurmBatch, ShellQuotingSurvivesEveryHostileString) {
  ASSERT_TRUE(os::RemoveFile("/tmp/lathe-pwned").ok());
  EXPECT_EQ(ShellQuote(""), "''");
  EXPECT_EQ(ShellQuote("plain"), "'plain'");
  EXPECT_EQ(ShellQuote("it's"), "'it'\\''s'");
  for (const std::string& s : {std::string("plain"), std::string("it's"), std::string("''''"),
                               std::string("'$(id)'"), kHostile}) {
    EXPECT_EQ(ThroughShell(s), s);
  }
  EXPECT_FALSE(os::Exists("/tmp/lathe-pwned"));  // nothing in them was run
}

TEST(SlurmBatch, SlurmFilenamePatternsAreNotExpandedInOurPaths) {
  EXPECT_EQ(SlurmFilenameLiteral("/shared/u/r/1/slurm.out"), "/shared/u/r/1/slurm.out");
  EXPECT_EQ(SlurmFilenameLiteral("/shared/100%/%j/slurm.out"), "/shared/100%%/%%j/slurm.out");
  // With a backslash Slurm expands nothing, so a doubled % would stay doubled.
  EXPECT_EQ(SlurmFilenameLiteral("/shared/a\\b/%j"), "/shared/a\\b/%j");
}

TEST(SlurmBatch, PathsFollowTheSharedLayout) {
  SlurmAttemptPaths p = SlurmPaths("/shared/lathe/", "alice", "r-7f3a", 2);
  EXPECT_EQ(p.user_dir, "/shared/lathe/alice");
  EXPECT_EQ(p.run_dir, "/shared/lathe/alice/r-7f3a");
  EXPECT_EQ(p.log, "/shared/lathe/alice/r-7f3a/log");
  EXPECT_EQ(p.dir, "/shared/lathe/alice/r-7f3a/2");
  EXPECT_EQ(p.launch, "/shared/lathe/alice/r-7f3a/2/launch.json");
  EXPECT_EQ(p.script, "/shared/lathe/alice/r-7f3a/2/job.sh");
  EXPECT_EQ(p.slurm_out, "/shared/lathe/alice/r-7f3a/2/slurm.out");
  EXPECT_EQ(p.exit, "/shared/lathe/alice/r-7f3a/2/exit.json");
  EXPECT_EQ(p.monitor, "/shared/lathe/alice/r-7f3a/2/monitor.json");
  EXPECT_EQ(SlurmUserDirName(1001, "alice"), "alice");
  EXPECT_EQ(SlurmUserDirName(1001, ""), "1001");
}

TEST(SlurmBatch, SbatchArgvOfAFullRequest) {
  const SlurmPoolOptions pool = Pool();
  const LaunchRequest r = Request();
  const SlurmAttemptPaths p = SlurmPaths(pool.shared_dir, "alice", r.run_id, r.attempt);
  ExpectGolden("sbatch_full.json", ArgvJson(SbatchArgv("/opt/slurm/bin/sbatch", pool, r, p)));
  ExpectGolden("job_full.sh", SlurmBatchScript(pool.lathe_path, p.launch));
  ExpectGolden("launch_full.json", LaunchJson(r, p));
}

// A run's profile: its GPU type becomes the GRES type, its partition
// replaces the pool's; everything else is as for the full request.
TEST(SlurmBatch, SbatchArgvOfATypedRequestInItsOwnPartition) {
  const SlurmPoolOptions pool = Pool();
  LaunchRequest r = Request();
  r.gpu_type = "A100";
  r.partition = "gpu-a100";
  const SlurmAttemptPaths p = SlurmPaths(pool.shared_dir, "alice", r.run_id, r.attempt);
  std::vector<std::string> typed = SbatchArgv("/opt/slurm/bin/sbatch", pool, r, p);
  std::vector<std::string> plain = SbatchArgv("/opt/slurm/bin/sbatch", pool, Request(), p);
  ASSERT_EQ(typed.size(), plain.size());
  for (size_t i = 0; i < typed.size(); ++i) {
    if (plain[i] == "--gres=gpu:2") {
      EXPECT_EQ(typed[i], "--gres=gpu:A100:2");
    } else if (plain[i] == "--partition=gpu") {
      EXPECT_EQ(typed[i], "--partition=gpu-a100");
    } else {
      EXPECT_EQ(typed[i], plain[i]);
    }
  }
  // A type without GPUs asks Slurm for none.
  r.gpu_count = 0;
  for (const auto& a : SbatchArgv("/opt/slurm/bin/sbatch", pool, r, p)) {
    EXPECT_FALSE(a.starts_with("--gres")) << a;
  }
}

// Two nodes: --nodes=2 and one task per node; --gres stays per node.
TEST(SlurmBatch, SbatchArgvOfATwoNodeRequest) {
  const SlurmPoolOptions pool = Pool();
  LaunchRequest r = Request();
  r.nodes = 2;
  const SlurmAttemptPaths p = SlurmPaths(pool.shared_dir, "alice", r.run_id, r.attempt);
  const std::vector<std::string> argv = SbatchArgv("/opt/slurm/bin/sbatch", pool, r, p);
  ExpectGolden("sbatch_two_nodes.json", ArgvJson(argv));
  EXPECT_EQ(std::count(argv.begin(), argv.end(), "--nodes=2"), 1);
  EXPECT_EQ(std::count(argv.begin(), argv.end(), "--ntasks-per-node=1"), 1);
  EXPECT_EQ(std::count(argv.begin(), argv.end(), "--gres=gpu:2"), 1);
  EXPECT_EQ(std::count(argv.begin(), argv.end(), "--nodes=1"), 0);
  // One node asks for no task layout.
  for (const auto& a : SbatchArgv("/opt/slurm/bin/sbatch", pool, Request(), p)) {
    EXPECT_FALSE(a.starts_with("--ntasks")) << a;
  }
}

TEST(SlurmBatch, SbatchArgvOfAMinimalRequestLeavesOutWhatWasNotAskedFor) {
  SlurmPoolOptions pool;
  pool.name = "cluster";
  pool.shared_dir = "/shared";
  pool.signal_grace_ms = 0;
  LaunchRequest r;
  r.run_id = "r-1";
  r.attempt = 1;
  r.user = RunUser{1002, 1002, {}, "", "", ""};  // no passwd entry, no home
  r.argv = {"true"};
  const SlurmAttemptPaths p = SlurmPaths(pool.shared_dir, "1002", r.run_id, r.attempt);
  ExpectGolden("sbatch_minimal.json", ArgvJson(SbatchArgv("/usr/bin/sbatch", pool, r, p)));
  EXPECT_EQ(SlurmWorkdir(r), "/");
}

TEST(SlurmBatch, HostileStringsStaySeparateArgumentsAndQuotedWords) {
  SlurmPoolOptions pool = Pool();
  pool.shared_dir = "/shared/it's a $(dir) `x` %j";
  pool.lathe_path = "/opt/la the/'lathe' $(id)";
  LaunchRequest r = Request();
  r.argv = {"sh", "-c", kHostile, kHostile};
  r.env = {{"HOSTILE", kHostile}, {"QUOTE", "'"}, {"EMPTY", ""}};
  r.workdir = "/shared/it's a $(dir) `x` %j/w\nd";
  const SlurmAttemptPaths p = SlurmPaths(pool.shared_dir, "alice", r.run_id, r.attempt);
  const std::vector<std::string> argv = SbatchArgv("/opt/slurm/bin/sbatch", pool, r, p);
  ExpectGolden("sbatch_hostile.json", ArgvJson(argv));
  EXPECT_EQ(argv[4], "--chdir=" + r.workdir);  // one element, as it is
  EXPECT_EQ(argv.back(), p.script);
  const std::string script = SlurmBatchScript(pool.lathe_path, p.launch);
  ExpectGolden("job_hostile.sh", script);
  ExpectGolden("launch_hostile.json", LaunchJson(r, p));
  // The script's words are exactly the lathe path, __monitor, launch.json and
  // "-": a shell that prints its arguments instead of exec'ing them says so.
  ASSERT_TRUE(os::RemoveFile("/tmp/lathe-pwned").ok());
  std::string printed = script;
  printed.replace(printed.find("exec "), 5, "printf '<%s>' ");
  auto out = os::RunCommand({"/bin/sh", "-c", printed}, 10000);
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(out->out, "<" + pool.lathe_path + "><__monitor><" + p.launch + "><->");
  EXPECT_FALSE(os::Exists("/tmp/lathe-pwned"));
  // launch.json gives the values back byte for byte.
  auto back = LaunchFromJson(LaunchToJson(SlurmLaunchConfig(pool, r, p)));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->argv, r.argv);
  EXPECT_EQ(back->env.at("HOSTILE"), kHostile);
  EXPECT_EQ(back->workdir, r.workdir);
}

TEST(SlurmBatch, TheLaunchConfigLeavesTheGpusToSlurm) {
  LaunchRequest r = Request();
  r.gpus = {3};  // never placed by the daemon for this backend; ignored if it were
  const SlurmAttemptPaths p = SlurmPaths("/shared/lathe", "alice", r.run_id, r.attempt);
  LaunchConfig c = SlurmLaunchConfig(Pool(), r, p);
  EXPECT_EQ(c.env.at("CUDA_VISIBLE_DEVICES"), "");  // none unless Slurm sets it on the node
  EXPECT_EQ(c.inherit_env, kSlurmInheritedEnv);
  EXPECT_EQ(c.env.at("LATHE_SLURM_BIN_DIR"), "/opt/slurm/bin");  // __torchrun's srun
  EXPECT_TRUE(c.cgroup_dirs.empty());
  EXPECT_EQ(c.uid, 1001u);
  EXPECT_EQ(c.log_path, p.log);
  EXPECT_EQ(c.exit_path, p.exit);
  EXPECT_EQ(c.monitor_path, p.monitor);
  EXPECT_EQ(c.umask, 027u);
}

TEST(SlurmBatch, TheWarningBeforeTheTimeLimitIsAtMostHalfOfIt) {
  SlurmPoolOptions pool = Pool();  // 90 s
  LaunchRequest r = Request();
  const SlurmAttemptPaths p = SlurmPaths(pool.shared_dir, "alice", r.run_id, r.attempt);
  auto signal_of = [&](int64_t limit_ms) {
    r.time_limit_ms = limit_ms;
    for (const auto& a : SbatchArgv("sbatch", pool, r, p)) {
      if (a.rfind("--signal=", 0) == 0) return a;
    }
    return std::string();
  };
  EXPECT_EQ(signal_of(0), "--signal=B:USR1@90");
  EXPECT_EQ(signal_of(3 * 60'000), "--signal=B:USR1@90");
  EXPECT_EQ(signal_of(60'000), "--signal=B:USR1@30");
  pool.signal_grace_ms = 100'000'000;  // beyond Slurm's 65535 s
  EXPECT_EQ(signal_of(0), "--signal=B:USR1@65535");
}

// The monitor's own warning (LaunchConfig::warn_after_ms) comes when Slurm's
// would: --time in whole minutes, less the same warning.
TEST(SlurmBatch, TheMonitorKeepsTheJobsTimeAsSlurmWould) {
  SlurmPoolOptions pool = Pool();  // 90 s
  LaunchRequest r = Request();
  const SlurmAttemptPaths p = SlurmPaths(pool.shared_dir, "alice", r.run_id, r.attempt);
  auto warn_after = [&](int64_t limit_ms) {
    r.time_limit_ms = limit_ms;
    return SlurmLaunchConfig(pool, r, p).warn_after_ms;
  };
  EXPECT_EQ(warn_after(0), 0);  // no limit: none
  EXPECT_EQ(warn_after(3 * 60'000), (180 - 90) * 1000);
  EXPECT_EQ(warn_after(60'000), 30'000);                          // at most half of it
  EXPECT_EQ(warn_after(90 * 60'000 + 1), (91 * 60 - 90) * 1000);  // whole minutes
  pool.signal_grace_ms = 0;
  EXPECT_EQ(warn_after(3 * 60'000), 0);
}

TEST(SlurmBatch, TimeLimitsRoundUpToWholeMinutes) {
  EXPECT_EQ(SlurmTimeLimitMinutes(1), 1);
  EXPECT_EQ(SlurmTimeLimitMinutes(60'000), 1);
  EXPECT_EQ(SlurmTimeLimitMinutes(60'001), 2);
  EXPECT_EQ(SlurmTimeLimitMinutes(12 * 3600'000), 720);
}

TEST(SlurmBatch, CommandsGetACleanEnvironment) {
  SlurmPoolOptions pool = Pool();
  RunUser alice{1001, 1001, {1001}, "alice", "/home/alice", "/bin/bash"};
  auto env = SlurmCommandEnv(pool, &alice);
  EXPECT_EQ(env, (std::map<std::string, std::string>{
                     {"HOME", "/home/alice"},
                     {"LOGNAME", "alice"},
                     {"PATH",
                      "/opt/slurm/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:"
                      "/sbin:/bin"},
                     {"SLURM_CONF", "/etc/slurm/cluster.conf"},
                     {"USER", "alice"}}));
  SlurmPoolOptions plain;
  EXPECT_EQ(SlurmCommandEnv(plain, nullptr),
            (std::map<std::string, std::string>{
                {"PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}}));
  EXPECT_EQ(SlurmCommandPath(plain, "squeue"), "/usr/bin/squeue");
  EXPECT_EQ(SlurmCommandPath(pool, "sbatch"), "/opt/slurm/bin/sbatch");
}

TEST(SlurmBatch, SetprivTakesTheUsersRealIdentity) {
  EXPECT_EQ(SetprivPrefix(RunUser{1001, 1002, {1002, 27}, "alice", "", ""}),
            (std::vector<std::string>{"/usr/bin/setpriv", "--reuid=1001", "--regid=1002",
                                      "--groups=1002,27", "--"}));
  EXPECT_EQ(SetprivPrefix(RunUser{1001, 1002, {}, "alice", "", ""}),
            (std::vector<std::string>{"/usr/bin/setpriv", "--reuid=1001", "--regid=1002",
                                      "--init-groups", "--"}));
  EXPECT_EQ(SetprivPrefix(RunUser{4242, 4242, {}, "", "", ""}),
            (std::vector<std::string>{"/usr/bin/setpriv", "--reuid=4242", "--regid=4242",
                                      "--clear-groups", "--"}));
}

}  // namespace
}  // namespace lathe::exec

#include "lathe/exec/slurm/slurm_backend.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <functional>
#include <mutex>

#include "lathe/exec/slurm/slurm_sinfo.h"
#include "lathe/os/files.h"
#include "lathe/os/identity.h"
#include "lathe/os/test_util/fake_clock.h"

namespace lathe::exec {
namespace {

// Answers for Slurm: each command is recorded, and `answer` (by the
// command's name: "sbatch", "squeue", ...) says what it printed.
class FakeSlurm final : public SlurmCommands {
 public:
  struct Call {
    std::string name;
    std::vector<std::string> args;  // after the command's path
    std::optional<uid_t> as;        // nullopt: as the daemon
    std::map<std::string, std::string> env;
  };
  using Answer = std::function<Result<os::CommandOutput>(const Call&)>;

  Result<os::CommandOutput> Run(const std::vector<std::string>& argv, const RunUser* user,
                                const std::map<std::string, std::string>& env) override {
    Call c;
    c.name = argv[0].substr(argv[0].rfind('/') + 1);
    c.args.assign(argv.begin() + 1, argv.end());
    if (user) c.as = user->uid;
    c.env = env;
    std::lock_guard lock(mu);
    calls.push_back(c);
    auto it = answers.find(c.name);
    if (it == answers.end()) return os::CommandOutput{1, "", c.name + ": not scripted"};
    return it->second(c);
  }

  // The calls of one command.
  std::vector<Call> Of(const std::string& name) {
    std::lock_guard lock(mu);
    std::vector<Call> out;
    for (const auto& c : calls) {
      if (c.name == name) out.push_back(c);
    }
    return out;
  }

  // squeue answers with these lines (the jobs asked about that are listed).
  void Queue(std::map<std::string, std::string> states) {
    answers["squeue"] = [states](const Call& c) -> Result<os::CommandOutput> {
      std::string out;
      for (const auto& [id, line] : states) out += id + "|" + line + "\n";
      return os::CommandOutput{0, out, ""};
    };
  }

  std::mutex mu;
  std::vector<Call> calls;
  std::map<std::string, Answer> answers;
};

// The value of `key` in a catalog message's arguments ("" when none).
std::string Arg(const Status& st, const std::string& key) {
  for (const auto& a : st.args()) {
    if (a.key == key) return a.value;
  }
  return "";
}

os::CommandOutput Out(int code, std::string out, std::string err = "") {
  return os::CommandOutput{code, std::move(out), std::move(err)};
}

class SlurmBackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/lathe-slurm-backend-XXXXXX";
    base_ = ::mkdtemp(tmpl);
    ASSERT_TRUE(os::Chmod(base_, 0755).ok());  // another uid's files are made below it
    shared_ = base_ + "/shared";
    ASSERT_TRUE(os::MakeDirs(shared_, 0755).ok());
    ASSERT_TRUE(os::Chmod(shared_, 01777).ok());
    ASSERT_TRUE(os::MakeDirs(base_ + "/runs/r-1/attempt-1", 0700).ok());
    auto fake = std::make_unique<FakeSlurm>();
    slurm_ = fake.get();
    slurm_->answers["sbatch"] = [](const FakeSlurm::Call&) -> Result<os::CommandOutput> {
      return Out(0, "4242\n");
    };
    slurm_->answers["scancel"] = [](const FakeSlurm::Call&) -> Result<os::CommandOutput> {
      return Out(0, "");
    };
    auto b = SlurmBackend::Create(Options(), "/usr/local/bin/lathe", clock_, std::move(fake));
    ASSERT_TRUE(b.ok()) << b.status().ToString();
    backend_ = std::move(b).value();
  }
  void TearDown() override { std::filesystem::remove_all(base_); }

  SlurmPoolOptions Options() {
    SlurmPoolOptions o;
    o.name = "cluster";
    o.shared_dir = shared_;
    o.slurm_conf = "/etc/slurm/test.conf";
    return o;
  }
  // The tests run as root or as themselves: the run's user is this process's.
  RunUser Me() { return RunUser{os::RealUid(), os::RealGid(), {}, "me", "/home/me", "/bin/sh"}; }
  LaunchRequest Request(const std::string& run = "r-1", int attempt = 1) {
    LaunchRequest r;
    r.run_id = run;
    r.attempt = attempt;
    r.user = Me();
    r.argv = {"sh", "-c", "exit 3"};
    r.gpu_count = 1;
    r.attempt_dir = base_ + "/runs/" + run + "/attempt-" + std::to_string(attempt);
    return r;
  }
  Json Launch(const std::string& run = "r-1", int attempt = 1) {
    LaunchRequest r = Request(run, attempt);
    auto prepared = backend_->Prepare(r);
    EXPECT_TRUE(prepared.ok());
    auto l = backend_->Launch(r, *prepared);
    EXPECT_TRUE(l.ok()) << l.status().ToString();
    EXPECT_EQ(l->start_error, "");
    return l->handle;
  }
  AttemptRef Ref(const Json& handle, const std::string& run = "r-1", int attempt = 1) {
    AttemptRef a;
    a.run_id = run;
    a.attempt = attempt;
    a.attempt_dir = base_ + "/runs/" + run + "/attempt-" + std::to_string(attempt);
    a.user.uid = os::RealUid();
    a.user.name = "me";
    a.handle = handle;
    return a;
  }
  AttemptStatus PollOne(const AttemptRef& a) {
    auto s = backend_->Poll({a});
    EXPECT_EQ(s.size(), 1u);
    return s.empty() ? AttemptStatus{} : s[0];
  }
  std::string AttemptDir(const std::string& run = "r-1", int attempt = 1) {
    return shared_ + "/me/" + run + "/" + std::to_string(attempt);
  }
  void WriteExit(const std::string& dir, int code) {
    ExitRecord e;
    e.exit_code = code;
    ASSERT_TRUE(os::WriteFileAtomic(dir + "/exit.json", ExitToJson(e).dump()).ok());
  }
  // Moves the clock past any wait of the planner.
  void Later() { clock_.Advance(61'000); }

  std::string base_, shared_;
  os::FakeClock clock_;
  FakeSlurm* slurm_ = nullptr;
  std::unique_ptr<SlurmBackend> backend_;
};

// ---- options, capabilities, Check ---------------------------------------------------

TEST_F(SlurmBackendTest, CreateRefusesPathsThatAreNotAbsoluteOrHoldALineBreak) {
  os::FakeClock clock;
  for (auto change : std::vector<std::function<void(SlurmPoolOptions&)>>{
           [](SlurmPoolOptions& o) { o.shared_dir = ""; },
           [](SlurmPoolOptions& o) { o.shared_dir = "shared"; },
           [](SlurmPoolOptions& o) { o.shared_dir = "/shared\n#SBATCH"; },
           [](SlurmPoolOptions& o) { o.lathe_path = "bin/lathe"; },
           [](SlurmPoolOptions& o) { o.bin_dir = "usr/bin"; },
           [](SlurmPoolOptions& o) { o.slurm_conf = "slurm.conf"; }}) {
    SlurmPoolOptions o = Options();
    change(o);
    auto b = SlurmBackend::Create(o, "/usr/bin/lathe", clock, std::make_unique<FakeSlurm>());
    ASSERT_FALSE(b.ok());
    EXPECT_EQ(b.status().msg_id(), "slurm.bad_pool_path");
  }
  // Without lathe_path the daemon's own binary is the monitor's.
  EXPECT_FALSE(SlurmBackend::Create(Options(), "", clock, std::make_unique<FakeSlurm>()).ok());
}

TEST_F(SlurmBackendTest, CapabilitiesSayWhatSlurmHonours) {
  Capabilities c = backend_->Caps();
  EXPECT_TRUE(c.places_runs);
  EXPECT_TRUE(c.memory_limit);
  EXPECT_TRUE(c.cpu_limit);
  EXPECT_FALSE(c.ports);
  EXPECT_FALSE(c.isolated_network);
  EXPECT_FALSE(c.private_shm);
  EXPECT_FALSE(c.images);
  EXPECT_TRUE(c.multi_node);
  EXPECT_NE(c.note.find("cluster"), std::string::npos);
  EXPECT_EQ(backend_->Name(), "slurm");
}

TEST_F(SlurmBackendTest, CheckRefusesWhatTheNodesCannotHaveNamingTheFieldAndThePool) {
  RunUser u = Me();
  run::RunSpec ok;
  ok.command = {"python3", "train.py"};
  ok.gpus = 2;
  ok.cpus = 4;
  ok.memory_bytes = 1 << 30;
  ok.max_duration_ms = 3600'000;
  ok.workdir = shared_ + "/me/code";
  ok.checkpoint_dir = shared_ + "/me/ckpt";
  EXPECT_TRUE(backend_->Check(ok, u).ok()) << backend_->Check(ok, u).ToString();
  ok.checkpoint_dir = "ckpt";  // relative: taken from the workdir
  EXPECT_TRUE(backend_->Check(ok, u).ok());

  auto refused = [&](const char* field, std::function<void(run::RunSpec&)> change,
                     const char* id = "slurm.field_unsupported") {
    run::RunSpec s = ok;
    change(s);
    Status st = backend_->Check(s, u);
    EXPECT_EQ(st.code(), Code::kInvalidArgument) << field;
    EXPECT_EQ(st.msg_id(), id) << field;
    EXPECT_EQ(Arg(st, "field"), field);
    if (std::string(id) == "slurm.field_unsupported") {
      EXPECT_EQ(Arg(st, "pool"), "cluster");
    } else {
      EXPECT_EQ(Arg(st, "shared_dir"), shared_);
    }
    EXPECT_NE(st.message().find(field), std::string::npos) << st.message();
  };
  refused("type", [](run::RunSpec& s) { s.type = run::RunKind::kNotebook; });
  refused("type", [](run::RunSpec& s) { s.type = run::RunKind::kService; });
  refused("ports", [](run::RunSpec& s) { s.ports = {{"p8888", 8888, ""}}; });
  refused("network", [](run::RunSpec& s) { s.network = run::Network::kIsolated; });
  refused("shm", [](run::RunSpec& s) { s.shm_bytes = 1 << 30; });
  refused("workspace", [](run::RunSpec& s) { s.workspace.dir = "/x"; });
  refused("workspace", [](run::RunSpec& s) {
    s.workspace.git = "https://example.com/x.git";
    s.workspace.readonly = true;
  });
  refused("secret_files", [](run::RunSpec& s) { s.secret_files = {"TOKEN"}; });
  refused(
      "workdir", [](run::RunSpec& s) { s.workdir = "/home/me/code"; }, "slurm.path_not_shared");
  refused(
      "workdir", [&](run::RunSpec& s) { s.workdir = shared_ + "/../etc"; },
      "slurm.path_not_shared");
  refused(
      "workdir", [&](run::RunSpec& s) { s.workdir = shared_ + "-other/x"; },
      "slurm.path_not_shared");
  refused(
      "checkpoints.dir", [](run::RunSpec& s) { s.checkpoint_dir = "/scratch/ckpt"; },
      "slurm.path_not_shared");
  refused(
      "checkpoints.dir",
      [](run::RunSpec& s) {
        s.workdir.clear();  // the home, which is not shared here
        s.checkpoint_dir = "ckpt";
      },
      "slurm.path_not_shared");
}

// ---- Launch ---------------------------------------------------------------------

TEST_F(SlurmBackendTest, LaunchWritesTheAttemptAndSubmitsAsTheUser) {
  LaunchRequest r = Request();
  auto prepared = backend_->Prepare(r);
  ASSERT_TRUE(prepared.ok());
  EXPECT_FALSE(prepared->contains("job_id"));
  auto l = backend_->Launch(r, *prepared);
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  EXPECT_EQ(l->start_error, "");
  EXPECT_EQ(l->what, "job 4242");
  const std::string dir = AttemptDir();
  EXPECT_EQ(l->handle["job_id"], "4242");
  EXPECT_EQ(l->handle["dir"], dir);
  EXPECT_EQ(l->handle["pool"], "cluster");
  EXPECT_EQ(l->handle["log"], shared_ + "/me/r-1/log");

  // The files, with the modes the layout says.
  EXPECT_EQ(os::FileMode(shared_ + "/me").value_or(0), 0700u);
  EXPECT_EQ(os::FileMode(dir + "/launch.json").value_or(0), 0600u);
  EXPECT_EQ(os::FileMode(dir + "/job.sh").value_or(0), 0700u);
  EXPECT_EQ(os::FileMode(shared_ + "/me/r-1/log").value_or(0), 0600u);
  auto launch = LaunchFromJson(ParseJson(os::ReadFile(dir + "/launch.json").value()).value());
  ASSERT_TRUE(launch.ok());
  EXPECT_EQ(launch->argv, r.argv);
  EXPECT_EQ(launch->exit_path, dir + "/exit.json");
  EXPECT_EQ(launch->log_path, shared_ + "/me/r-1/log");
  EXPECT_EQ(os::ReadFile(dir + "/job.sh").value(),
            SlurmBatchScript("/usr/local/bin/lathe", dir + "/launch.json"));

  // One sbatch, as the user, with a clean environment.
  auto calls = slurm_->Of("sbatch");
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].as, os::RealUid());
  EXPECT_EQ(calls[0].env.at("SLURM_CONF"), "/etc/slurm/test.conf");
  EXPECT_EQ(calls[0].env.count("SBATCH_PARTITION"), 0u);
  EXPECT_EQ(calls[0].args.back(), dir + "/job.sh");
  EXPECT_NE(std::find(calls[0].args.begin(), calls[0].args.end(), "--gres=gpu:1"),
            calls[0].args.end());
  // The log is known before and after.
  EXPECT_EQ(backend_->LogPath(base_ + "/runs/r-1"), shared_ + "/me/r-1/log");
}

TEST_F(SlurmBackendTest, SbatchsRefusalIsAStartErrorWithItsMessage) {
  slurm_->answers["sbatch"] = [](const FakeSlurm::Call&) -> Result<os::CommandOutput> {
    return Out(1, "",
               "sbatch: error: Batch job submission failed: Requested node configuration is not "
               "available\n");
  };
  LaunchRequest r = Request();
  auto l = backend_->Launch(r, backend_->Prepare(r).value());
  ASSERT_TRUE(l.ok());
  EXPECT_EQ(l->start_error,
            "Slurm pool 'cluster' did not accept the job (sbatch): sbatch: error: Batch job "
            "submission failed: Requested node configuration is not available");
  EXPECT_FALSE(l->handle.contains("job_id"));
  // A timeout or an answer without a job id is a start error too.
  slurm_->answers["sbatch"] = [](const FakeSlurm::Call&) -> Result<os::CommandOutput> {
    return Status::DeadlineExceeded("sbatch did not finish within 30000 ms");
  };
  EXPECT_NE(backend_->Launch(r, Json::object())->start_error.find("30000 ms"), std::string::npos);
  slurm_->answers["sbatch"] = [](const FakeSlurm::Call&) -> Result<os::CommandOutput> {
    return Out(0, "Submitted batch job\n");
  };
  EXPECT_NE(backend_->Launch(r, Json::object())->start_error.find("no job id"), std::string::npos);
}

TEST_F(SlurmBackendTest, ParsableOutputWithAClusterNameGivesTheJobId) {
  slurm_->answers["sbatch"] = [](const FakeSlurm::Call&) -> Result<os::CommandOutput> {
    return Out(0, "77;cluster2\n");
  };
  EXPECT_EQ(Launch()["job_id"], "77");
}

TEST_F(SlurmBackendTest, AUserDirectoryThatIsNotTheUsersIsRefused) {
  if (!os::IsRoot()) GTEST_SKIP() << "needs root to give a directory to another uid";
  ASSERT_TRUE(os::MakeDir(shared_ + "/me", 0755).ok());
  ASSERT_TRUE(os::Chown(shared_ + "/me", 4242, 4242).ok());
  LaunchRequest r = Request();
  auto l = backend_->Launch(r, Json::object());
  ASSERT_TRUE(l.ok());
  EXPECT_NE(l->start_error.find("is not a directory owned by me"), std::string::npos)
      << l->start_error;
  EXPECT_TRUE(slurm_->Of("sbatch").empty());
}

TEST_F(SlurmBackendTest, FilesAreMadeWithTheUsersIdentity) {
  if (!os::IsRoot()) GTEST_SKIP() << "needs root to act as another uid";
  LaunchRequest r = Request();
  r.user = RunUser{4243, 4243, {4243}, "", "", ""};  // no passwd entry: the uid names the dir
  auto l = backend_->Launch(r, Json::object());
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  ASSERT_EQ(l->start_error, "");
  for (const std::string& p : {shared_ + "/4243", shared_ + "/4243/r-1", shared_ + "/4243/r-1/1",
                               shared_ + "/4243/r-1/log", shared_ + "/4243/r-1/1/launch.json"}) {
    auto st = os::StatFile(p);
    ASSERT_TRUE(st.ok()) << p;
    EXPECT_EQ(st->uid, 4243u) << p;
  }
  EXPECT_EQ(slurm_->Of("sbatch")[0].as, 4243u);
}

// ---- Poll -----------------------------------------------------------------------

TEST_F(SlurmBackendTest, OneSqueueForAllAttemptsWithStatesAndNotes) {
  Json h1 = Launch("r-1");
  slurm_->answers["sbatch"] = [](const FakeSlurm::Call&) -> Result<os::CommandOutput> {
    return Out(0, "4243\n");
  };
  ASSERT_TRUE(os::MakeDirs(base_ + "/runs/r-2/attempt-1", 0700).ok());
  Json h2 = Launch("r-2");
  slurm_->Queue({{"4242", "PENDING|Resources"}, {"4243", "RUNNING|None"}});
  auto s = backend_->Poll({Ref(h1, "r-1"), Ref(h2, "r-2")});
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].phase, AttemptPhase::kStarting);
  EXPECT_EQ(s[0].note, "PENDING (Resources)");
  EXPECT_EQ(s[1].phase, AttemptPhase::kRunning);
  EXPECT_EQ(s[1].note, "RUNNING");
  auto squeues = slurm_->Of("squeue");
  ASSERT_EQ(squeues.size(), 1u);
  EXPECT_FALSE(squeues[0].as.has_value());  // as the daemon, never --me
  EXPECT_NE(std::find(squeues[0].args.begin(), squeues[0].args.end(), "--jobs=4242,4243"),
            squeues[0].args.end());
  // Until the planner says so, Poll answers from what it heard.
  slurm_->Queue({{"4242", "RUNNING|None"}, {"4243", "RUNNING|None"}});
  s = backend_->Poll({Ref(h1, "r-1"), Ref(h2, "r-2")});
  EXPECT_EQ(s[0].phase, AttemptPhase::kStarting);
  EXPECT_EQ(slurm_->Of("squeue").size(), 1u);
  clock_.Advance(2000);
  s = backend_->Poll({Ref(h1, "r-1"), Ref(h2, "r-2")});
  EXPECT_EQ(s[0].phase, AttemptPhase::kRunning);
  EXPECT_EQ(slurm_->Of("squeue").size(), 2u);
}

TEST_F(SlurmBackendTest, SqueueBacksOffWhileNothingChangesAndALaunchOrSignalResetsIt) {
  Json h = Launch();
  slurm_->Queue({{"4242", "RUNNING|None"}});
  std::vector<int64_t> asked;
  const int64_t start = clock_.MonotonicMs();
  for (int i = 0; i < 700; ++i) {  // 70 s in steps of 100 ms
    size_t before = slurm_->Of("squeue").size();
    PollOne(Ref(h));
    if (slurm_->Of("squeue").size() > before) asked.push_back(clock_.MonotonicMs() - start);
    clock_.Advance(100);
  }
  // The first answer is a change (nothing was known), then nothing changes.
  EXPECT_EQ(asked, (std::vector<int64_t>{0, 2000, 6000, 14000, 30000, 62000}));
  ASSERT_TRUE(backend_->Signal(Ref(h), StopSignal::kGraceful).ok());
  const size_t before = slurm_->Of("squeue").size();
  PollOne(Ref(h));
  EXPECT_EQ(slurm_->Of("squeue").size(), before + 1);  // at once after the signal
}

TEST_F(SlurmBackendTest, AJobIsGoneOnlyWhenAbsentTwiceWithNoRecordAnywhere) {
  Json h = Launch();
  slurm_->Queue({{"4242", "RUNNING|None"}});
  EXPECT_EQ(PollOne(Ref(h)).phase, AttemptPhase::kRunning);
  slurm_->Queue({});  // an empty answer
  Later();
  AttemptStatus s = PollOne(Ref(h));
  EXPECT_EQ(s.phase, AttemptPhase::kRunning);  // once is not enough
  EXPECT_EQ(s.note, "left the queue");
  EXPECT_TRUE(slurm_->Of("sacct").empty());
  slurm_->answers["sacct"] = [](const FakeSlurm::Call&) -> Result<os::CommandOutput> {
    return Out(1, "", "Slurm accounting storage is disabled\n");
  };
  clock_.Advance(2000);  // a job leaving the queue brought the wait back to 2 s
  s = PollOne(Ref(h));
  EXPECT_EQ(s.phase, AttemptPhase::kGone);
  EXPECT_NE(s.why.find("Slurm job 4242 left the queue"), std::string::npos) << s.why;
  EXPECT_EQ(slurm_->Of("sacct").size(), 1u);
  // And it stays so, without asking again.
  Later();
  EXPECT_EQ(PollOne(Ref(h)).phase, AttemptPhase::kGone);
  EXPECT_EQ(slurm_->Of("squeue").size(), 3u);
}

TEST_F(SlurmBackendTest, AnExitRecordSeenLateStillWins) {
  Json h = Launch();
  slurm_->Queue({{"4242", "RUNNING|None"}});
  PollOne(Ref(h));
  slurm_->Queue({});
  Later();
  EXPECT_EQ(PollOne(Ref(h)).phase, AttemptPhase::kRunning);
  WriteExit(AttemptDir(), 3);  // NFS showed it only now
  clock_.Advance(2000);
  AttemptStatus s = PollOne(Ref(h));
  ASSERT_EQ(s.phase, AttemptPhase::kExited);
  EXPECT_EQ(s.exit.exit_code, 3);
  EXPECT_TRUE(slurm_->Of("sacct").empty());
}

TEST_F(SlurmBackendTest, AnExitRecordEndsTheAttemptAtTheFirstAbsence) {
  Json h = Launch();
  slurm_->Queue({{"4242", "RUNNING|None"}});
  PollOne(Ref(h));
  WriteExit(AttemptDir(), 0);
  slurm_->Queue({{"4242", "COMPLETED|None"}});  // still in slurmctld's memory, ended
  Later();
  AttemptStatus s = PollOne(Ref(h));
  ASSERT_EQ(s.phase, AttemptPhase::kExited);
  EXPECT_EQ(s.exit.exit_code, 0);
  EXPECT_EQ(s.note, "COMPLETED");
}

// An end Slurm imposed (preemption, a node lost, the time limit) is said
// beside the monitor's exit record, so the daemon does not take it for the
// program's; the program's own end says nothing of the kind.
TEST_F(SlurmBackendTest, AnEndSlurmImposedIsNamedBesideTheExitRecord) {
  Json h = Launch();
  slurm_->Queue({{"4242", "RUNNING|None"}});
  PollOne(Ref(h));
  WriteExit(AttemptDir(), 143);
  slurm_->Queue({{"4242", "PREEMPTED|None"}});
  Later();
  AttemptStatus s = PollOne(Ref(h));
  ASSERT_EQ(s.phase, AttemptPhase::kExited);
  EXPECT_EQ(s.cluster_end, "PREEMPTED");
}

TEST_F(SlurmBackendTest, TheProgramsOwnEndNamesNoClusterEnd) {
  Json h = Launch();
  slurm_->Queue({{"4242", "RUNNING|None"}});
  PollOne(Ref(h));
  WriteExit(AttemptDir(), 1);
  slurm_->Queue({{"4242", "FAILED|NonZeroExitCode"}});
  Later();
  AttemptStatus s = PollOne(Ref(h));
  ASSERT_EQ(s.phase, AttemptPhase::kExited);
  EXPECT_EQ(s.cluster_end, "");
}

// A run longer than its partition's MaxTime (or without a limit) is
// submitted with MaxTime; ending at it, or on the USR1 that comes ahead of
// it, is the partition's limit, not the run's.
TEST_F(SlurmBackendTest, APartitionsMaxTimeCapsTheJobAndItsEndIsThePartitionsLimit) {
  slurm_->answers["sinfo"] = [](const FakeSlurm::Call&) -> Result<os::CommandOutput> {
    return Out(0, "debug|debug*|vm|idle|0/2/0/2|gpu:fake:2|gpu:fake:0(IDX:N/A)|4000|1:00:00|up\n");
  };
  LaunchRequest r = Request();
  r.time_limit_ms = 3 * 3600 * 1000;  // three hours; the partition allows one
  auto prepared = backend_->Prepare(r);
  ASSERT_TRUE(prepared.ok());
  auto l = backend_->Launch(r, *prepared);
  ASSERT_TRUE(l.ok());
  auto sbatch = slurm_->Of("sbatch");
  ASSERT_EQ(sbatch.size(), 1u);
  EXPECT_NE(std::find(sbatch[0].args.begin(), sbatch[0].args.end(), "--time=60"),
            sbatch[0].args.end());
  EXPECT_TRUE(l->handle.value("time_capped", false));
  slurm_->Queue({{"4242", "RUNNING|None"}});
  PollOne(Ref(l->handle));
  ExitRecord e;
  e.signal = SIGTERM;
  e.stop_signal = SIGUSR1;
  ASSERT_TRUE(os::WriteFileAtomic(AttemptDir() + "/exit.json", ExitToJson(e).dump()).ok());
  slurm_->Queue({{"4242", "FAILED|NonZeroExitCode"}});
  Later();
  AttemptStatus s = PollOne(Ref(l->handle));
  ASSERT_EQ(s.phase, AttemptPhase::kExited);
  EXPECT_EQ(s.cluster_end, kPartitionTimeLimit);

  // A run whose own limit fits is submitted with it, and its TIMEOUT is its own.
  r = Request("r-2");
  ASSERT_TRUE(os::MakeDirs(r.attempt_dir, 0700).ok());
  r.time_limit_ms = 30 * 60 * 1000;
  prepared = backend_->Prepare(r);
  l = backend_->Launch(r, *prepared);
  ASSERT_TRUE(l.ok());
  sbatch = slurm_->Of("sbatch");
  EXPECT_NE(std::find(sbatch[1].args.begin(), sbatch[1].args.end(), "--time=30"),
            sbatch[1].args.end());
  EXPECT_FALSE(l->handle.value("time_capped", false));
}

TEST_F(SlurmBackendTest, AFailedSqueueKeepsTheLastStatesAndCountsForNothing) {
  Json h = Launch();
  slurm_->Queue({{"4242", "RUNNING|None"}});
  PollOne(Ref(h));
  slurm_->Queue({});
  Later();
  EXPECT_EQ(PollOne(Ref(h)).phase, AttemptPhase::kRunning);  // absent once
  for (int i = 0; i < 5; ++i) {                              // slurmctld down
    slurm_->answers["squeue"] = [](const FakeSlurm::Call&) -> Result<os::CommandOutput> {
      return Out(1, "", "slurm_load_jobs error: Unable to contact slurm controller\n");
    };
    Later();
    EXPECT_EQ(PollOne(Ref(h)).phase, AttemptPhase::kRunning);
    slurm_->answers["squeue"] = [](const FakeSlurm::Call&) -> Result<os::CommandOutput> {
      return Status::DeadlineExceeded("squeue did not finish within 30000 ms");
    };
    Later();
    EXPECT_EQ(PollOne(Ref(h)).phase, AttemptPhase::kRunning);
  }
  EXPECT_TRUE(slurm_->Of("sacct").empty());
  // Back, and the job is there after all: it is running, and its count starts over.
  slurm_->Queue({{"4242", "RUNNING|None"}});
  Later();
  EXPECT_EQ(PollOne(Ref(h)).phase, AttemptPhase::kRunning);
  slurm_->Queue({});
  Later();
  EXPECT_EQ(PollOne(Ref(h)).phase, AttemptPhase::kRunning);
}

TEST_F(SlurmBackendTest, AJobSlurmNoLongerKnowsIsAbsent) {
  Json h = Launch();
  slurm_->answers["squeue"] = [](const FakeSlurm::Call&) -> Result<os::CommandOutput> {
    return Out(1, "", "slurm_load_jobs error: Invalid job id specified\n");
  };
  EXPECT_EQ(PollOne(Ref(h)).note, "left the queue");
  clock_.Advance(2000);
  EXPECT_EQ(PollOne(Ref(h)).phase, AttemptPhase::kGone);
}

TEST_F(SlurmBackendTest, WithoutAnExitRecordSlurmsAccountingSaysHowItEnded) {
  Json h = Launch();
  slurm_->Queue({{"4242", "RUNNING|None"}});
  PollOne(Ref(h));
  ASSERT_TRUE(os::WriteFileAtomic(AttemptDir() + "/monitor.json", "{}").ok());  // it had started
  slurm_->Queue({});
  slurm_->answers["sacct"] = [](const FakeSlurm::Call& c) -> Result<os::CommandOutput> {
    return Out(0, "4242|OUT_OF_MEMORY|0:125\n4242.batch|OUT_OF_MEMORY|0:125\n");
  };
  Later();
  PollOne(Ref(h));
  clock_.Advance(2000);
  AttemptStatus s = PollOne(Ref(h));
  ASSERT_EQ(s.phase, AttemptPhase::kExited);
  EXPECT_TRUE(s.exit.oom_killed);
  auto sacct = slurm_->Of("sacct");
  ASSERT_EQ(sacct.size(), 1u);
  EXPECT_FALSE(sacct[0].as.has_value());
  EXPECT_NE(std::find(sacct[0].args.begin(), sacct[0].args.end(), "--jobs=4242"),
            sacct[0].args.end());
}

TEST_F(SlurmBackendTest, AJobThatEndedBeforeItsMonitorStartedTellsWhyFromSlurmsOutput) {
  Json h = Launch();
  slurm_->Queue({{"4242", "FAILED|NonZeroExitCode"}});
  ASSERT_TRUE(os::WriteFileAtomic(AttemptDir() + "/slurm.out",
                                  "/var/spool/slurmd/job04242/slurm_script: 3: exec: "
                                  "/usr/local/bin/lathe: not found\n")
                  .ok());
  PollOne(Ref(h));
  clock_.Advance(2000);
  AttemptStatus s = PollOne(Ref(h));  // no accounting: squeue's last state says it
  ASSERT_EQ(s.phase, AttemptPhase::kExited);
  EXPECT_EQ(s.exit.start_error,
            "the Slurm job ended FAILED before the run started: "
            "/var/spool/slurmd/job04242/slurm_script: 3: exec: /usr/local/bin/lathe: not found");
}

TEST_F(SlurmBackendTest, AnAttemptStillBeingSubmittedIsStartingAndAsksNothing) {
  AttemptStatus s = PollOne(Ref(Json::object()));
  EXPECT_EQ(s.phase, AttemptPhase::kStarting);
  EXPECT_TRUE(backend_->Poll({}).empty());
  EXPECT_TRUE(slurm_->Of("squeue").empty());
}

// ---- Signal, Release -----------------------------------------------------------

TEST_F(SlurmBackendTest, SignalsGoThroughScancelAsTheUser) {
  Json h = Launch();
  slurm_->answers["scancel"] = [](const FakeSlurm::Call&) -> Result<os::CommandOutput> {
    return Out(0, "");
  };
  ASSERT_TRUE(backend_->Signal(Ref(h), StopSignal::kGraceful).ok());
  auto calls = slurm_->Of("scancel");
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].args, (std::vector<std::string>{"--batch", "--signal=TERM", "4242"}));
  EXPECT_EQ(calls[0].as, os::RealUid());
  ASSERT_TRUE(backend_->Signal(Ref(h), StopSignal::kKill).ok());
  calls = slurm_->Of("scancel");
  ASSERT_EQ(calls.size(), 3u);
  EXPECT_EQ(calls[1].args, (std::vector<std::string>{"--batch", "--signal=USR2", "4242"}));
  EXPECT_EQ(calls[2].args, (std::vector<std::string>{"4242"}));
}

TEST_F(SlurmBackendTest, AJobLastSeenQueuedIsCancelledOutright) {
  Json h = Launch();
  slurm_->Queue({{"4242", "PENDING|Priority"}});
  PollOne(Ref(h));
  ASSERT_TRUE(backend_->Signal(Ref(h), StopSignal::kGraceful).ok());
  ASSERT_TRUE(backend_->Signal(Ref(h), StopSignal::kKill).ok());
  for (const auto& c : slurm_->Of("scancel")) {
    EXPECT_EQ(c.args, (std::vector<std::string>{"4242"}));
  }
  EXPECT_EQ(slurm_->Of("scancel").size(), 2u);
}

TEST_F(SlurmBackendTest, AJobThatCannotTakeTheBatchSignalIsCancelled) {
  Json h = Launch();
  slurm_->answers["scancel"] = [](const FakeSlurm::Call& c) -> Result<os::CommandOutput> {
    if (c.args[0] == "--batch") {
      return Out(1, "",
                 "scancel: error: Kill job error on job id 4242: Job is pending execution\n");
    }
    return Out(0, "");
  };
  ASSERT_TRUE(backend_->Signal(Ref(h), StopSignal::kGraceful).ok());
  auto calls = slurm_->Of("scancel");
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[1].args, (std::vector<std::string>{"4242"}));
}

TEST_F(SlurmBackendTest, ScancelFallsBackToTheDaemonOnlyWhenTheUserIsRefused) {
  Json h = Launch();
  slurm_->answers["scancel"] = [](const FakeSlurm::Call& c) -> Result<os::CommandOutput> {
    if (c.as.has_value()) {
      return Out(1, "",
                 "scancel: error: Kill job error on job id 4242: Access/permission denied\n");
    }
    return Out(0, "");
  };
  ASSERT_TRUE(backend_->Signal(Ref(h), StopSignal::kGraceful).ok());
  auto calls = slurm_->Of("scancel");
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_TRUE(calls[0].as.has_value());
  EXPECT_FALSE(calls[1].as.has_value());
  // Another failure is reported, not retried as the daemon.
  slurm_->answers["scancel"] = [](const FakeSlurm::Call&) -> Result<os::CommandOutput> {
    return Out(1, "", "scancel: error: Unable to contact slurm controller\n");
  };
  Status st = backend_->Signal(Ref(h), StopSignal::kKill);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("Unable to contact"), std::string::npos);
  calls = slurm_->Of("scancel");
  ASSERT_GT(calls.size(), 2u);
  for (size_t i = 2; i < calls.size(); ++i) EXPECT_TRUE(calls[i].as.has_value()) << i;
}

TEST_F(SlurmBackendTest, ACompletedJobNeedsNothingFromScancel) {
  Json h = Launch();
  slurm_->answers["scancel"] = [](const FakeSlurm::Call&) -> Result<os::CommandOutput> {
    return Out(1, "",
               "scancel: error: Kill job error on job id 4242: Job/step already completing or "
               "completed\n");
  };
  EXPECT_TRUE(backend_->Signal(Ref(h), StopSignal::kGraceful).ok());
  EXPECT_EQ(slurm_->Of("scancel").size(), 1u);
  EXPECT_TRUE(backend_->Signal(Ref(h), StopSignal::kKill).ok());
}

TEST_F(SlurmBackendTest, ReleaseCancelsAJobNotKnownToHaveEndedAndIsIdempotent) {
  Json h = Launch();
  slurm_->answers["scancel"] = [](const FakeSlurm::Call&) -> Result<os::CommandOutput> {
    return Out(0, "");
  };
  backend_->Release(Ref(h));
  auto calls = slurm_->Of("scancel");
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].args, (std::vector<std::string>{"4242"}));
  backend_->Release(Ref(h));  // again: scancel says it is done; no harm
  // An attempt that ended is not cancelled.
  slurm_->answers["sbatch"] = [](const FakeSlurm::Call&) -> Result<os::CommandOutput> {
    return Out(0, "4243\n");
  };
  ASSERT_TRUE(os::MakeDirs(base_ + "/runs/r-2/attempt-1", 0700).ok());
  Json h2 = Launch("r-2");
  WriteExit(AttemptDir("r-2"), 0);
  slurm_->Queue({});
  Later();
  ASSERT_EQ(PollOne(Ref(h2, "r-2")).phase, AttemptPhase::kExited);
  const size_t before = slurm_->Of("scancel").size();
  backend_->Release(Ref(h2, "r-2"));
  EXPECT_EQ(slurm_->Of("scancel").size(), before);
}

TEST_F(SlurmBackendTest, ReleaseWithoutAJobIdFindsAJobSbatchSubmittedAnyway) {
  slurm_->answers["squeue"] = [](const FakeSlurm::Call& c) -> Result<os::CommandOutput> {
    // Another attempt's, another user's, then ours.
    return Out(0, "90|lathe:r-1:0|" + std::to_string(os::RealUid()) + "\n91|lathe:r-1:1|4244\n" +
                      "92|lathe:r-1:1|" + std::to_string(os::RealUid()) + "\n");
  };
  slurm_->answers["scancel"] = [](const FakeSlurm::Call&) -> Result<os::CommandOutput> {
    return Out(0, "");
  };
  backend_->Release(Ref(Json::object()));
  auto squeue = slurm_->Of("squeue");
  ASSERT_EQ(squeue.size(), 1u);
  EXPECT_NE(std::find(squeue[0].args.begin(), squeue[0].args.end(), "--name=lathe-r-1"),
            squeue[0].args.end());
  auto calls = slurm_->Of("scancel");
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].args, (std::vector<std::string>{"92"}));
}

// ---- Readopt, LogPath ----------------------------------------------------------

TEST_F(SlurmBackendTest, ReadoptFindsAliveExitedAndNeverStarted) {
  Json h = Launch();
  // A fresh backend, as after a daemon restart.
  auto fake = std::make_unique<FakeSlurm>();
  FakeSlurm* slurm = fake.get();
  auto b = SlurmBackend::Create(Options(), "/usr/local/bin/lathe", clock_, std::move(fake)).value();
  slurm->Queue({{"4242", "PENDING|Priority"}});
  Readoption r = b->Readopt(Ref(h));
  EXPECT_EQ(r.what, Found::kAlive);  // PENDING is alive
  EXPECT_EQ(r.handle["job_id"], "4242");
  EXPECT_EQ(b->Poll({Ref(r.handle)})[0].note, "PENDING (Priority)");
  // Absent once and nothing says how it ended: alive until Poll has seen it twice.
  slurm->Queue({});
  EXPECT_EQ(b->Readopt(Ref(h)).what, Found::kAlive);
  WriteExit(AttemptDir(), 3);
  r = b->Readopt(Ref(h));
  EXPECT_EQ(r.what, Found::kExited);
  EXPECT_EQ(r.exit.exit_code, 3);
  // No job id, and Slurm has no job of this attempt's.
  slurm->Queue({});
  ASSERT_TRUE(os::MakeDirs(base_ + "/runs/r-3/attempt-1", 0700).ok());
  r = b->Readopt(Ref(Json::object(), "r-3"));
  EXPECT_EQ(r.what, Found::kNeverStarted);
  // ...or it has one: sbatch submitted it before the daemon died.
  slurm->answers["squeue"] = [](const FakeSlurm::Call& c) -> Result<os::CommandOutput> {
    for (const auto& a : c.args) {
      if (a.rfind("--name=", 0) == 0) {
        return Out(0, "93|lathe:r-3:1|" + std::to_string(os::RealUid()) + "\n");
      }
    }
    return Out(0, "93|RUNNING|None\n");
  };
  r = b->Readopt(Ref(Json::object(), "r-3"));
  EXPECT_EQ(r.what, Found::kAlive);
  EXPECT_EQ(r.handle["job_id"], "93");
  EXPECT_EQ(r.handle["dir"], AttemptDir("r-3"));
  // squeue failing: it cannot tell whether anything was submitted.
  slurm->answers["squeue"] = [](const FakeSlurm::Call&) -> Result<os::CommandOutput> {
    return Out(1, "", "Unable to contact slurm controller\n");
  };
  r = b->Readopt(Ref(Json::object(), "r-4"));
  EXPECT_EQ(r.what, Found::kGone);
  EXPECT_NE(r.why.find("Unable to contact"), std::string::npos);
}

TEST_F(SlurmBackendTest, TheLogPathSurvivesARestartThroughTheNoteInTheRunDirectory) {
  Launch();
  auto b =
      SlurmBackend::Create(Options(), "/usr/local/bin/lathe", clock_, std::make_unique<FakeSlurm>())
          .value();
  EXPECT_EQ(b->LogPath(base_ + "/runs/r-1"), shared_ + "/me/r-1/log");
  EXPECT_EQ(b->LogPath(base_ + "/runs/r-1/"), shared_ + "/me/r-1/log");
  // A run it knows nothing of: a path that does not exist.
  EXPECT_EQ(b->LogPath(base_ + "/runs/r-9"), base_ + "/runs/r-9/log");
  // A note that points outside the shared directory is not believed.
  ASSERT_TRUE(os::MakeDirs(base_ + "/runs/r-8", 0700).ok());
  ASSERT_TRUE(os::WriteFileAtomic(base_ + "/runs/r-8/slurm_log", "/etc/r-8/log\n").ok());
  EXPECT_EQ(b->LogPath(base_ + "/runs/r-8"), base_ + "/runs/r-8/log");
}

TEST_F(SlurmBackendTest, TheHandleRoundTrips) {
  SlurmHandle h{"12", "/shared/u/r/1", "cluster", 1001, 1002, "/shared/u/r/log"};
  SlurmHandle back = SlurmHandleFromJson(SlurmHandleToJson(h));
  EXPECT_EQ(back.job_id, "12");
  EXPECT_EQ(back.dir, h.dir);
  EXPECT_EQ(back.pool, "cluster");
  EXPECT_EQ(back.uid, 1001u);
  EXPECT_EQ(back.gid, 1002u);
  EXPECT_EQ(back.log, h.log);
  EXPECT_EQ(SlurmHandleFromJson(Json("junk")).job_id, "");
  EXPECT_EQ(SlurmHandleFromJson(Json::object()).dir, "");
}

TEST_F(SlurmBackendTest, DescribeRunsOneSinfoAsTheDaemon) {
  slurm_->answers["sinfo"] = [](const FakeSlurm::Call&) -> Result<os::CommandOutput> {
    return Out(0,
               "debug|debug*|n1|mixed|1/1/0/2|gpu:fake:2|gpu:fake:1(IDX:0)|4000|infinite|up\n"
               "long|long|n1|mixed|1/1/0/2|gpu:fake:2|gpu:fake:1(IDX:0)|4000|2-00:00:00|down\n");
  };
  PoolDescription d = backend_->Describe();
  ASSERT_TRUE(d.error.ok()) << d.error.ToString();
  ASSERT_EQ(d.partitions.size(), 2u);
  EXPECT_EQ(d.partitions[0].gpus_used, 1);
  EXPECT_EQ(d.partitions[1].max_time_ms, 2 * 24 * 3600 * 1000LL);
  auto calls = slurm_->Of("sinfo");
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_FALSE(calls[0].as.has_value());
  EXPECT_EQ(calls[0].args, SinfoArgs());
  EXPECT_EQ(calls[0].env.at("SLURM_CONF"), "/etc/slurm/test.conf");
}

TEST_F(SlurmBackendTest, DescribeNamesThePoolWhenSinfoFails) {
  slurm_->answers["sinfo"] = [](const FakeSlurm::Call&) -> Result<os::CommandOutput> {
    return Out(1, "", "sinfo: error: Unable to contact slurm controller (connect failure)\nmore\n");
  };
  PoolDescription d = backend_->Describe();
  EXPECT_EQ(d.error.msg_id(), "slurm.sinfo_failed");
  EXPECT_EQ(Arg(d.error, "pool"), "cluster");
  EXPECT_EQ(Arg(d.error, "error"),
            "sinfo: error: Unable to contact slurm controller (connect failure)");
  EXPECT_NE(d.error.message().find("pool cluster: sinfo failed: "), std::string::npos);
  EXPECT_TRUE(d.partitions.empty());

  slurm_->answers["sinfo"] = [](const FakeSlurm::Call&) -> Result<os::CommandOutput> {
    return Status::DeadlineExceeded("/usr/bin/sinfo did not finish within 30000 ms");
  };
  clock_.Advance(SlurmBackend::kDescribeReuseMs);  // past the reuse of the last answer
  d = backend_->Describe();
  EXPECT_EQ(d.error.msg_id(), "slurm.sinfo_failed");
  EXPECT_NE(Arg(d.error, "error").find("30000 ms"), std::string::npos);

  slurm_->answers["sinfo"] = [](const FakeSlurm::Call&) -> Result<os::CommandOutput> {
    return Out(0, "PARTITION AVAIL TIMELIMIT\n");  // another format than asked for
  };
  clock_.Advance(SlurmBackend::kDescribeReuseMs);
  d = backend_->Describe();
  EXPECT_EQ(d.error.msg_id(), "slurm.sinfo_failed");
  EXPECT_TRUE(d.partitions.empty());
}

TEST_F(SlurmBackendTest, DescribeReusesAnAnswerForAMoment) {
  int n = 0;
  slurm_->answers["sinfo"] = [&n](const FakeSlurm::Call&) -> Result<os::CommandOutput> {
    ++n;
    return Out(0, "debug|debug*|n1|idle|0/2/0/2|gpu:fake:2|gpu:fake:0(IDX:N/A)|4000|infinite|up\n");
  };
  EXPECT_EQ(backend_->Describe().partitions.size(), 1u);
  EXPECT_EQ(backend_->Describe().partitions.size(), 1u);
  EXPECT_EQ(n, 1);
  clock_.Advance(SlurmBackend::kDescribeReuseMs);
  EXPECT_EQ(backend_->Describe().partitions.size(), 1u);
  EXPECT_EQ(n, 2);
}

TEST_F(SlurmBackendTest, DescribeGivesTheConfiguredPartitionAccountAndQos) {
  auto fake = std::make_unique<FakeSlurm>();
  fake->answers["sinfo"] = [](const FakeSlurm::Call&) -> Result<os::CommandOutput> {
    return Out(0, "");
  };
  SlurmPoolOptions o = Options();
  o.partition = "gpu";
  o.account = "lab";
  o.qos = "normal";
  auto b = SlurmBackend::Create(o, "/usr/local/bin/lathe", clock_, std::move(fake));
  ASSERT_TRUE(b.ok());
  PoolDescription d = (*b)->Describe();
  EXPECT_TRUE(d.error.ok());
  EXPECT_EQ(d.partition, "gpu");
  EXPECT_EQ(d.account, "lab");
  EXPECT_EQ(d.qos, "normal");
}

// ---- slurmrestd -----------------------------------------------------------------------

// Answers for slurmrestd: each request is recorded; `answer` says what came back.
class FakeRest final : public SlurmRestTransport {
 public:
  struct Request {
    std::string path;
    Json body;
    std::map<std::string, std::string> headers;
  };
  using Answer = std::function<Result<SlurmRestReply>(const Request&)>;

  Result<SlurmRestReply> Post(const std::string& path, const std::string& body,
                              const std::map<std::string, std::string>& headers) override {
    Request r{path, ParseJson(body).value_or(Json()), headers};
    std::lock_guard lock(mu);
    requests.push_back(r);
    return answer(r);
  }

  std::mutex mu;
  std::vector<Request> requests;
  Answer answer = [](const Request&) -> Result<SlurmRestReply> {
    return SlurmRestReply{200, R"({"job_id": 5151, "errors": []})"};
  };
};

class SlurmRestBackendTest : public SlurmBackendTest {
 protected:
  void SetUp() override {
    SlurmBackendTest::SetUp();
    auto fake = std::make_unique<FakeSlurm>();
    slurm_ = fake.get();
    slurm_->answers["sbatch"] = [](const FakeSlurm::Call&) -> Result<os::CommandOutput> {
      return Out(0, "4242\n");
    };
    for (const char* name : {"scancel", "scontrol"}) {
      slurm_->answers[name] = [](const FakeSlurm::Call& c) -> Result<os::CommandOutput> {
        if (c.name == "scontrol" && c.args[0] == "token") {
          return Out(0, "SLURM_JWT=jwt-" + std::to_string(++minted) + "\n");
        }
        return Out(0, "");
      };
    }
    slurm_->Queue({});
    auto rest = std::make_unique<FakeRest>();
    rest_ = rest.get();
    SlurmPoolOptions o = Options();
    o.rest.url = "http://127.0.0.1:6820";
    o.rest.token_lifespan_ms = 600'000;
    auto b =
        SlurmBackend::Create(o, "/usr/local/bin/lathe", clock_, std::move(fake), std::move(rest));
    ASSERT_TRUE(b.ok()) << b.status().ToString();
    backend_ = std::move(b).value();
    minted = 0;
  }
  Launched LaunchIt(const std::string& run = "r-1") {
    LaunchRequest r = Request(run);
    auto l = backend_->Launch(r, backend_->Prepare(r).value());
    EXPECT_TRUE(l.ok()) << l.status().ToString();
    return l.ok() ? *l : Launched{};
  }
  static inline int minted = 0;
  FakeRest* rest_ = nullptr;
};

TEST_F(SlurmRestBackendTest, APoolWithARestUrlNeedsATransport) {
  SlurmPoolOptions o = Options();
  o.rest.url = "http://127.0.0.1:6820";
  auto b = SlurmBackend::Create(o, "/usr/local/bin/lathe", clock_, std::make_unique<FakeSlurm>());
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(Arg(b.status(), "field"), "rest.url");
}

TEST_F(SlurmRestBackendTest, SubmitsThroughSlurmrestdWithTheUsersTokenThenTurnsRequeueOff) {
  Launched l = LaunchIt();
  EXPECT_EQ(l.start_error, "");
  EXPECT_EQ(l.what, "job 5151");
  EXPECT_EQ(l.handle["job_id"], "5151");
  EXPECT_EQ(l.handle["submitted_with"], "slurmrestd");
  EXPECT_FALSE(l.handle.contains("rest_error"));
  EXPECT_TRUE(slurm_->Of("sbatch").empty());
  // The token: minted by the daemon (root) for the user, for the lifespan.
  auto tokens = slurm_->Of("scontrol");
  ASSERT_EQ(tokens.size(), 2u);
  EXPECT_EQ(tokens[0].args, (std::vector<std::string>{"token", "username=me", "lifespan=600"}));
  EXPECT_FALSE(tokens[0].as.has_value());
  // The request: the user's name and token, the job as sbatch would have it.
  ASSERT_EQ(rest_->requests.size(), 1u);
  const FakeRest::Request& q = rest_->requests[0];
  EXPECT_EQ(q.path, "/slurm/v0.0.38/job/submit");
  EXPECT_EQ(q.headers.at("X-SLURM-USER-NAME"), "me");
  EXPECT_EQ(q.headers.at("X-SLURM-USER-TOKEN"), "jwt-1");
  const std::string dir = AttemptDir();
  EXPECT_EQ(q.body["script"], SlurmBatchScript("/usr/local/bin/lathe", dir + "/launch.json"));
  EXPECT_EQ(q.body["job"]["name"], "lathe-r-1");
  EXPECT_EQ(q.body["job"]["comment"], "lathe:r-1:1");
  EXPECT_EQ(q.body["job"]["gres"], "gpu:1");
  EXPECT_EQ(q.body["job"]["requeue"], false);
  EXPECT_EQ(q.body["job"]["environment"]["SLURM_CONF"], "/etc/slurm/test.conf");
  EXPECT_EQ(q.body["job"]["standard_output"], dir + "/slurm.out");
  // Then Requeue=0, as the user (v0.0.38 ignores requeue: false).
  EXPECT_EQ(tokens[1].args, (std::vector<std::string>{"update", "JobId=5151", "Requeue=0"}));
  EXPECT_EQ(tokens[1].as, os::RealUid());
  // The backend follows the job as one sbatch submitted.
  slurm_->Queue({{"5151", "RUNNING|None|0:0"}});
  Later();
  EXPECT_EQ(PollOne(Ref(l.handle)).phase, AttemptPhase::kRunning);
}

TEST_F(SlurmRestBackendTest, ATokenIsReusedAndRenewedWithAThirdOfItsLifeLeft) {
  LaunchIt("r-1");
  LaunchIt("r-2");
  EXPECT_EQ(minted, 1);  // one token for both
  clock_.Advance(600'000 * 2 / 3 - 1000);
  LaunchIt("r-3");
  EXPECT_EQ(minted, 1);  // more than a third left
  clock_.Advance(2000);
  LaunchIt("r-4");
  EXPECT_EQ(minted, 2);  // less: renewed before it expires
  EXPECT_EQ(rest_->requests.back().headers.at("X-SLURM-USER-TOKEN"), "jwt-2");
}

TEST_F(SlurmRestBackendTest, ARefusedTokenIsMintedOnceMore) {
  rest_->answer = [](const FakeRest::Request& q) -> Result<SlurmRestReply> {
    if (q.headers.at("X-SLURM-USER-TOKEN") == "jwt-1") {
      return SlurmRestReply{
          500,
          R"({"errors": [{"error_code": 5005, "error": "Zero Bytes were transmitted or received"}]})"};
    }
    return SlurmRestReply{200, R"({"job_id": 77, "errors": []})"};
  };
  Launched l = LaunchIt();
  EXPECT_EQ(l.handle["job_id"], "77");
  EXPECT_EQ(l.handle["submitted_with"], "slurmrestd");
  EXPECT_EQ(minted, 2);
  EXPECT_EQ(rest_->requests.size(), 2u);
}

TEST_F(SlurmRestBackendTest, WhenSlurmrestdFailsSbatchSubmitsAndTheReasonIsKept) {
  rest_->answer = [](const FakeRest::Request&) -> Result<SlurmRestReply> {
    return SlurmRestReply{
        500, R"({"errors": [{"error_code": 2000, "error": "Invalid partition name specified"}]})"};
  };
  Launched l = LaunchIt();
  EXPECT_EQ(l.start_error, "");
  EXPECT_EQ(l.handle["job_id"], "4242");
  EXPECT_EQ(l.handle["submitted_with"], "sbatch");
  EXPECT_EQ(l.handle["rest_error"], "HTTP 500: Invalid partition name specified");
  EXPECT_EQ(l.what,
            "job 4242 with sbatch: slurmrestd did not submit it (HTTP 500: Invalid partition name "
            "specified)");
  EXPECT_EQ(slurm_->Of("sbatch").size(), 1u);
}

TEST_F(SlurmRestBackendTest, ATokenThatCannotBeMintedMeansSbatchSayingWhy) {
  slurm_->answers["scontrol"] = [](const FakeSlurm::Call&) -> Result<os::CommandOutput> {
    return Out(1, "", "scontrol: error: slurm_fetch_token: Unable to contact slurm controller");
  };
  Launched l = LaunchIt();
  EXPECT_EQ(l.handle["job_id"], "4242");
  EXPECT_EQ(l.handle["submitted_with"], "sbatch");
  EXPECT_NE(l.handle["rest_error"].get<std::string>().find("Unable to contact slurm controller"),
            std::string::npos);
  EXPECT_TRUE(rest_->requests.empty());
}

TEST_F(SlurmRestBackendTest, NoAnswerLooksForTheJobBeforeSubmittingAgain) {
  rest_->answer = [](const FakeRest::Request&) -> Result<SlurmRestReply> {
    return Status::DeadlineExceeded("no answer within 30000 ms");
  };
  // slurmctld took it all the same: found by its name and comment, not submitted twice.
  slurm_->answers["squeue"] = [](const FakeSlurm::Call&) -> Result<os::CommandOutput> {
    return Out(0, "9090|lathe:r-1:1|" + std::to_string(os::RealUid()) + "\n");
  };
  Launched l = LaunchIt();
  EXPECT_EQ(l.handle["job_id"], "9090");
  EXPECT_EQ(l.handle["submitted_with"], "slurmrestd");
  EXPECT_TRUE(slurm_->Of("sbatch").empty());
  // Not there: sbatch.
  slurm_->Queue({});
  l = LaunchIt("r-2");
  EXPECT_EQ(l.handle["job_id"], "4242");
  EXPECT_EQ(l.handle["rest_error"], "no answer within 30000 ms");
}

TEST_F(SlurmRestBackendTest, AJobWhoseRequeueCannotBeTurnedOffIsCancelledAndSbatchSubmits) {
  slurm_->answers["scontrol"] = [](const FakeSlurm::Call& c) -> Result<os::CommandOutput> {
    if (c.args[0] == "token") return Out(0, "SLURM_JWT=t\n");
    return Out(1, "", "slurm_update error: Access/permission denied");
  };
  Launched l = LaunchIt();
  EXPECT_EQ(l.handle["job_id"], "4242");
  EXPECT_EQ(l.handle["submitted_with"], "sbatch");
  EXPECT_NE(l.handle["rest_error"].get<std::string>().find("Access/permission denied"),
            std::string::npos);
  auto cancels = slurm_->Of("scancel");
  ASSERT_FALSE(cancels.empty());
  EXPECT_EQ(cancels[0].args, std::vector<std::string>{"5151"});
}

}  // namespace
}  // namespace lathe::exec

#include "lathe/exec/torchrun.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "lathe/os/foreground_child.h"

namespace lathe::exec {
namespace {

TorchrunArgs Args(int nproc, int nnodes, bool on_node, std::vector<std::string> script) {
  TorchrunArgs a;
  a.nproc_per_node = nproc;
  a.nnodes = nnodes;
  a.on_node = on_node;
  a.run_id = "r-abc";
  a.script = std::move(script);
  return a;
}

std::map<std::string, std::string> TwoNodeJob() {
  return {{"SLURM_JOB_NODELIST", "n[1-2]"},
          {"SLURM_JOB_NUM_NODES", "2"},
          {"SLURM_JOB_ID", "1234"},
          {"SLURM_NODEID", "1"}};
}

const std::vector<std::string> kHostile = {"train.py", "--name", "a b; rm -rf /", "$(id)", "'\"`",
                                           "--",       ""};

TEST(Torchrun, TheWrapperPutsLatheInFrontAndAtLeastOneProcessPerNode) {
  EXPECT_EQ(TorchrunWrapArgv("/usr/bin/lathe", 4, 2, "r-1", {"train.py", "--lr", "0.1"}),
            (std::vector<std::string>{"/usr/bin/lathe", "__torchrun", "4", "2", "r-1", "--",
                                      "train.py", "--lr", "0.1"}));
  // Without GPUs: one process per node.
  EXPECT_EQ(TorchrunWrapArgv("/l", 0, 1, "r-1", {"x.py"})[2], "1");
}

TEST(Torchrun, ParsingTakesBackWhatTheWrapperWrote) {
  std::vector<std::string> wrap = TorchrunWrapArgv("/l", 8, 3, "r-9", kHostile);
  auto a = ParseTorchrunArgs(std::vector<std::string>(wrap.begin() + 2, wrap.end()));
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_FALSE(a->on_node);
  EXPECT_EQ(a->nproc_per_node, 8);
  EXPECT_EQ(a->nnodes, 3);
  EXPECT_EQ(a->run_id, "r-9");
  EXPECT_EQ(a->script, kHostile);
  auto n = ParseTorchrunArgs({"--node", "2", "2", "r-1", "--", "t.py"});
  ASSERT_TRUE(n.ok());
  EXPECT_TRUE(n->on_node);
}

TEST(Torchrun, BadArgumentsAreRefused) {
  for (const auto& args :
       std::vector<std::vector<std::string>>{{},
                                             {"1", "1", "r", "--"},          // no script
                                             {"0", "1", "r", "--", "t.py"},  // no process
                                             {"1", "0", "r", "--", "t.py"},  // no node
                                             {"x", "1", "r", "--", "t.py"},  // not a number
                                             {"1", "1", "r", "t.py", "x"},   // no --
                                             {"1", "1", "", "--", "t.py"},   // no run
                                             {"-1", "1", "r", "--", "t.py"}}) {
    auto a = ParseTorchrunArgs(args);
    EXPECT_FALSE(a.ok()) << ::testing::PrintToString(args);
    if (!a.ok()) {
      EXPECT_EQ(a.status().msg_id(), "torchrun.usage");
    }
  }
}

TEST(Torchrun, OneNodeIsStandaloneWithTheGpusAsProcesses) {
  auto p = PlanTorchrun(Args(4, 1, false, kHostile), "/usr/bin/lathe", {}, {});
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  std::vector<std::string> want = {"torchrun", "--standalone", "--nnodes=1", "--nproc_per_node=4"};
  want.insert(want.end(), kHostile.begin(), kHostile.end());
  EXPECT_EQ(p->argv, want);  // every hostile argument is its own word, untouched
  EXPECT_EQ(p->env.at("LATHE_NNODES"), "1");
  EXPECT_EQ(p->env.at("LATHE_GPUS_PER_NODE"), "4");
  EXPECT_EQ(p->env.at("LATHE_NODE_RANK"), "0");
  EXPECT_EQ(p->env.count("MASTER_ADDR"), 0u);
  EXPECT_EQ(p->hosts, std::vector<std::string>{"localhost"});
  // A one-node Slurm job: the same, with the node's name in the hostfile.
  auto s = PlanTorchrun(Args(1, 1, false, {"t.py"}), "/l", {{"SLURMD_NODENAME", "n7"}}, {});
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->argv[3], "--nproc_per_node=1");
  EXPECT_EQ(s->hosts, std::vector<std::string>{"n7"});
}

TEST(Torchrun, SeveralNodesStartOneTorchrunPerNodeThroughSrun) {
  auto p = PlanTorchrun(Args(2, 2, false, kHostile), "/opt/lathe/bin/lathe", TwoNodeJob(), {});
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  std::vector<std::string> want = {"srun",
                                   "--nodes=2",
                                   "--ntasks=2",
                                   "--ntasks-per-node=1",
                                   "--kill-on-bad-exit=1",
                                   "/opt/lathe/bin/lathe",
                                   "__torchrun",
                                   "--node",
                                   "2",
                                   "2",
                                   "r-abc",
                                   "--"};
  want.insert(want.end(), kHostile.begin(), kHostile.end());
  EXPECT_EQ(p->argv, want);
  EXPECT_TRUE(p->hosts.empty());  // each node writes its own
  // What srun starts on a node parses back to the same run.
  auto again = ParseTorchrunArgs(std::vector<std::string>(want.begin() + 7, want.end()));
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->on_node);
  EXPECT_EQ(again->script, kHostile);
  // The pool's bin_dir, when its config names one: that srun, not PATH's.
  auto env = TwoNodeJob();
  env["LATHE_SLURM_BIN_DIR"] = "/opt/slurm/bin";
  auto b = PlanTorchrun(Args(2, 2, false, kHostile), "/opt/lathe/bin/lathe", env, {});
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->argv[0], "/opt/slurm/bin/srun");
}

TEST(Torchrun, OnANodeTheRendezvousIsTheFirstNodeOnAPortOfTheJob) {
  auto p = PlanTorchrun(Args(2, 2, true, kHostile), "/l", TwoNodeJob(), {"n1", "n2"});
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  std::vector<std::string> want = {"torchrun",
                                   "--nnodes=2",
                                   "--nproc_per_node=2",
                                   "--rdzv_backend=c10d",
                                   "--rdzv_endpoint=n1:29734",
                                   "--rdzv_id=r-abc"};
  want.insert(want.end(), kHostile.begin(), kHostile.end());
  EXPECT_EQ(p->argv, want);
  EXPECT_EQ(p->env.at("MASTER_ADDR"), "n1");
  EXPECT_EQ(p->env.at("MASTER_PORT"), "29734");
  EXPECT_EQ(p->env.at("LATHE_NODE_RANK"), "1");  // SLURM_NODEID
  EXPECT_EQ(p->env.at("LATHE_NNODES"), "2");
  EXPECT_EQ(p->env.at("LATHE_GPUS_PER_NODE"), "2");
  EXPECT_EQ(p->hosts, (std::vector<std::string>{"n1", "n2"}));
}

TEST(Torchrun, SeveralNodesNeedAnAllocationOfExactlyThatMany) {
  auto none = PlanTorchrun(Args(1, 2, false, {"t.py"}), "/l", {}, {});
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().msg_id(), "torchrun.no_allocation");
  auto env = TwoNodeJob();
  env["SLURM_JOB_NUM_NODES"] = "3";
  auto three = PlanTorchrun(Args(1, 2, false, {"t.py"}), "/l", env, {});
  ASSERT_FALSE(three.ok());
  EXPECT_EQ(three.status().msg_id(), "torchrun.nodes_mismatch");
  auto short_list = PlanTorchrun(Args(1, 2, true, {"t.py"}), "/l", TwoNodeJob(), {"n1"});
  ASSERT_FALSE(short_list.ok());
  EXPECT_EQ(short_list.status().msg_id(), "torchrun.nodes_mismatch");
}

TEST(Torchrun, ACommandThatNamesPythonRunsAsItIs) {
  for (const char* py : {"python", "python3", "/usr/bin/python3", "/opt/py/bin/python3.11"}) {
    auto p = PlanTorchrun(Args(1, 1, false, {py, "t.py", "x"}), "/l", {}, {});
    ASSERT_TRUE(p.ok());
    EXPECT_EQ(std::vector<std::string>(p->argv.begin() + 4, p->argv.end()),
              (std::vector<std::string>{"--no_python", py, "t.py", "x"}));
    auto n = PlanTorchrun(Args(1, 2, true, {py, "t.py"}), "/l", TwoNodeJob(), {"n1", "n2"});
    ASSERT_TRUE(n.ok());
    EXPECT_EQ(n->argv[6], "--no_python");
    EXPECT_EQ(n->argv[7], py);
  }
  for (const char* script : {"train.py", "pythonic.py", "/srv/python3/train.py", "python3-x"}) {
    auto p = PlanTorchrun(Args(1, 1, false, {script}), "/l", {}, {});
    ASSERT_TRUE(p.ok());
    EXPECT_EQ(p->argv[4], script);  // run by torchrun's Python
  }
}

TEST(Torchrun, ThePortComesFromTheJobIdInAFixedRange) {
  EXPECT_EQ(TorchrunPort("1234"), 29734);
  EXPECT_EQ(TorchrunPort("7"), 29507);
  EXPECT_EQ(TorchrunPort("999999"), 30499);
  EXPECT_EQ(TorchrunPort("1000"), 29500);
  EXPECT_EQ(TorchrunPort(""), 29500);
  EXPECT_EQ(TorchrunPort("12_3"), 29500);
  for (int id = 0; id < 5000; id += 37) {
    int port = TorchrunPort(std::to_string(id));
    EXPECT_GE(port, kTorchrunBasePort);
    EXPECT_LT(port, kTorchrunBasePort + kTorchrunPortRange);
  }
}

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A directory of the test's own, TMPDIR pointing into it, and a fake
// `torchrun` first on PATH that reports what it was given into $T and ends
// as $TORCHRUN_END says ("exit 7", "kill -TERM $$").
class TorchrunMainTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/lathe-torchrun-test-XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    std::filesystem::create_directories(dir_ + "/bin");
    std::filesystem::create_directories(dir_ + "/tmp");
    std::ofstream(dir_ + "/bin/torchrun") << "#!/bin/sh\n"
                                             "echo \"$LATHE_HOSTFILE\" > \"$T/path\"\n"
                                             "cat \"$LATHE_HOSTFILE\" > \"$T/hosts\"\n"
                                             "stat -c %a \"$LATHE_HOSTFILE\" > \"$T/mode\"\n"
                                             "echo \"$@\" > \"$T/args\"\n"
                                             "eval \"$TORCHRUN_END\"\n";
    std::filesystem::permissions(dir_ + "/bin/torchrun", std::filesystem::perms::owner_all);
    const char* path = std::getenv("PATH");
    saved_path_ = path ? path : "/usr/bin:/bin";
    ::setenv("PATH", (dir_ + "/bin:" + saved_path_).c_str(), 1);
    ::setenv("TMPDIR", (dir_ + "/tmp").c_str(), 1);
    ::setenv("T", dir_.c_str(), 1);
    for (const char* k : {"SLURM_JOB_NODELIST", "SLURM_JOB_NUM_NODES", "SLURM_JOB_ID",
                          "SLURM_NODEID", "SLURMD_NODENAME", "LATHE_HOSTFILE"}) {
      ::unsetenv(k);
    }
  }
  void TearDown() override {
    ::setenv("PATH", saved_path_.c_str(), 1);
    for (const char* k : {"TMPDIR", "T", "TORCHRUN_END", "LATHE_HOSTFILE", "LATHE_NNODES",
                          "LATHE_GPUS_PER_NODE", "LATHE_NODE_RANK"}) {
      ::unsetenv(k);
    }
    std::filesystem::remove_all(dir_);
  }
  int Main(std::vector<std::string> args) {
    args.insert(args.begin(), {"lathe", "__torchrun"});
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    return TorchrunMain(static_cast<int>(args.size()), argv.data());
  }
  std::string HostfileSeen() {
    std::string p = Slurp(dir_ + "/path");
    if (!p.empty() && p.back() == '\n') p.pop_back();
    return p;
  }

  std::string dir_, saved_path_;
};

TEST_F(TorchrunMainTest, TheHostfileIsPrivateAndGoneWhenTorchrunEnds) {
  ::setenv("TORCHRUN_END", "exit 7", 1);
  EXPECT_EQ(Main({"2", "1", "r-t1", "--", "train.py", "--lr", "0.1"}), 7);  // torchrun's code
  const std::string file = HostfileSeen();
  EXPECT_EQ(file, HostfileDir(dir_ + "/tmp") + "/r-t1-" + std::to_string(::getpid()) + ".hosts");
  EXPECT_EQ(Slurp(dir_ + "/hosts"), "localhost\n");
  EXPECT_EQ(Slurp(dir_ + "/mode"), "600\n");
  EXPECT_NE(Slurp(dir_ + "/args").find("--standalone --nnodes=1 --nproc_per_node=2 train.py"),
            std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(file));  // removed once torchrun ended
  struct stat st {};
  ASSERT_EQ(::stat(HostfileDir(dir_ + "/tmp").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
}

TEST_F(TorchrunMainTest, ATorchrunKilledByASignalStillTakesItsHostfile) {
  ::setenv("TORCHRUN_END", "kill -TERM $$", 1);
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) _exit(Main({"1", "1", "r-t2", "--", "train.py"}) == 0 ? 90 : 91);
  int ws = 0;
  ASSERT_EQ(::waitpid(pid, &ws, 0), pid);
  ASSERT_TRUE(WIFSIGNALED(ws)) << ws;  // ended as torchrun did
  EXPECT_EQ(WTERMSIG(ws), SIGTERM);
  const std::string file = HostfileSeen();
  EXPECT_NE(file, "");
  EXPECT_EQ(Slurp(dir_ + "/hosts"), "localhost\n");
  EXPECT_FALSE(std::filesystem::exists(file));
}

TEST_F(TorchrunMainTest, ASignalFromElsewhereIsPassedOnToTorchrun) {
  // torchrun's own child signals lathe __torchrun (not its parent): torchrun
  // gets it, and its trap ends it with 5. In a child process of one thread,
  // so that no other thread of the test's takes the signal.
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    auto ended = os::RunForegroundChild(
        {"/bin/sh", "-c",
         "trap 'exit 5' TERM; kill -TERM $PPID; sleep 3 >/dev/null 2>&1 & wait $!"},
        nullptr);
    _exit(!ended.ok() ? 90 : ended->exited ? ended->code : 91);
  }
  int ws = 0;
  ASSERT_EQ(::waitpid(pid, &ws, 0), pid);
  ASSERT_TRUE(WIFEXITED(ws)) << ws;
  EXPECT_EQ(WEXITSTATUS(ws), 5);
}

TEST_F(TorchrunMainTest, AHostfileDirThatIsASymlinkIsNotFollowed) {
  const std::string tmp = dir_ + "/tmp";
  std::filesystem::create_directories(dir_ + "/elsewhere");
  std::filesystem::create_directory_symlink(dir_ + "/elsewhere", HostfileDir(tmp));
  auto w = WriteHostfile(tmp, "r-t3", "12", {"n1", "n2"});
  EXPECT_FALSE(w.ok());
  EXPECT_TRUE(std::filesystem::is_empty(dir_ + "/elsewhere"));
  // torchrun still runs, without a hostfile.
  ::setenv("TORCHRUN_END", "exit 0", 1);
  EXPECT_EQ(Main({"1", "1", "r-t3", "--", "train.py"}), 0);
  EXPECT_EQ(HostfileSeen(), "");
  EXPECT_TRUE(std::filesystem::is_empty(dir_ + "/elsewhere"));
}

TEST_F(TorchrunMainTest, ALeftoverHostfileIsReplacedNotFollowed) {
  const std::string tmp = dir_ + "/tmp";
  auto first = WriteHostfile(tmp, "r/../t4", "12", {"old"});
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ(*first, HostfileDir(tmp) + "/r_.._t4-12.hosts");  // no '/' from the run id
  // An earlier attempt's file, now a symlink to somewhere else: replaced.
  std::filesystem::remove(*first);
  std::ofstream(dir_ + "/target") << "keep\n";
  std::filesystem::create_symlink(dir_ + "/target", *first);
  auto again = WriteHostfile(tmp, "r/../t4", "12", {"n1", "n2"});
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_FALSE(std::filesystem::is_symlink(*again));
  EXPECT_EQ(Slurp(*again), "n1\nn2\n");
  EXPECT_EQ(Slurp(dir_ + "/target"), "keep\n");
}

}  // namespace
}  // namespace lathe::exec

#include "lathe/daemon/workspaces.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>

#include "lathe/os/files.h"

namespace lathe::daemon {
namespace {

class WorkspacesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/lathe-workspaces-XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    r_.id = "r1";
    r_.attempt = 1;
    r_.run_dir = dir_ + "/runs/r1";
    r_.spec.command = {"python3", "train.py"};
    r_.spec.workspace.git = "https://h/r.git";
    r_.spec.workspace.ref = "dev";
    ASSERT_TRUE(os::MakeDirs(r_.run_dir, 0711).ok());
    r_.workspace = InitialWorkspace(r_, "/home/alice/");
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  void WriteRecord(const std::string& text) {
    ASSERT_TRUE(PrepareWorkspaceRecord(r_, ::getuid(), ::getgid()).ok());
    ASSERT_TRUE(os::WriteFileAtomic(WorkspaceRecordDir(r_.run_dir) + "/record.json", text).ok());
  }

  std::string dir_;
  state::RunRecord r_;
};

TEST_F(WorkspacesTest, TheClonesPlaceIsInTheUsersHome) {
  EXPECT_EQ(WorkspaceCloneDir("/home/alice/", "r1"), "/home/alice/.lathe/workspaces/r1");
  EXPECT_EQ(WorkspaceCloneDir("/", "r1"), "/.lathe/workspaces/r1");
  EXPECT_EQ(r_.workspace["dir"], "/home/alice/.lathe/workspaces/r1");
  EXPECT_EQ(r_.workspace["source"], "https://h/r.git");
  EXPECT_EQ(r_.workspace["ref"], "dev");
}

TEST_F(WorkspacesTest, ApplyWrapsWhateverArgvHolds) {
  exec::LaunchRequest q;
  q.user.home = "/home/alice";
  q.argv = {"jupyter", "notebook", "--", "x"};  // as another layer built it
  q.workdir = "/somewhere";
  r_.spec.workdir = "src";
  ApplyWorkspace(r_, "/usr/bin/lathe", q);
  std::vector<std::string> want = {"/usr/bin/lathe",
                                   "__workspace",
                                   "--git",
                                   "https://h/r.git",
                                   "--ref",
                                   "dev",
                                   "--dir",
                                   "/home/alice/.lathe/workspaces/r1",
                                   "--record",
                                   r_.run_dir + "/workspace/record.json",
                                   "--workdir",
                                   "src",
                                   "--",
                                   "jupyter",
                                   "notebook",
                                   "--",
                                   "x"};
  EXPECT_EQ(q.argv, want);
  EXPECT_EQ(q.workdir, "/");
  EXPECT_EQ(q.env["LATHE_WORKSPACE"], "/home/alice/.lathe/workspaces/r1");
  EXPECT_TRUE(q.setup_argv.empty());
  // Read-only: the clone is the setup step; the command runs as it is, in the mount.
  r_.spec.workspace.readonly = true;
  exec::LaunchRequest ro;
  ro.user.home = "/home/alice";
  ro.argv = {"make"};
  ApplyWorkspace(r_, "/usr/bin/lathe", ro);
  EXPECT_EQ(ro.argv, std::vector<std::string>{"make"});
  ASSERT_FALSE(ro.setup_argv.empty());
  EXPECT_EQ(ro.setup_argv.back(), "--setup-only");
  EXPECT_EQ(ro.readonly_paths, std::vector<std::string>{"/home/alice/.lathe/workspaces/r1"});
  EXPECT_EQ(ro.workdir, "/home/alice/.lathe/workspaces/r1/src");
  // No workspace: nothing changes.
  state::RunRecord plain;
  exec::LaunchRequest p;
  p.argv = {"true"};
  ApplyWorkspace(plain, "/usr/bin/lathe", p);
  EXPECT_EQ(p.argv, std::vector<std::string>{"true"});
}

TEST_F(WorkspacesTest, TakesTheCommitOnceAndOnlyAFullId) {
  const std::string sha(40, 'a');
  WriteRecord(R"({"commit":")" + sha + R"(","source":"https://evil/x","dir":"/etc"})");
  ASSERT_TRUE(WorkspacePending(r_));
  ASSERT_TRUE(TakeWorkspaceRecord(r_, ::getuid(), ::getgid()));
  EXPECT_EQ(r_.workspace["commit"], sha);
  // What the workspace is comes from the spec, never from the user's file.
  EXPECT_EQ(r_.workspace["source"], "https://h/r.git");
  EXPECT_EQ(r_.workspace["dir"], "/home/alice/.lathe/workspaces/r1");
  EXPECT_FALSE(WorkspacePending(r_));
  EXPECT_FALSE(TakeWorkspaceRecord(r_, ::getuid(), ::getgid()));
  EXPECT_FALSE(WorkspaceFailure(r_));
  EXPECT_NE(WorkspaceEvent(r_).find(sha), std::string::npos);
  // The next attempt: a commit that is not one is not taken.
  r_.attempt = 2;
  WriteRecord(R"j({"commit":"$(rm -rf /)"})j");
  ASSERT_TRUE(TakeWorkspaceRecord(r_, ::getuid(), ::getgid()));
  EXPECT_FALSE(r_.workspace.contains("commit"));
}

TEST_F(WorkspacesTest, AFailureBecomesTheReasonWithGitsWordsBounded) {
  WriteRecord(R"({"error":"unknown_ref","git":"fatal: Remote branch dev not found\u0007)" +
              std::string(5000, 'x') + R"(","exit_code":128})");
  ASSERT_TRUE(TakeWorkspaceRecord(r_, ::getuid(), ::getgid()));
  auto why = WorkspaceFailure(r_);
  ASSERT_TRUE(why);
  EXPECT_NE(why->find("cannot clone the workspace https://h/r.git (dev)"), std::string::npos);
  EXPECT_NE(why->find("no branch, tag or commit 'dev'"), std::string::npos);
  EXPECT_NE(why->find("git said: fatal: Remote branch dev not found"), std::string::npos);
  EXPECT_EQ(why->find('\a'), std::string::npos);
  EXPECT_LT(why->size(), 1000u);
  EXPECT_EQ(r_.workspace["error"], "unknown_ref");
}

TEST_F(WorkspacesTest, ARecordThatIsNoSmallRegularFileIsIgnored) {
  ASSERT_TRUE(PrepareWorkspaceRecord(r_, ::getuid(), ::getgid()).ok());
  const std::string path = WorkspaceRecordDir(r_.run_dir) + "/record.json";
  const std::string elsewhere = dir_ + "/elsewhere.json";
  ASSERT_TRUE(os::WriteFileAtomic(elsewhere, R"({"commit":")" + std::string(40, 'b') + "\"}").ok());
  ASSERT_EQ(::symlink(elsewhere.c_str(), path.c_str()), 0);
  EXPECT_FALSE(TakeWorkspaceRecord(r_, ::getuid(), ::getgid()));
  ASSERT_EQ(::unlink(path.c_str()), 0);
  ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0);  // would block a plain open
  EXPECT_FALSE(TakeWorkspaceRecord(r_, ::getuid(), ::getgid()));
  ASSERT_EQ(::unlink(path.c_str()), 0);
  ASSERT_TRUE(os::WriteFileAtomic(path, std::string(64 * 1024, ' ')).ok());
  EXPECT_FALSE(TakeWorkspaceRecord(r_, ::getuid(), ::getgid()));
  EXPECT_TRUE(WorkspacePending(r_));
}

TEST_F(WorkspacesTest, RemovalTakesTheRecordAndLeavesADirWorkspace) {
  WriteRecord("{}");
  state::RunRecord dir_run = r_;
  dir_run.spec.workspace = run::WorkspaceSpec{};
  dir_run.spec.workspace.dir = dir_;
  ASSERT_TRUE(RemoveWorkspace(dir_run, ::getuid(), ::getgid()).ok());
  EXPECT_FALSE(os::Exists(WorkspaceRecordDir(r_.run_dir)));
  EXPECT_TRUE(os::Exists(dir_));
}

}  // namespace
}  // namespace lathe::daemon

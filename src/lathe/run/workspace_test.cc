#include "lathe/run/workspace.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "lathe/os/command.h"
#include "lathe/os/files.h"

namespace lathe::run {
namespace {

TEST(GitErrors, AreClassifiedFromGitsOwnWords) {
  EXPECT_EQ(ClassifyGitError("warning: Could not find remote branch nope to clone.\n"
                             "fatal: Remote branch nope not found in upstream origin\n"),
            GitFailure::kUnknownRef);
  EXPECT_EQ(ClassifyGitError("fatal: couldn't find remote ref refs/heads/x\n"),
            GitFailure::kUnknownRef);
  EXPECT_EQ(ClassifyGitError("fatal: could not read Username for 'https://h': terminal prompts "
                             "disabled\n"),
            GitFailure::kAuth);
  EXPECT_EQ(ClassifyGitError("git@h: Permission denied (publickey).\nfatal: Could not read from "
                             "remote repository.\n"),
            GitFailure::kAuth);
  EXPECT_EQ(ClassifyGitError("fatal: unable to connect to 127.0.0.1:\n127.0.0.1[0: 127.0.0.1]: "
                             "errno=Connection refused\n"),
            GitFailure::kUnreachable);
  EXPECT_EQ(ClassifyGitError("fatal: unable to access 'https://nohost/r/': Could not resolve "
                             "host: nohost\n"),
            GitFailure::kUnreachable);
  EXPECT_EQ(ClassifyGitError("fatal: remote error: access denied or repository not exported: "
                             "/nope.git\n"),
            GitFailure::kNotFound);
  EXPECT_EQ(ClassifyGitError("fatal: '/nope' does not appear to be a git repository\n"),
            GitFailure::kNotFound);
  EXPECT_EQ(ClassifyGitError("something else\n"), GitFailure::kOther);
  for (auto f : {GitFailure::kAuth, GitFailure::kUnknownRef, GitFailure::kNotFound,
                 GitFailure::kUnreachable, GitFailure::kNoGit, GitFailure::kLocal}) {
    EXPECT_EQ(GitFailureFromName(GitFailureName(f)), f);
  }
}

TEST(GitErrors, MessageIsTheFatalLines) {
  EXPECT_EQ(GitMessage("Cloning into 'x'...\nwarning: w\nfatal: one\nfatal: two\n"),
            "fatal: one fatal: two");
  EXPECT_EQ(GitMessage("just this\n\n"), "just this");
  EXPECT_LE(GitMessage("fatal: " + std::string(5000, 'x')).size(), kMaxGitMessageBytes);
}

// A repository with branches main and dev and tags v1 (on main's first
// commit) and v2, in a temporary directory.
class WorkspaceClone : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/lathe-ws-test-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    repo_ = root_ + "/repo";
    Sh("git init -q -b main " + repo_ + " && cd " + repo_ +
       " && echo one > f && git add f && git " + kId + " commit -qm one && git tag v1" +
       " && echo two > f && git " + kId + " commit -qam two && git tag v2" +
       " && git checkout -qb dev && echo dev > f && git " + kId + " commit -qam dev" +
       " && git checkout -q main");
    log_ = ::open((root_ + "/log").c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  }
  void TearDown() override {
    ::close(log_);
    (void)os::RemoveAll(root_);
  }
  std::string Sh(const std::string& cmd) {
    auto r = os::RunCommand({"/bin/sh", "-c", cmd}, 30000);
    EXPECT_TRUE(r.ok() && r->exit_code == 0) << cmd << ": " << (r.ok() ? r->err : "");
    std::string out = r.ok() ? r->out : "";
    while (!out.empty() && out.back() == '\n') out.pop_back();
    return out;
  }
  std::string RevParse(const std::string& ref) {
    return Sh("git -C " + repo_ + " rev-parse " + ref + "^{commit}");
  }
  WorkspaceOutcome Clone(const std::string& ref, const std::string& dir) {
    WorkspaceJob job;
    job.git = repo_;
    job.ref = ref;
    job.dir = root_ + "/ws/" + dir;
    return MakeWorkspace(job, log_, Lang::kEn);
  }

  static constexpr const char* kId = "-c user.name=t -c user.email=t@example.com";
  std::string root_, repo_;
  int log_ = -1;
};

TEST_F(WorkspaceClone, BranchTagAndCommitAreCheckedOutWithDepthOne) {
  auto o = Clone("", "default");
  ASSERT_EQ(o.failure, GitFailure::kNone) << o.git_message << o.detail;
  EXPECT_EQ(o.commit, RevParse("main"));
  EXPECT_EQ(Sh("git -C " + root_ + "/ws/default rev-list --count HEAD"), "1");  // depth 1
  o = Clone("dev", "dev");
  ASSERT_EQ(o.failure, GitFailure::kNone) << o.git_message;
  EXPECT_EQ(o.commit, RevParse("dev"));
  o = Clone("v1", "tag");
  ASSERT_EQ(o.failure, GitFailure::kNone) << o.git_message;
  EXPECT_EQ(o.commit, RevParse("v1"));
  EXPECT_EQ(Sh("cat " + root_ + "/ws/tag/f"), "one");
  o = Clone(RevParse("v1"), "sha");
  ASSERT_EQ(o.failure, GitFailure::kNone) << o.git_message;
  EXPECT_EQ(o.commit, RevParse("v1"));
  o = Clone(RevParse("v1").substr(0, 10), "short");  // an abbreviated id: a full clone
  ASSERT_EQ(o.failure, GitFailure::kNone) << o.git_message;
  EXPECT_EQ(o.commit, RevParse("v1"));
}

TEST_F(WorkspaceClone, AMissingRefOrRepositoryIsExplained) {
  auto o = Clone("no-such-branch", "missing");
  EXPECT_EQ(o.failure, GitFailure::kUnknownRef);
  EXPECT_NE(o.git_message.find("no-such-branch"), std::string::npos) << o.git_message;
  o = Clone(std::string(40, 'a'), "missing-sha");
  EXPECT_EQ(o.failure, GitFailure::kUnknownRef) << o.git_message;
  WorkspaceJob job;
  job.git = root_ + "/nope.git";
  job.dir = root_ + "/ws/nope";
  o = MakeWorkspace(job, log_, Lang::kEn);
  EXPECT_EQ(o.failure, GitFailure::kNotFound) << o.git_message;
  EXPECT_EQ(o.ToJson(false).value("error", ""), "not_found");
}

TEST_F(WorkspaceClone, AFinishedCloneIsReusedAndAHalfOneMadeAgain) {
  auto o = Clone("dev", "again");
  ASSERT_EQ(o.failure, GitFailure::kNone);
  const std::string dir = root_ + "/ws/again";
  Sh("echo mine > " + dir + "/work.txt");
  o = Clone("dev", "again");  // a restarted run keeps its workspace
  ASSERT_EQ(o.failure, GitFailure::kNone);
  EXPECT_TRUE(os::Exists(dir + "/work.txt"));
  Sh("git -C " + dir + " config --unset lathe.source");  // as if cut short
  o = Clone("dev", "again");
  ASSERT_EQ(o.failure, GitFailure::kNone);
  EXPECT_FALSE(os::Exists(dir + "/work.txt"));
  EXPECT_EQ(o.commit, RevParse("dev"));
}

TEST_F(WorkspaceClone, InPlaceRecordsTheWorkTreesCommit) {
  WorkspaceJob job;
  job.in_place = true;
  job.dir = repo_;
  auto o = MakeWorkspace(job, log_, Lang::kEn);
  EXPECT_EQ(o.failure, GitFailure::kNone);
  EXPECT_EQ(o.commit, RevParse("HEAD"));
  EXPECT_TRUE(o.ToJson(true).value("in_place", false));
  job.dir = root_;  // not in a work tree: no commit
  o = MakeWorkspace(job, log_, Lang::kEn);
  EXPECT_EQ(o.failure, GitFailure::kNone);
  EXPECT_EQ(o.commit, "");
}

}  // namespace
}  // namespace lathe::run

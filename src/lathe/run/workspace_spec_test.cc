#include "lathe/run/workspace_spec.h"

#include <gtest/gtest.h>

#include "lathe/run/spec.h"

namespace lathe::run {
namespace {

WorkspaceSpec Str(const char* s, const GitRepositoryProbe& probe = {}) {
  auto w = ParseWorkspaceString(s, "--workspace", probe);
  EXPECT_TRUE(w.ok()) << s << ": " << w.status().ToString();
  return w.ok() ? *w : WorkspaceSpec{};
}

std::string ErrorOf(const Json& j) {
  auto w = WorkspaceFromJson(j);
  EXPECT_FALSE(w.ok()) << j.dump();
  return w.ok() ? "" : w.status().msg_id() + ": " + w.status().message();
}

TEST(WorkspaceSpec, UrlsAreGitWithAnOptionalRef) {
  EXPECT_EQ(Str("https://example.com/org/repo.git").git, "https://example.com/org/repo.git");
  EXPECT_EQ(Str("https://example.com/org/repo.git").ref, "");
  WorkspaceSpec w = Str("https://example.com/org/repo.git#v1.2");
  EXPECT_EQ(w.git, "https://example.com/org/repo.git");
  EXPECT_EQ(w.ref, "v1.2");
  EXPECT_EQ(Str("git://127.0.0.1:9418/repo#feature/x").ref, "feature/x");
  EXPECT_EQ(Str("ssh://git@host/repo").git, "ssh://git@host/repo");
  EXPECT_EQ(Str("http://host/repo").git, "http://host/repo");
  EXPECT_EQ(Str("file:///srv/repo.git#main").git, "file:///srv/repo.git");
  w = Str("git@github.com:org/repo.git#0123abcd");
  EXPECT_EQ(w.git, "git@github.com:org/repo.git");
  EXPECT_EQ(w.ref, "0123abcd");
  EXPECT_TRUE(w.dir.empty());
}

TEST(WorkspaceSpec, AbsolutePathsAreClonedOrUsedInPlace) {
  // With a probe (the CLI's): a repository is cloned, a directory used in place.
  auto bare = [](const std::string& p) { return p == "/srv/repo"; };
  EXPECT_EQ(Str("/srv/repo", bare).git, "/srv/repo");
  EXPECT_EQ(Str("/home/a/code/", bare).dir, "/home/a/code");
  EXPECT_EQ(Str("/home/a/./code/../code", bare).dir, "/home/a/code");
  // A ref always means a clone.
  WorkspaceSpec w = Str("/home/a/code#dev", bare);
  EXPECT_EQ(w.git, "/home/a/code");
  EXPECT_EQ(w.ref, "dev");
  // Without a probe (the daemon's): by the name.
  EXPECT_EQ(Str("/srv/repo.git").git, "/srv/repo.git");
  EXPECT_EQ(Str("/srv/repo").dir, "/srv/repo");
}

TEST(WorkspaceSpec, BadStringsNameTheField) {
  for (const char* bad :
       {"", "relative/dir", "-uupload-pack=touch /tmp/x", "ftp://host/repo", "https://",
        "https://host/repo#", "https://host/repo#-x", "https://host/repo#a..b",
        "https://host/repo#a b", "host:path", "/a\nb"}) {
    auto w = ParseWorkspaceString(bad, "--workspace");
    ASSERT_FALSE(w.ok()) << bad;
    EXPECT_NE(w.status().message().find("--workspace"), std::string::npos) << w.status().message();
    EXPECT_EQ(w.status().code(), Code::kInvalidArgument);
  }
}

TEST(WorkspaceSpec, ObjectForm) {
  auto w =
      WorkspaceFromJson(Json::parse(R"({"git":"https://h/r.git","ref":"main","readonly":true})"));
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  EXPECT_EQ(w->git, "https://h/r.git");
  EXPECT_EQ(w->ref, "main");
  EXPECT_TRUE(w->readonly);
  w = WorkspaceFromJson(Json::parse(R"({"dir":"/data/code/"})"));
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(w->dir, "/data/code");
  EXPECT_FALSE(w->readonly);
  w = WorkspaceFromJson(Json::parse(R"({"git":"https://h/r.git#v2"})"));
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(w->ref, "v2");
}

TEST(WorkspaceSpec, BadObjectsAreRefusedWithTheirField) {
  EXPECT_NE(ErrorOf(Json::parse(R"({"git":"x"})")).find("workspace.git"), std::string::npos);
  EXPECT_NE(ErrorOf(Json::parse(R"({"dir":"rel"})")).find("workspace.dir"), std::string::npos);
  EXPECT_NE(ErrorOf(Json::parse(R"({"git":"https://h/r","ref":"-f"})")).find("workspace.ref"),
            std::string::npos);
  EXPECT_NE(
      ErrorOf(Json::parse(R"({"git":"https://h/r","readonly":"yes"})")).find("workspace.readonly"),
      std::string::npos);
  EXPECT_NE(ErrorOf(Json::parse(R"({"git":"https://h/r","depth":1})")).find("workspace.depth"),
            std::string::npos);
  EXPECT_EQ(ErrorOf(Json::parse(R"({"git":"https://h/r","dir":"/d"})")).substr(0, 21),
            "workspace.needs_one: ");
  EXPECT_EQ(ErrorOf(Json::parse(R"({"readonly":true})")).substr(0, 21), "workspace.needs_one: ");
  EXPECT_EQ(ErrorOf(Json::parse(R"({"dir":"/d","ref":"main"})")).substr(0, 26),
            "workspace.ref_without_git:");
  EXPECT_NE(ErrorOf(Json(5)).find("workspace"), std::string::npos);
}

TEST(WorkspaceSpec, RoundTripsThroughJson) {
  for (const char* s : {R"({"git":"https://h/r.git","ref":"main","readonly":true})",
                        R"({"git":"/srv/r.git"})", R"({"dir":"/d","readonly":true})"}) {
    auto w = WorkspaceFromJson(Json::parse(s));
    ASSERT_TRUE(w.ok()) << s;
    auto back = WorkspaceFromJson(WorkspaceToJson(*w));
    ASSERT_TRUE(back.ok()) << s;
    EXPECT_EQ(*back, *w) << s;
  }
  EXPECT_TRUE(WorkspaceToJson(WorkspaceSpec{}).is_null());
}

TEST(WorkspaceSpec, CommitIds) {
  EXPECT_TRUE(IsFullCommitId(std::string(40, 'a')));
  EXPECT_TRUE(IsFullCommitId(std::string(64, '0')));
  EXPECT_FALSE(IsFullCommitId(std::string(39, 'a')));
  EXPECT_FALSE(IsFullCommitId("main"));
  EXPECT_TRUE(MayBeCommitId("0123abc"));
  EXPECT_FALSE(MayBeCommitId("abc"));
  EXPECT_FALSE(MayBeCommitId("v1.0"));
}

TEST(WorkspaceSpec, InTheRunSpec) {
  auto s = SpecFromJson(Json::parse(
      R"({"command":["make"],"workspace":"https://h/r.git#dev","workdir":"src/./app/"})"));
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->workspace.git, "https://h/r.git");
  EXPECT_EQ(s->workspace.ref, "dev");
  EXPECT_EQ(s->workdir, "src/app");  // inside the clone, made when the run starts
  auto back = SpecFromJson(SpecToJson(*s));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, *s);
  // A dir workspace: a relative workdir is inside it.
  s = SpecFromJson(Json::parse(R"({"command":["make"],"workspace":{"dir":"/d"},"workdir":"sub"})"));
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->workdir, "/d/sub");
  // An absolute workdir stays.
  s = SpecFromJson(Json::parse(R"({"command":["make"],"workspace":"/d","workdir":"/elsewhere"})"));
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->workdir, "/elsewhere");
}

TEST(WorkspaceSpec, WorkdirRulesInTheRunSpec) {
  // Without a workspace a relative workdir is refused, as before.
  auto s = SpecFromJson(Json::parse(R"({"command":["make"],"workdir":"sub"})"));
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().msg_id(), "spec.bad_workdir");
  s = SpecFromJson(Json::parse(R"({"command":["make"],"workspace":"/d","workdir":"../up"})"));
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().msg_id(), "workspace.workdir_outside");
  s = SpecFromJson(Json::parse(
      R"({"command":["make"],"workspace":"https://h/r","checkpoints":{"dir":"ckpt"}})"));
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().msg_id(), "workspace.relative_checkpoint_dir");
  s = SpecFromJson(Json::parse(R"({"command":["make"],"workspace":{"git":"nope"}})"));
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().msg_id(), "workspace.bad_value");
  EXPECT_NE(s.status().message().find("workspace.git"), std::string::npos);
}

}  // namespace
}  // namespace lathe::run

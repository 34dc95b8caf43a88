#include "lathe/daemon/sharing.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>

#include "lathe/common/i18n.h"
#include "lathe/os/clock.h"

namespace lathe::daemon {
namespace {

// Users every Debian system has: daemon (1) owns, bin (2) and nobody
// (65534) are shared with.
const Caller kOwner{1, "daemon", false};
const Caller kBin{2, "bin", false};
const Caller kNobody{65534, "nobody", false};
const Caller kRoot{0, "root", true};

class SharingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/lathe-sharing-XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    sharing_ = std::make_unique<Sharing>(dir_ + "/lathe.db", os::RealClock());
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  Role RoleOf(const Caller& c, const SharedObject& o) {
    auto reach = sharing_->ReachOf(c);
    EXPECT_TRUE(reach.ok()) << reach.status().ToString();
    return reach.ok() ? reach->RoleOf(o) : Role::kNone;
  }

  std::string dir_;
  std::unique_ptr<Sharing> sharing_;
  const SharedObject run_{"run", "r1", 1, "daemon", ""};
};

TEST_F(SharingTest, RolesComeFromSharesAndTheBestWins) {
  EXPECT_EQ(RoleOf(kOwner, run_), Role::kOwner);
  EXPECT_EQ(RoleOf(kRoot, run_), Role::kOwner);
  EXPECT_EQ(RoleOf(kBin, run_), Role::kNone);
  ASSERT_TRUE(sharing_->Share(kOwner, run_, "user", "bin", Role::kView).ok());
  EXPECT_EQ(RoleOf(kBin, run_), Role::kView);
  EXPECT_EQ(RoleOf(kNobody, run_), Role::kNone);
  auto reach = sharing_->ReachOf(kBin);
  ASSERT_TRUE(reach.ok());
  EXPECT_EQ(reach->How(run_), "daemon");
  // Sharing again changes the role; another object is not reached.
  ASSERT_TRUE(sharing_->Share(kOwner, run_, "user", "bin", Role::kManage).ok());
  EXPECT_EQ(RoleOf(kBin, run_), Role::kManage);
  EXPECT_EQ(RoleOf(kBin, SharedObject{"run", "r2", 1, "daemon", ""}), Role::kNone);
  EXPECT_EQ(RoleOf(kBin, SharedObject{"model", "r1", 1, "daemon", ""}), Role::kNone);
  // Taken back: gone at the next read; a second time is not_shared.
  const uint64_t gen = sharing_->generation();
  ASSERT_TRUE(sharing_->Unshare(kOwner, run_, "user", "bin").ok());
  EXPECT_GT(sharing_->generation(), gen);
  EXPECT_EQ(RoleOf(kBin, run_), Role::kNone);
  EXPECT_EQ(sharing_->Unshare(kOwner, run_, "user", "bin").msg_id(), "share.not_shared");
}

TEST_F(SharingTest, OnlyTheOwnerSharesAndGranteesMustExist) {
  EXPECT_EQ(sharing_->Share(kBin, run_, "user", "nobody", Role::kView).status().msg_id(),
            "share.not_owner");
  EXPECT_TRUE(sharing_->Share(kRoot, run_, "user", "nobody", Role::kView).ok());
  EXPECT_EQ(sharing_->Share(kOwner, run_, "user", "no-such-user-x", Role::kView).status().msg_id(),
            "share.unknown_user");
  EXPECT_EQ(
      sharing_->Share(kOwner, run_, "group", "no-such-group-x", Role::kView).status().msg_id(),
      "share.unknown_group");
  EXPECT_EQ(sharing_->Share(kOwner, run_, "user", "daemon", Role::kView).status().msg_id(),
            "share.self");
  EXPECT_EQ(sharing_->Unshare(kBin, run_, "user", "nobody").msg_id(), "share.not_owner");
}

TEST_F(SharingTest, MessagesNameTheKindInEachLanguage) {
  // A notebook is a run a person calls a notebook; a group is said to be one.
  const SharedObject notebook{"run", "nb1", 1, "daemon", "", /*notebook=*/true};
  const Status not_owner = sharing_->Share(kBin, notebook, "user", "nobody", Role::kView).status();
  EXPECT_NE(not_owner.message().find("shares notebook nb1"), std::string::npos)
      << not_owner.message();
  const Status run_zh = sharing_->Share(kBin, run_, "user", "nobody", Role::kView).status();
  EXPECT_NE(Localize(run_zh, Lang::kZh).find("共享运行 r1"), std::string::npos)
      << Localize(run_zh, Lang::kZh);
  const Status group = sharing_->Unshare(kOwner, run_, "group", "bin");
  EXPECT_EQ(group.msg_id(), "share.not_shared_group");
  EXPECT_NE(group.message().find("not shared with group 'bin'"), std::string::npos)
      << group.message();
  EXPECT_NE(Localize(group, Lang::kZh).find("运行 r1 并未共享给组"), std::string::npos)
      << Localize(group, Lang::kZh);
}

TEST_F(SharingTest, AGroupShareReachesItsMembers) {
  // bin's primary group is bin (gid 2) on Debian.
  ASSERT_TRUE(sharing_->Share(kOwner, run_, "group", "bin", Role::kUse).ok());
  EXPECT_EQ(RoleOf(kBin, run_), Role::kUse);
  EXPECT_EQ(RoleOf(kNobody, run_), Role::kNone);
  auto with = sharing_->SharedWith(kBin);
  ASSERT_TRUE(with.ok());
  ASSERT_EQ(with->size(), 1u);
  EXPECT_EQ((*with)[0].grantee_name, "bin");
}

TEST_F(SharingTest, ProjectMembersReachWhatNamesTheProject) {
  auto p = sharing_->CreateProject(kOwner, "ml", {{"bin", Role::kView}});
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(sharing_->CreateProject(kBin, "ml", {}).status().msg_id(), "project.exists");
  EXPECT_EQ(sharing_->CreateProject(kBin, "Bad/Name", {}).status().msg_id(), "project.bad_name");
  const SharedObject in_ml{"run", "r9", 1, "daemon", "ml"};
  EXPECT_EQ(RoleOf(kBin, in_ml), Role::kView);
  EXPECT_EQ(RoleOf(kNobody, in_ml), Role::kNone);
  auto reach = sharing_->ReachOf(kBin);
  ASSERT_TRUE(reach.ok());
  EXPECT_EQ(reach->How(in_ml), "project ml");
  // A viewer puts nothing in; a manager adds members; strangers see nothing.
  EXPECT_EQ(sharing_->CheckPutInto(kBin, "ml").msg_id(), "project.not_member");
  EXPECT_TRUE(sharing_->CheckPutInto(kOwner, "ml").ok());
  EXPECT_EQ(sharing_->CheckPutInto(kNobody, "ml").msg_id(), "project.not_found");
  EXPECT_EQ(sharing_->ChangeMembers(kBin, "ml", {{"nobody", Role::kUse}}, {}).status().msg_id(),
            "project.forbidden");
  ASSERT_TRUE(sharing_->ChangeMembers(kOwner, "ml", {{"bin", Role::kManage}}, {}).ok());
  EXPECT_TRUE(sharing_->CheckPutInto(kBin, "ml").ok());
  ASSERT_TRUE(sharing_->ChangeMembers(kBin, "ml", {{"nobody", Role::kUse}}, {}).ok());
  EXPECT_EQ(RoleOf(kNobody, in_ml), Role::kUse);
  auto listed = sharing_->Projects(kNobody);
  ASSERT_TRUE(listed.ok());
  EXPECT_EQ(listed->size(), 1u);
  // Removed: gone at the next read; the project goes with its owner's word only.
  ASSERT_TRUE(sharing_->ChangeMembers(kOwner, "ml", {}, {"nobody"}).ok());
  EXPECT_EQ(RoleOf(kNobody, in_ml), Role::kNone);
  EXPECT_EQ(sharing_->ChangeMembers(kOwner, "ml", {}, {"nobody"}).status().msg_id(),
            "project.not_a_member");
  // A manager changes members but never removes the project: the message says so.
  const Status removed_by_manager = sharing_->DeleteProject(kBin, "ml");
  EXPECT_EQ(removed_by_manager.msg_id(), "project.owner_only");
  EXPECT_NE(removed_by_manager.message().find("only the owner of project 'ml' (daemon) may remove"),
            std::string::npos)
      << removed_by_manager.message();
  EXPECT_TRUE(sharing_->DeleteProject(kOwner, "ml").ok());
  EXPECT_EQ(RoleOf(kBin, in_ml), Role::kNone);
}

TEST(SharingParse, RolesAndMembers) {
  EXPECT_EQ(ParseRole("use"), Role::kUse);
  EXPECT_FALSE(ParseRole("owner").has_value());
  EXPECT_FALSE(ParseRole("").has_value());
  auto m = ParseMember("members", "alice:manage");
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->user, "alice");
  EXPECT_EQ(m->role, Role::kManage);
  EXPECT_EQ(ParseMember("members", "alice")->role, Role::kUse);
  EXPECT_EQ(ParseMember("members", "alice:boss").status().msg_id(), "share.bad_role");
  EXPECT_EQ(ParseMember("members", ":use").status().msg_id(), "project.bad_member");
  EXPECT_EQ(RoleNeeded(AccessAction::kRead), Role::kView);
  EXPECT_EQ(RoleNeeded(AccessAction::kOpen), Role::kUse);
  EXPECT_EQ(RoleNeeded(AccessAction::kStop), Role::kManage);
  EXPECT_EQ(RoleNeeded(AccessAction::kDelete), Role::kOwner);
}

TEST(SharingJson, EnvValuesAreHidden) {
  Json j = {{"spec", {{"env", {{"A", "secret"}}}, {"command", {"x"}}}}};
  HideEnvValues(j);
  EXPECT_EQ(j["spec"]["env"]["A"], "(hidden)");
  EXPECT_EQ(j["spec"]["command"][0], "x");
}

}  // namespace
}  // namespace lathe::daemon

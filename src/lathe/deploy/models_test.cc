#include "lathe/deploy/models.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "lathe/daemon/daemon.h"
#include "lathe/deploy/registry.h"
#include "lathe/os/files.h"
#include "lathe/snap/store.h"

namespace lathe::deploy {
namespace {

snap::Manifest WithFiles(std::vector<std::string> paths) {
  snap::Manifest m;
  for (auto& p : paths) {
    snap::FileEntry e;
    e.path = std::move(p);
    e.type = snap::EntryType::kFile;
    m.files.push_back(e);
  }
  return m;
}

TEST(ModelRefTest, NamesVersionsAndAliases) {
  auto plain = ParseModelRef("digits");
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->name, "digits");
  EXPECT_FALSE(plain->version);
  auto v = ParseModelRef("digits/12");
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->version.value_or(0), 12);
  auto a = ParseModelRef("digits@prod");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->alias, "prod");
  for (const char* bad : {"", "digits/0", "digits/01", "a/b/c", "digits@", "digits@Prod",
                          "digits/1@prod", "../x", ".hidden", "a b", "digits/1/2", "alice/",
                          "/digits", "alice/007", "a/b/c/1", "-a/digits@prod"}) {
    auto r = ParseModelRef(bad);
    EXPECT_FALSE(r.ok()) << bad;
    if (!r.ok()) {
      EXPECT_EQ(r.status().msg_id(), "model.bad_ref") << bad;
    }
  }
  EXPECT_TRUE(CheckModelName(std::string(64, 'a')).ok());
  EXPECT_EQ(CheckModelName("2024").msg_id(), "model.bad_name");  // "alice/2024" is a version
  EXPECT_EQ(CheckModelName(std::string(65, 'a')).msg_id(), "model.bad_name");
}

TEST(ModelRefTest, OwnerQualifiedRefs) {
  auto q = ParseModelRef("alice/digits");
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(q->name, "alice/digits");
  EXPECT_FALSE(q->version);
  auto qv = ParseModelRef("alice/digits/3");
  ASSERT_TRUE(qv.ok());
  EXPECT_EQ(qv->name, "alice/digits");
  EXPECT_EQ(qv->version.value_or(0), 3);
  auto qa = ParseModelRef("alice/digits@prod");
  ASSERT_TRUE(qa.ok());
  EXPECT_EQ(qa->name, "alice/digits");
  EXPECT_EQ(qa->alias, "prod");
  auto v = ParseModelRef("alice/3");  // a version of the model "alice"
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->name, "alice");
  EXPECT_EQ(v->version.value_or(0), 3);
}

TEST(ModelRefTest, RunSources) {
  auto plain = ParseRunSource("r1");
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->run, "r1");
  EXPECT_FALSE(plain->step);
  EXPECT_FALSE(ParseRunSource("r1@latest")->step);
  EXPECT_EQ(ParseRunSource("trainer@500")->step.value_or(-1), 500);
  for (const char* bad : {"@5", "r1@", "r1@-3", "r1@5x", "r1@newest"})
    EXPECT_EQ(ParseRunSource(bad).status().msg_id(), "model.bad_run_source") << bad;
}

TEST(ServedFilesTest, TheCheckpointOrTheOnlyFileAndTheBackendFromItsName) {
  auto m = WithFiles({"ckpt_100.pt", "ckpt_200.pt", "notes.txt"});
  auto c = ChooseServedFiles(m, "", "", "", "ckpt_200.pt");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->file, "ckpt_200.pt");
  EXPECT_EQ(c->backend, "torchscript");
  // Several files, no checkpoint: the caller must say which.
  EXPECT_EQ(ChooseServedFiles(m, "", "", "", "").status().msg_id(), "model.needs_file");
  // A pattern matching several prefers the source's checkpoint, else refuses.
  EXPECT_EQ(ChooseServedFiles(m, "*.pt", "", "", "ckpt_100.pt")->file, "ckpt_100.pt");
  auto amb = ChooseServedFiles(m, "*.pt", "", "", "");
  EXPECT_EQ(amb.status().msg_id(), "model.file_ambiguous");
  EXPECT_NE(amb.status().ToString().find("ckpt_100.pt, ckpt_200.pt"), std::string::npos);
  EXPECT_EQ(ChooseServedFiles(m, "*.onnx", "", "", "").status().msg_id(), "model.no_such_file");
  // notes.txt says nothing of its backend.
  EXPECT_EQ(ChooseServedFiles(m, "notes.txt", "", "", "").status().msg_id(),
            "model.backend_unknown");
  EXPECT_EQ(ChooseServedFiles(m, "", "", "onnx", "ckpt_200.pt").status().msg_id(),
            "model.bad_backend");
}

TEST(ServedFilesTest, AWholePathBeatsABaseName) {
  auto m = WithFiles({"model.pt", "old/model.pt"});
  auto c = ChooseServedFiles(m, "model.pt", "", "", "");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->file, "model.pt");
  // What the server loads by name must be at the top.
  EXPECT_EQ(ChooseServedFiles(m, "old/model.pt", "", "", "").status().msg_id(),
            "model.file_not_top_level");
}

TEST(ServedFilesTest, AHandlerMeansProcess) {
  auto m = WithFiles({"ckpt/weights.bin", "inference.py", "ckpt_9.pt"});
  auto c = ChooseServedFiles(m, "", "inference.py", "", "ckpt_9.pt");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->backend, "process");
  EXPECT_EQ(c->handler, "inference.py");
  EXPECT_EQ(c->file, "ckpt_9.pt");
  // The handler alone (the checkpoint is a directory, or none): no primary file.
  auto alone = ChooseServedFiles(m, "", "inference.py", "", "");
  ASSERT_TRUE(alone.ok());
  EXPECT_EQ(alone->file, "");
  EXPECT_EQ(ChooseServedFiles(m, "", "missing.py", "", "").status().msg_id(), "model.no_such_file");
  EXPECT_EQ(ChooseServedFiles(m, "", "inference.py", "torchscript", "").status().msg_id(),
            "model.handler_needs_process");
  // A .py named as the file is the handler.
  auto py = ChooseServedFiles(m, "inference.py", "", "", "");
  ASSERT_TRUE(py.ok());
  EXPECT_EQ(py->backend, "process");
  EXPECT_EQ(py->handler, "inference.py");
  EXPECT_EQ(ChooseServedFiles(m, "ckpt_9.pt", "", "process", "").status().msg_id(),
            "model.process_needs_handler");
}

TEST(ExportConfigTest, NamesTheBackendAndTheFileServeLoads) {
  state::ModelVersionRecord v;
  v.model = "digits";
  v.version = 3;
  v.snapshot = std::string(64, 'a');
  v.backend = "process";
  v.handler = "inference.py";
  v.file = "ckpt_9.pt";
  std::string y = ExportConfigYaml(v);
  EXPECT_NE(y.find("backend: process\n"), std::string::npos) << y;
  EXPECT_NE(y.find("default_model_filename: \"inference.py\"\n"), std::string::npos) << y;
  EXPECT_NE(y.find("parameters: {env: {LATHE_MODEL_FILE: \"ckpt_9.pt\"}}\n"), std::string::npos)
      << y;
  v.backend = "torchscript";
  y = ExportConfigYaml(v);
  EXPECT_NE(y.find("default_model_filename: \"ckpt_9.pt\""), std::string::npos) << y;
  EXPECT_EQ(y.find("parameters"), std::string::npos) << y;
}

// The registry's rules, on a daemon that is not started (no runs needed).
class DaemonModelsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/lathe-models-test-XXXXXX";
    home_ = ::mkdtemp(tmpl);
    daemon::DaemonOptions o;
    o.home = home_ + "/home";
    o.gpus = "none";
    auto d = daemon::Daemon::Create(o, os::RealClock());
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    d_ = std::move(*d);
    registry_ = std::make_unique<Registry>(*d_, d_->paths().db, os::RealClock());
    src_ = home_ + "/src";
    ASSERT_TRUE(os::MakeDirs(src_, 0755).ok());
    ASSERT_TRUE(os::WriteFileAtomic(src_ + "/model.pt", std::string(100, 'w')).ok());
    owner_ = {::geteuid(), "me", true};
    other_ = {4242, "other", false};
  }
  void TearDown() override {
    registry_.reset();
    d_.reset();
    std::filesystem::remove_all(home_);
  }
  Result<Json> Create(const std::string& name, bool is_public = false) {
    ModelVersionRequest r;
    r.name = name;
    r.from_dir = src_;
    r.is_public = is_public;
    return registry_->CreateVersion(owner_, r);
  }

  std::string home_, src_;
  std::unique_ptr<daemon::Daemon> d_;
  std::unique_ptr<Registry> registry_;
  daemon::Caller owner_, other_;
};

// Names are unique per owner: another user's model of the same name is a
// model of its own; a bare name is the caller's first, else the only one
// they may see; two they may see need OWNER/NAME.
TEST_F(DaemonModelsTest, NamesAreUniquePerOwner) {
  auto first = Create("digits", /*is_public=*/true);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  ModelVersionRequest theirs;
  theirs.name = "digits";
  theirs.from_snapshot = (*first)["snapshot"];
  daemon::Caller admin_other{4242, "other", true};  // may use any snapshot
  auto made = registry_->CreateVersion(admin_other, theirs);
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  EXPECT_EQ((*made)["ref"], "other/digits/1");
  EXPECT_EQ((*made)["model"], "digits");
  auto mine = registry_->Get(owner_, "digits");
  ASSERT_TRUE(mine.ok()) << mine.status().ToString();
  EXPECT_EQ((*mine)["owner"], "me");
  EXPECT_EQ((*mine)["ref"], "me/digits");
  auto other = registry_->Get(other_, "digits");
  ASSERT_TRUE(other.ok()) << other.status().ToString();
  EXPECT_EQ((*other)["owner"], "other");
  auto qualified = registry_->Get(other_, "me/digits@latest");
  ASSERT_TRUE(qualified.ok()) << qualified.status().ToString();
  EXPECT_EQ((*qualified)["ref"], "me/digits/1");
  // A third user sees two public "digits": the bare name is ambiguous.
  daemon::Caller third{4343, "third", false};
  ASSERT_TRUE(registry_->SetAlias(admin_other, "other/digits", "prod", 1).ok());
  auto made_public = registry_->CreateVersion(admin_other, [&] {
    ModelVersionRequest r = theirs;
    r.is_public = true;
    return r;
  }());
  ASSERT_TRUE(made_public.ok()) << made_public.status().ToString();
  EXPECT_EQ(registry_->Get(third, "digits").status().msg_id(), "model.ambiguous");
  EXPECT_TRUE(registry_->Get(third, "other/digits@prod").ok());
  std::string q;
  EXPECT_FALSE(registry_->ResolveVersion(third, "digits/1", &q).ok());
  ASSERT_TRUE(registry_->ResolveVersion(third, "me/digits@latest", &q).ok());
  EXPECT_EQ(q, "me/digits@latest");
  ASSERT_TRUE(registry_->ResolveVersion(third, "digits@latest", &q).status().msg_id() ==
              "model.ambiguous");
  ASSERT_TRUE(registry_->ResolveVersion(owner_, "digits@latest", &q).ok());
  EXPECT_EQ(q, "digits@latest");  // the caller's own, as given
  auto list = registry_->List(third);
  ASSERT_TRUE(list.ok());
  ASSERT_EQ((*list)["models"].size(), 2u);
  EXPECT_EQ((*list)["models"][0]["name"], "digits");
  EXPECT_NE((*list)["models"][0]["ref"], (*list)["models"][1]["ref"]);
}

TEST_F(DaemonModelsTest, AVersionPinsItsSnapshotUntilItGoes) {
  auto v = Create("m");
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  const std::string snap = (*v)["snapshot"];
  auto refused = d_->DeleteSnapshot(owner_, snap);
  EXPECT_EQ(refused.status().msg_id(), "snap.pinned");
  EXPECT_NE(refused.status().ToString().find("model me/m/1"), std::string::npos);
  // keep_checkpoints and `snap prune` go through Prune: it keeps it.
  auto store = d_->checkpoints().store();
  ASSERT_TRUE(store.ok());
  snap::PrunePolicy p;
  p.keep_last = 1;
  snap::SnapshotOptions newer;  // the same directory again, unpinned
  newer.parent = "";
  ASSERT_TRUE(os::WriteFileAtomic(src_ + "/model.pt", std::string(100, 'x')).ok());
  ASSERT_TRUE((*store)->Snapshot(src_, newer).ok());
  auto pruned = (*store)->Prune(p);
  ASSERT_TRUE(pruned.ok()) << pruned.status().ToString();
  EXPECT_EQ(pruned->pinned, (std::vector<std::string>{snap}));
  EXPECT_TRUE((*store)->Resolve(snap).ok());
  ASSERT_TRUE(registry_->SetAlias(owner_, "m", "prod", 1).ok());
  auto aliased = registry_->DeleteVersion(owner_, "m", 1);
  EXPECT_EQ(aliased.status().msg_id(), "model.version_aliased");
  EXPECT_TRUE(d_->DeleteSnapshot(owner_, snap).status().msg_id() == "snap.pinned");
  ASSERT_TRUE(registry_->DeleteAlias(owner_, "m", "prod").ok());
  ASSERT_TRUE(registry_->DeleteVersion(owner_, "m", 1).ok());
  EXPECT_TRUE(d_->DeleteSnapshot(owner_, snap).ok());
}

TEST_F(DaemonModelsTest, OthersReadAPublicModelAndChangeNothing) {
  ASSERT_TRUE(Create("private").ok());
  ASSERT_TRUE(Create("shared", /*is_public=*/true).ok());
  // A private model of another user is as unknown as a name nobody holds.
  EXPECT_EQ(registry_->Get(other_, "private").status().msg_id(), "model.not_found");
  EXPECT_EQ(registry_->Get(other_, "private/1").status().code(), Code::kNotFound);
  EXPECT_EQ(registry_->SetAlias(other_, "private", "prod", 1).status().msg_id(), "model.not_found");
  EXPECT_EQ(registry_->DeleteVersion(other_, "private", 1).status().msg_id(), "model.not_found");
  auto listed = registry_->List(other_);
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ((*listed)["models"].size(), 1u);
  EXPECT_EQ((*listed)["models"][0]["name"], "shared");
  auto shown = registry_->Get(other_, "shared@latest");
  ASSERT_TRUE(shown.ok()) << shown.status().ToString();
  EXPECT_EQ((*shown)["file"], "model.pt");
  EXPECT_EQ((*shown)["size"], 100);
  EXPECT_EQ(registry_->SetAlias(other_, "shared", "prod", 1).status().msg_id(), "model.forbidden");
  EXPECT_EQ(registry_->DeleteVersion(other_, "shared", 1).status().msg_id(), "model.owner_only");
  ModelVersionRequest add;
  add.name = "me/shared";
  add.from_snapshot = (*shown)["snapshot"];
  EXPECT_EQ(registry_->CreateVersion(other_, add).status().msg_id(), "model.owner_only");
  // Whose it is, the role they have and the one it takes; nothing about "public" only.
  const std::string alias_msg = registry_->SetAlias(other_, "shared", "prod", 1).status().message();
  EXPECT_NE(alias_msg.find("your role on it is use"), std::string::npos) << alias_msg;
  EXPECT_NE(alias_msg.find("needs manage"), std::string::npos) << alias_msg;
  const std::string add_msg = registry_->CreateVersion(other_, add).status().message();
  EXPECT_NE(add_msg.find("only its owner adds"), std::string::npos) << add_msg;
  add.name = "me/private";
  auto taken = registry_->CreateVersion(other_, add);
  EXPECT_EQ(taken.status().msg_id(), "model.name_taken");
  EXPECT_EQ(taken.status().message().find("owner"), std::string::npos);
  add.name = "me/new";  // nobody's yet, and not theirs to start
  EXPECT_EQ(registry_->CreateVersion(other_, add).status().msg_id(), "model.other_namespace");
  EXPECT_EQ(registry_->Get(owner_, "nope").status().msg_id(), "model.not_found");
}

}  // namespace
}  // namespace lathe::deploy

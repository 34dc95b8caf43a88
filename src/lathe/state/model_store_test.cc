#include "lathe/state/model_store.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>

#include "lathe/state/run_store.h"
#include "lathe/state/schema.h"

namespace lathe::state {
namespace {

class ModelStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/lathe-models-XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    auto s = ModelStore::Open(dir_ + "/lathe.db");
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    store_ = std::move(s).value();
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  static ModelRecord Owner(const std::string& name, uid_t uid, bool is_public = false) {
    ModelRecord m;
    m.name = name;
    m.uid = uid;
    m.user = "u" + std::to_string(uid);
    m.is_public = is_public;
    return m;
  }
  int64_t Add(const ModelRecord& owner, const std::string& snapshot) {
    ModelVersionRecord v;
    v.snapshot = snapshot;
    v.backend = "torchscript";
    v.file = "model.pt";
    v.lineage = {{"run", "r-1"}, {"step", 500}};
    v.created_by = owner.user;
    v.created_at_ms = 1000;
    Status st = store_->AddVersion(owner, v);
    EXPECT_TRUE(st.ok()) << st.ToString();
    return v.version;
  }

  std::string dir_;
  std::unique_ptr<ModelStore> store_;
};

TEST_F(ModelStoreTest, VersionsCountUpPerModelAndAreNeverReused) {
  EXPECT_EQ(Add(Owner("digits", 1000), "s1"), 1);
  EXPECT_EQ(Add(Owner("digits", 1000), "s2"), 2);
  EXPECT_EQ(Add(Owner("other", 1001), "s3"), 1);
  auto del = store_->DeleteVersion("digits", 2);
  ASSERT_TRUE(del.ok() && *del);
  // The newest was removed; its number stays taken.
  EXPECT_EQ(Add(Owner("digits", 1000), "s4"), 3);
  auto versions = store_->ListVersions("digits");
  ASSERT_TRUE(versions.ok());
  ASSERT_EQ(versions->size(), 2u);
  EXPECT_EQ((*versions)[0].version, 1);
  EXPECT_EQ((*versions)[1].version, 3);
  EXPECT_EQ((*versions)[1].snapshot, "s4");
  EXPECT_EQ((*versions)[0].lineage["step"], 500);
  auto again = store_->DeleteVersion("digits", 2);
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(*again);
}

TEST_F(ModelStoreTest, ASignatureIsRecordedOnceAndNothingElseChanges) {
  ASSERT_EQ(Add(Owner("digits", 1000), "s1"), 1);
  auto before = store_->GetVersion("digits", 1);
  ASSERT_TRUE(before.ok() && before->has_value());
  EXPECT_TRUE((*before)->inputs.is_null());
  const Json in = Json::parse(R"([{"name": "input", "datatype": "ANY", "shape": [-1]}])");
  const Json out = Json::parse(R"([{"name": "output__0", "datatype": "ANY", "shape": [-1]}])");
  auto set = store_->SetSignature("digits", 1, in, out);
  ASSERT_TRUE(set.ok()) << set.status().ToString();
  EXPECT_TRUE(*set);
  // Once known, a second description does not replace it.
  auto again = store_->SetSignature("digits", 1, Json::array(), Json::array());
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(*again);
  auto missing = store_->SetSignature("digits", 7, in, out);
  ASSERT_TRUE(missing.ok());
  EXPECT_FALSE(*missing);
  auto v = store_->GetVersion("digits", 1);
  ASSERT_TRUE(v.ok() && v->has_value());
  EXPECT_EQ((*v)->inputs, in);
  EXPECT_EQ((*v)->outputs, out);
  EXPECT_EQ((*v)->snapshot, "s1");
  EXPECT_EQ((*v)->file, "model.pt");
  EXPECT_EQ((*v)->lineage, (*before)->lineage);
  EXPECT_EQ((*v)->created_at_ms, (*before)->created_at_ms);
}

TEST_F(ModelStoreTest, AnExistingModelKeepsItsOwner) {
  Add(Owner("digits", 1000), "s1");
  Add(Owner("digits", 0, /*is_public=*/true), "s2");  // an admin adds a version
  auto m = store_->GetModel("digits");
  ASSERT_TRUE(m.ok() && m->has_value());
  EXPECT_EQ((*m)->uid, 1000u);
  EXPECT_FALSE((*m)->is_public);
  ASSERT_TRUE(store_->SetPublic("digits", true).ok());
  EXPECT_TRUE((*store_->GetModel("digits"))->is_public);
  EXPECT_FALSE(store_->GetModel("nope")->has_value());
}

TEST_F(ModelStoreTest, ModelsNamedFindsEveryOwnersModelOfThatName) {
  for (const char* name : {"digits", "alice/digits", "bob/xdigits", "bob/a_digits"}) {
    Add(Owner(name, 1000), "s1");
  }
  auto got = store_->ModelsNamed("digits");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  std::vector<std::string> names;
  for (const auto& m : *got) names.push_back(m.name);
  EXPECT_EQ(names, (std::vector<std::string>{"alice/digits", "digits"}));
  EXPECT_TRUE(store_->ModelsNamed("nope")->empty());
}

TEST_F(ModelStoreTest, AliasesMoveAndKeepTheirVersion) {
  Add(Owner("digits", 1000), "s1");
  Add(Owner("digits", 1000), "s2");
  auto first = store_->SetAlias("digits", "prod", 1);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_FALSE(first->has_value());
  auto moved = store_->SetAlias("digits", "prod", 2);
  ASSERT_TRUE(moved.ok());
  EXPECT_EQ(moved->value_or(0), 1);
  auto missing = store_->SetAlias("digits", "prod", 7);
  EXPECT_EQ(missing.status().msg_id(), "model.version_not_found");
  // The aliased version cannot go; the other can.
  auto refused = store_->DeleteVersion("digits", 2);
  EXPECT_EQ(refused.status().code(), Code::kFailedPrecondition);
  EXPECT_EQ(refused.status().msg_id(), "model.version_aliased");
  EXPECT_NE(refused.status().ToString().find("digits@prod"), std::string::npos)
      << refused.status().ToString();
  EXPECT_TRUE(store_->DeleteVersion("digits", 1).ok());
  auto aliases = store_->Aliases("digits");
  ASSERT_TRUE(aliases.ok());
  ASSERT_EQ(aliases->size(), 1u);
  EXPECT_EQ((*aliases)[0].version, 2);
  ASSERT_TRUE(*store_->DeleteAlias("digits", "prod"));
  EXPECT_FALSE(*store_->DeleteAlias("digits", "prod"));
  auto gone = store_->DeleteVersion("digits", 2);
  ASSERT_TRUE(gone.ok()) << gone.status().ToString();
  EXPECT_TRUE(*gone);
}

TEST_F(ModelStoreTest, VersionsOfASnapshot) {
  Add(Owner("a", 1000), "shared");
  Add(Owner("b", 1000), "shared");
  Add(Owner("b", 1000), "other");
  auto of = store_->VersionsOfSnapshot("shared");
  ASSERT_TRUE(of.ok());
  ASSERT_EQ(of->size(), 2u);
  EXPECT_EQ((*of)[0].model, "a");
  EXPECT_EQ((*of)[1].model, "b");
}

// The registry is schema v10: a home an older Lathe left at v9 gains it,
// and its runs stay.
TEST_F(ModelStoreTest, MigratesAVersion9Home) {
  const std::string path = dir_ + "/old.db";
  {
    const auto& all = SchemaMigrations();
    ASSERT_GE(all.size(), 10u);
    auto db = Db::Open(path, std::vector<std::string>(all.begin(), all.begin() + 9));
    ASSERT_TRUE(db.ok()) << db.status().ToString();
    EXPECT_EQ((*db)->schema_version(), 9);
    ASSERT_TRUE((*db)
                    ->Exec("INSERT INTO runs (id, name, seq, uid, user, spec, state, created_at, "
                           "run_dir) VALUES ('r-q', 'q', 1, 0, 'root', "
                           "'{\"command\":[\"true\"]}', 'queued', 2, '/h/runs/r-q')")
                    .ok());
  }
  auto models = ModelStore::Open(path);
  ASSERT_TRUE(models.ok()) << models.status().ToString();
  ModelVersionRecord v;
  v.snapshot = "s";
  v.backend = "process";
  ASSERT_TRUE((*models)->AddVersion(Owner("m", 0), v).ok());
  auto runs = RunStore::Open(path);
  ASSERT_TRUE(runs.ok());
  EXPECT_EQ((*runs)->db().schema_version(), static_cast<int>(SchemaMigrations().size()));
  EXPECT_TRUE((*runs)->Get("r-q").ok());
}

}  // namespace
}  // namespace lathe::state

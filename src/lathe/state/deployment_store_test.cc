#include "lathe/state/deployment_store.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>

#include "lathe/state/run_store.h"
#include "lathe/state/schema.h"

namespace lathe::state {
namespace {

class DeploymentStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/lathe-deployment-store-XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    auto s = DeploymentStore::Open(dir_ + "/lathe.db");
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    store_ = std::move(*s);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  static DeploymentRecord Make(const std::string& name, uid_t uid) {
    DeploymentRecord d;
    d.name = name;
    d.uid = uid;
    d.user = "u" + std::to_string(uid);
    d.spec = {{"model", "digits@prod"}, {"replicas", 2}};
    d.created_at_ms = d.updated_at_ms = 5;
    return d;
  }

  std::string dir_;
  std::unique_ptr<DeploymentStore> store_;
};

TEST_F(DeploymentStoreTest, NamesAreUniqueAcrossUsers) {
  ASSERT_TRUE(store_->Insert(Make("digits", 1001)).ok());
  Status again = store_->Insert(Make("digits", 1002));
  EXPECT_EQ(again.code(), Code::kAlreadyExists);
  EXPECT_NE(again.ToString().find("digits"), std::string::npos);
  auto got = store_->Get("digits");
  ASSERT_TRUE(got.ok() && got->has_value());
  EXPECT_EQ((*got)->uid, 1001u);  // the first owner keeps it
  EXPECT_EQ((*got)->spec["replicas"], 2);
}

// Named: the bare key and every OWNER/NAME of that name, nothing whose name
// merely ends with it ('_' is no wildcard here).
TEST_F(DeploymentStoreTest, NamedFindsEveryOwnersDeploymentOfThatName) {
  for (const char* name :
       {"digits", "alice/digits", "bob/digits", "bob/my_digits", "alice/digitsx", "digits/x"}) {
    ASSERT_TRUE(store_->Insert(Make(name, 1001)).ok()) << name;
  }
  auto got = store_->Named("digits");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  std::vector<std::string> names;
  for (const auto& d : *got) names.push_back(d.name);
  EXPECT_EQ(names, (std::vector<std::string>{"alice/digits", "bob/digits", "digits"}));
  auto under = store_->Named("my_digits");
  ASSERT_TRUE(under.ok());
  ASSERT_EQ(under->size(), 1u);
  EXPECT_EQ(under->at(0).name, "bob/my_digits");
  EXPECT_TRUE(store_->Named("nope")->empty());
}

TEST_F(DeploymentStoreTest, UsingModelFindsEveryPlaceAVersionIsNamed) {
  auto names = [&](const std::string& model, int64_t version) {
    std::vector<std::string> out;
    auto got = store_->UsingModel(model, version);
    EXPECT_TRUE(got.ok()) << got.status().ToString();
    if (got.ok())
      for (const auto& d : *got) out.push_back(d.name);
    return out;
  };
  DeploymentRecord current = Make("current", 1);  // serving digits/2 through an alias
  ASSERT_TRUE(store_->Insert(current).ok());
  current.version = "digits/2";
  ASSERT_TRUE(store_->Update(current).ok());
  DeploymentRecord pinned = Make("pinned", 1);  // its reference names digits/3
  pinned.spec["model"] = "digits/3";
  ASSERT_TRUE(store_->Insert(pinned).ok());
  DeploymentRecord rolling = Make("rolling", 1);  // rolling from digits/1 to digits/4
  ASSERT_TRUE(store_->Insert(rolling).ok());
  rolling.version = "digits/4";
  rolling.plan = {{"stable_version", "digits/1"}, {"rolling_to", "digits/4"}};
  ASSERT_TRUE(store_->Update(rolling).ok());
  DeploymentRecord other = Make("other", 1);
  other.spec["model"] = "mnist/2";
  ASSERT_TRUE(store_->Insert(other).ok());
  DeploymentRecord longer = Make("longer", 1);  // a model whose name starts with "digits"
  longer.spec["model"] = "digits2@prod";
  ASSERT_TRUE(store_->Insert(longer).ok());
  DeploymentRecord bare = Make("bare", 1);  // the model's bare name (its newest version)
  bare.spec["model"] = "mnist";
  ASSERT_TRUE(store_->Insert(bare).ok());

  EXPECT_EQ(names("digits", 2), (std::vector<std::string>{"current"}));
  EXPECT_EQ(names("digits", 3), (std::vector<std::string>{"pinned"}));
  EXPECT_EQ(names("digits", 1), (std::vector<std::string>{"rolling"}));
  EXPECT_EQ(names("digits", 4), (std::vector<std::string>{"rolling"}));
  EXPECT_TRUE(names("digits", 5).empty());
  EXPECT_EQ(names("digits", 0), (std::vector<std::string>{"current", "pinned", "rolling"}));
  EXPECT_EQ(names("mnist", 2), (std::vector<std::string>{"other"}));
  EXPECT_EQ(names("mnist", 0), (std::vector<std::string>{"bare", "other"}));
  EXPECT_EQ(names("digits2", 0), (std::vector<std::string>{"longer"}));
}

TEST_F(DeploymentStoreTest, UpdateKeepsOwnerAndReportsAMissingOne) {
  ASSERT_TRUE(store_->Insert(Make("a", 1001)).ok());
  DeploymentRecord d = Make("a", 0);  // uid is not written by Update
  d.version = "digits/3";
  d.plan = {{"desired", 3}};
  d.health = "healthy";
  d.removing = true;
  d.updated_at_ms = 9;
  ASSERT_TRUE(store_->Update(d).ok());
  auto got = store_->Get("a");
  ASSERT_TRUE(got.ok() && got->has_value());
  EXPECT_EQ((*got)->uid, 1001u);
  EXPECT_EQ((*got)->version, "digits/3");
  EXPECT_EQ((*got)->plan["desired"], 3);
  EXPECT_TRUE((*got)->removing);
  EXPECT_EQ((*got)->updated_at_ms, 9);
  EXPECT_EQ(store_->Update(Make("gone", 1)).code(), Code::kNotFound);
}

TEST_F(DeploymentStoreTest, EventsAreKeptInOrderAndGoWithTheDeployment) {
  ASSERT_TRUE(store_->Insert(Make("a", 1)).ok());
  ASSERT_TRUE(store_->Insert(Make("b", 1)).ok());
  for (int i = 0; i < 5; ++i) {
    DeploymentEvent e;
    e.deployment = i % 2 ? "b" : "a";
    e.ts_ms = i;
    e.level = "info";
    e.msg_id = "deploy.created";
    e.args = {{"i", i}};
    e.message = "event " + std::to_string(i);
    ASSERT_TRUE(store_->AddEvent(e).ok());
  }
  auto a = store_->Events("a", 0, 100);
  ASSERT_TRUE(a.ok());
  ASSERT_EQ(a->size(), 3u);
  EXPECT_EQ((*a)[0].message, "event 0");
  EXPECT_EQ((*a)[2].args["i"], 4);
  auto last = store_->Events("a", 0, 2);  // the newest two, oldest first
  ASSERT_TRUE(last.ok());
  ASSERT_EQ(last->size(), 2u);
  EXPECT_EQ((*last)[0].message, "event 2");
  auto after = store_->Events("a", (*a)[1].id, 100);
  ASSERT_TRUE(after.ok());
  ASSERT_EQ(after->size(), 1u);
  ASSERT_TRUE(store_->Delete("a").ok());
  EXPECT_FALSE(store_->Get("a")->has_value());
  EXPECT_TRUE(store_->Events("a", 0, 100)->empty());
  EXPECT_EQ(store_->Events("b", 0, 100)->size(), 2u);
}

// The replicas of a deployment are found by their spec, through the index.
TEST_F(DeploymentStoreTest, ReplicasAreRunsOfKindServiceFoundByTheirSpec) {
  auto runs = RunStore::Open(dir_ + "/lathe.db");
  ASSERT_TRUE(runs.ok());
  auto add = [&](const std::string& id, const std::string& dep, run::RunKind kind, run::RunState st,
                 int64_t finished) {
    RunRecord r;
    r.id = id;
    r.name = id;
    r.kind = kind;
    r.spec.type = kind == run::RunKind::kService ? run::RunKind::kService : run::RunKind::kJob;
    r.spec.command = {"true"};
    r.spec.deployment = dep;
    r.state = st;
    r.finished_at_ms = finished;
    r.run_dir = "/x/" + id;
    ASSERT_TRUE((*runs)->Insert(r, 1).ok());
  };
  add("r1", "digits", run::RunKind::kService, run::RunState::kQueued, 0);
  add("r2", "other", run::RunKind::kService, run::RunState::kQueued, 0);
  add("r3", "digits", run::RunKind::kJob, run::RunState::kQueued, 0);
  auto of = (*runs)->OfDeployment("digits", 0);
  ASSERT_TRUE(of.ok()) << of.status().ToString();
  ASSERT_EQ(of->size(), 1u);
  EXPECT_EQ((*of)[0].id, "r1");
  EXPECT_EQ((*of)[0].spec.deployment, "digits");
  auto db = Db::Open(dir_ + "/lathe.db", SchemaMigrations());
  ASSERT_TRUE(db.ok());
  auto plan = (*db)->Prepare(
      "EXPLAIN QUERY PLAN SELECT id FROM runs WHERE kind = 'service' AND "
      "json_extract(spec, '$.deployment.name') = 'digits'");
  ASSERT_TRUE(plan.ok());
  std::string detail;
  while (plan->Step().value_or(false)) detail += plan->Text(3);
  EXPECT_NE(detail.find("runs_by_deployment"), std::string::npos) << detail;
}

}  // namespace
}  // namespace lathe::state

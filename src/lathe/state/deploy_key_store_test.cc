#include "lathe/state/deploy_key_store.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>

#include "lathe/state/run_store.h"
#include "lathe/state/schema.h"

namespace lathe::state {
namespace {

class DeployKeyStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/lathe-dkeys-XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    auto s = DeployKeyStore::Open(dir_ + "/lathe.db");
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    store_ = std::move(s).value();
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  static DeployKeyRecord Key(const std::string& id, const std::string& deployment, uid_t uid,
                             int64_t created) {
    DeployKeyRecord r;
    r.id = id;
    r.deployment = deployment;
    r.uid = uid;
    r.user = "u" + std::to_string(uid);
    r.name = "ci";
    r.secret_hash = std::string(64, 'b');
    r.created_at_ms = created;
    r.created_by = "socket";
    return r;
  }

  std::string dir_;
  std::unique_ptr<DeployKeyStore> store_;
};

TEST_F(DeployKeyStoreTest, InsertGetListDelete) {
  ASSERT_TRUE(store_->Insert(Key("k1", "digits", 1000, 10)).ok());
  ASSERT_TRUE(store_->Insert(Key("k2", "digits", 1000, 20)).ok());
  ASSERT_TRUE(store_->Insert(Key("k3", "llm", 1001, 30)).ok());
  EXPECT_EQ(store_->Insert(Key("k1", "llm", 1001, 40)).code(), Code::kAlreadyExists);

  auto got = store_->Get("k2");
  ASSERT_TRUE(got.ok() && got->has_value());
  EXPECT_EQ((*got)->deployment, "digits");
  EXPECT_EQ((*got)->uid, 1000u);
  EXPECT_EQ((*got)->secret_hash, std::string(64, 'b'));
  EXPECT_FALSE(store_->Get("nope")->has_value());

  auto digits = store_->List("digits", std::nullopt);
  ASSERT_TRUE(digits.ok());
  ASSERT_EQ(digits->size(), 2u);
  EXPECT_EQ((*digits)[0].id, "k2");  // newest first
  EXPECT_EQ(store_->List("digits", 1000u)->size(), 2u);
  EXPECT_TRUE(store_->List("digits", 1001u)->empty());
  EXPECT_EQ(*store_->CountLive("digits", 50), 2);

  EXPECT_TRUE(*store_->Delete("k1"));
  EXPECT_FALSE(*store_->Delete("k1"));
  EXPECT_EQ(*store_->CountLive("digits", 50), 1);
  EXPECT_EQ(*store_->DeleteAll("digits"), 1);
  EXPECT_EQ(*store_->DeleteAll("digits"), 0);
  EXPECT_EQ(store_->List("llm", std::nullopt)->size(), 1u);  // another deployment's stay
}

TEST_F(DeployKeyStoreTest, ExpiredKeysAreNotLive) {
  DeployKeyRecord r = Key("k1", "digits", 1000, 10);
  r.expires_at_ms = 100;
  ASSERT_TRUE(store_->Insert(r).ok());
  ASSERT_TRUE(store_->Insert(Key("k2", "digits", 1000, 20)).ok());
  EXPECT_EQ(*store_->CountLive("digits", 99), 2);
  EXPECT_EQ(*store_->CountLive("digits", 100), 1);
  ASSERT_TRUE(store_->Touch("k1", 55).ok());
  EXPECT_EQ((*store_->Get("k1"))->last_used_at_ms, 55);
}

// The keys' table is schema v8: a home an older Lathe left at v7 gains it,
// and its runs stay.
TEST_F(DeployKeyStoreTest, MigratesAVersion7Home) {
  const std::string path = dir_ + "/old.db";
  {
    const auto& all = SchemaMigrations();
    ASSERT_GE(all.size(), 8u);
    auto db = Db::Open(path, std::vector<std::string>(all.begin(), all.begin() + 7));
    ASSERT_TRUE(db.ok()) << db.status().ToString();
    EXPECT_EQ((*db)->schema_version(), 7);
    ASSERT_TRUE((*db)
                    ->Exec("INSERT INTO runs (id, name, seq, uid, user, spec, state, created_at, "
                           "run_dir) VALUES ('r-q', 'q', 1, 0, 'root', "
                           "'{\"command\":[\"true\"]}', 'queued', 2, '/h/runs/r-q')")
                    .ok());
  }
  auto keys = DeployKeyStore::Open(path);
  ASSERT_TRUE(keys.ok()) << keys.status().ToString();
  ASSERT_TRUE((*keys)->Insert(Key("k1", "digits", 1000, 1)).ok());
  auto runs = RunStore::Open(path);
  ASSERT_TRUE(runs.ok());
  EXPECT_EQ((*runs)->db().schema_version(), static_cast<int>(SchemaMigrations().size()));
  EXPECT_TRUE((*runs)->Get("r-q").ok());
}

}  // namespace
}  // namespace lathe::state

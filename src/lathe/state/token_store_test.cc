#include "lathe/state/token_store.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>

#include "lathe/state/run_store.h"
#include "lathe/state/schema.h"

namespace lathe::state {
namespace {

class TokenStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/lathe-tokens-XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    auto s = TokenStore::Open(dir_ + "/lathe.db");
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    store_ = std::move(s).value();
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  static TokenRecord Token(const std::string& id, uid_t uid, int64_t created) {
    TokenRecord r;
    r.id = id;
    r.uid = uid;
    r.user = "u" + std::to_string(uid);
    r.name = "laptop";
    r.secret_hash = std::string(64, 'a');
    r.created_at_ms = created;
    r.created_by = "socket";
    return r;
  }

  std::string dir_;
  std::unique_ptr<TokenStore> store_;
};

TEST_F(TokenStoreTest, InsertGetListDelete) {
  ASSERT_TRUE(store_->Insert(Token("t1", 1000, 10)).ok());
  ASSERT_TRUE(store_->Insert(Token("t2", 1000, 20)).ok());
  ASSERT_TRUE(store_->Insert(Token("t3", 1001, 30)).ok());
  EXPECT_EQ(store_->Insert(Token("t1", 1002, 40)).code(), Code::kAlreadyExists);

  auto got = store_->Get("t2");
  ASSERT_TRUE(got.ok() && got->has_value());
  EXPECT_EQ((*got)->uid, 1000u);
  EXPECT_EQ((*got)->name, "laptop");
  EXPECT_EQ((*got)->secret_hash, std::string(64, 'a'));
  EXPECT_FALSE(store_->Get("nope")->has_value());

  auto mine = store_->List(1000u);
  ASSERT_TRUE(mine.ok());
  ASSERT_EQ(mine->size(), 2u);
  EXPECT_EQ((*mine)[0].id, "t2");  // newest first
  EXPECT_EQ(store_->List(std::nullopt)->size(), 3u);
  EXPECT_EQ(*store_->CountFor(1000), 2);

  EXPECT_TRUE(*store_->Delete("t1"));
  EXPECT_FALSE(*store_->Delete("t1"));
  EXPECT_FALSE(store_->Get("t1")->has_value());
  EXPECT_EQ(*store_->CountFor(1000), 1);
}

TEST_F(TokenStoreTest, TouchAndExpiry) {
  TokenRecord r = Token("t1", 1000, 10);
  r.expires_at_ms = 100;
  ASSERT_TRUE(store_->Insert(r).ok());
  ASSERT_TRUE(store_->Touch("t1", 55).ok());
  auto got = store_->Get("t1");
  ASSERT_TRUE(got.ok() && got->has_value());
  EXPECT_EQ((*got)->last_used_at_ms, 55);
  EXPECT_TRUE((*got)->LiveAt(99));
  EXPECT_FALSE((*got)->LiveAt(100));
  TokenRecord forever = Token("t2", 1000, 10);
  EXPECT_TRUE(forever.LiveAt(INT64_MAX));
}

// The tokens' table is schema v4 of the one database: a home that an older
// Lathe left at v3 gains it, and its runs stay.
TEST_F(TokenStoreTest, MigratesAVersion3Home) {
  const std::string path = dir_ + "/old.db";
  {
    const auto& all = SchemaMigrations();
    auto db = Db::Open(path, {all[0], all[1], all[2]});
    ASSERT_TRUE(db.ok()) << db.status().ToString();
    ASSERT_TRUE((*db)
                    ->Exec("INSERT INTO runs (id, name, seq, uid, user, spec, state, created_at, "
                           "run_dir) VALUES ('r-q', 'q', 1, 0, 'root', "
                           "'{\"command\":[\"true\"]}', 'queued', 2, '/h/runs/r-q')")
                    .ok());
  }
  auto tokens = TokenStore::Open(path);
  ASSERT_TRUE(tokens.ok()) << tokens.status().ToString();
  ASSERT_TRUE((*tokens)->Insert(Token("t1", 1000, 1)).ok());
  auto runs = RunStore::Open(path);
  ASSERT_TRUE(runs.ok());
  EXPECT_EQ((*runs)->db().schema_version(), static_cast<int>(SchemaMigrations().size()));
  EXPECT_TRUE((*runs)->Get("r-q").ok());
}

}  // namespace
}  // namespace lathe::state

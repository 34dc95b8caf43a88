#include "lathe/state/credential_store.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>

#include "lathe/common/credential_format.h"
#include "lathe/state/run_store.h"
#include "lathe/state/schema.h"

namespace lathe::state {
namespace {

using Verdict = Verified::Verdict;
constexpr CredentialKind kToken = CredentialKind::kToken;
constexpr CredentialKind kSession = CredentialKind::kSession;
constexpr CredentialKind kKey = CredentialKind::kDeployKey;

class CredentialStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/lathe-creds-XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    auto s = CredentialStore::Open(dir_ + "/lathe.db");
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    store_ = std::move(s).value();
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  static CredentialRecord Token(const std::string& id, uid_t uid, int64_t created) {
    CredentialRecord r;
    r.id = id;
    r.kind = kToken;
    r.uid = uid;
    r.user = "u" + std::to_string(uid);
    r.name = "laptop";
    r.secret_hash = std::string(64, 'a');
    r.created_at_ms = created;
    r.created_by = "socket";
    return r;
  }
  static CredentialRecord Key(const std::string& id, const std::string& deployment, uid_t uid,
                              int64_t created) {
    CredentialRecord r = Token(id, uid, created);
    r.kind = kKey;
    r.scope = deployment;
    r.name = "ci";
    r.secret_hash = std::string(64, 'b');
    return r;
  }
  static CredentialRecord Session(const std::string& id, uid_t uid, const std::string& scope,
                                  int64_t created) {
    CredentialRecord r = Token(id, uid, created);
    r.kind = kSession;
    r.scope = scope;
    r.name = "";
    r.expires_at_ms = created + 1000;
    r.last_used_at_ms = created;
    return r;
  }
  // Every byte of the database's files (the database, its WAL, its -shm).
  std::string DatabaseBytes() {
    std::string db;
    for (const auto& e : std::filesystem::directory_iterator(dir_)) {
      std::ifstream f(e.path(), std::ios::binary);
      db += std::string(std::istreambuf_iterator<char>(f), {});
    }
    return db;
  }

  std::string dir_;
  std::unique_ptr<CredentialStore> store_;
};

// --- tokens ---

TEST_F(CredentialStoreTest, TokensInsertGetListDelete) {
  ASSERT_TRUE(store_->Insert(Token("t1", 1000, 10)).ok());
  ASSERT_TRUE(store_->Insert(Token("t2", 1000, 20)).ok());
  ASSERT_TRUE(store_->Insert(Token("t3", 1001, 30)).ok());
  EXPECT_EQ(store_->Insert(Token("t1", 1002, 40)).code(), Code::kAlreadyExists);

  auto got = store_->Get(kToken, "t2");
  ASSERT_TRUE(got.ok() && got->has_value());
  EXPECT_EQ((*got)->uid, 1000u);
  EXPECT_EQ((*got)->name, "laptop");
  EXPECT_EQ((*got)->secret_hash, std::string(64, 'a'));
  EXPECT_FALSE(store_->Get(kToken, "nope")->has_value());

  auto mine = store_->List({kToken, 1000u});
  ASSERT_TRUE(mine.ok());
  ASSERT_EQ(mine->size(), 2u);
  EXPECT_EQ((*mine)[0].id, "t2");  // newest first
  EXPECT_EQ(store_->List({kToken})->size(), 3u);
  EXPECT_EQ(*store_->Count({kToken, 1000u}), 2);

  EXPECT_TRUE(*store_->Delete(kToken, "t1"));
  EXPECT_FALSE(*store_->Delete(kToken, "t1"));
  EXPECT_FALSE(store_->Get(kToken, "t1")->has_value());
  EXPECT_EQ(*store_->Count({kToken, 1000u}), 1);
}

TEST_F(CredentialStoreTest, TokensTouchAndExpiry) {
  CredentialRecord r = Token("t1", 1000, 10);
  r.expires_at_ms = 100;
  ASSERT_TRUE(store_->Insert(r).ok());
  ASSERT_TRUE(store_->Touch(kToken, "t1", 55).ok());
  auto got = store_->Get(kToken, "t1");
  ASSERT_TRUE(got.ok() && got->has_value());
  EXPECT_EQ((*got)->last_used_at_ms, 55);
  EXPECT_TRUE((*got)->LiveAt(99));
  EXPECT_FALSE((*got)->LiveAt(100));
  CredentialRecord forever = Token("t2", 1000, 10);
  EXPECT_TRUE(forever.LiveAt(INT64_MAX));
}

// --- deployment keys ---

TEST_F(CredentialStoreTest, KeysInsertGetListDelete) {
  ASSERT_TRUE(store_->Insert(Key("k1", "digits", 1000, 10)).ok());
  ASSERT_TRUE(store_->Insert(Key("k2", "digits", 1000, 20)).ok());
  ASSERT_TRUE(store_->Insert(Key("k3", "llm", 1001, 30)).ok());
  EXPECT_EQ(store_->Insert(Key("k1", "llm", 1001, 40)).code(), Code::kAlreadyExists);

  auto got = store_->Get(kKey, "k2");
  ASSERT_TRUE(got.ok() && got->has_value());
  EXPECT_EQ((*got)->scope, "digits");
  EXPECT_EQ((*got)->uid, 1000u);
  EXPECT_EQ((*got)->secret_hash, std::string(64, 'b'));
  EXPECT_FALSE(store_->Get(kKey, "nope")->has_value());

  auto digits = store_->List({kKey, std::nullopt, "digits"});
  ASSERT_TRUE(digits.ok());
  ASSERT_EQ(digits->size(), 2u);
  EXPECT_EQ((*digits)[0].id, "k2");  // newest first
  EXPECT_EQ(store_->List({kKey, 1000u, "digits"})->size(), 2u);
  EXPECT_TRUE(store_->List({kKey, 1001u, "digits"})->empty());
  EXPECT_EQ(*store_->Count({kKey, std::nullopt, "digits", 50}), 2);

  EXPECT_TRUE(*store_->Delete(kKey, "k1"));
  EXPECT_FALSE(*store_->Delete(kKey, "k1"));
  EXPECT_EQ(*store_->Count({kKey, std::nullopt, "digits", 50}), 1);
  EXPECT_EQ(*store_->DeleteScope(kKey, "digits"), 1);
  EXPECT_EQ(*store_->DeleteScope(kKey, "digits"), 0);
  EXPECT_EQ(store_->List({kKey, std::nullopt, "llm"})->size(), 1u);  // another deployment's stay
}

TEST_F(CredentialStoreTest, ExpiredKeysAreNotLive) {
  CredentialRecord r = Key("k1", "digits", 1000, 10);
  r.expires_at_ms = 100;
  ASSERT_TRUE(store_->Insert(r).ok());
  ASSERT_TRUE(store_->Insert(Key("k2", "digits", 1000, 20)).ok());
  // What the two-live-keys rule counts (api/deploy_keys.h): the expired one
  // leaves room.
  EXPECT_EQ(*store_->Count({kKey, std::nullopt, "digits", 99}), 2);
  EXPECT_EQ(*store_->Count({kKey, std::nullopt, "digits", 100}), 1);
  ASSERT_TRUE(store_->Touch(kKey, "k1", 55).ok());
  EXPECT_EQ((*store_->Get(kKey, "k1"))->last_used_at_ms, 55);
}

// The deployments' loop reads a deployment's keys (their hashes, for the
// front) and removes them with it, through a second connection to the file.
TEST_F(CredentialStoreTest, TheDeploymentsLoopSeesAndRemovesADeploymentsKeys) {
  ASSERT_TRUE(store_->Insert(Key("k1", "digits", 1000, 10)).ok());
  ASSERT_TRUE(store_->Insert(Key("k2", "llm", 1001, 20)).ok());
  ASSERT_TRUE(store_->Insert(Token("t1", 1000, 30)).ok());
  auto keys = CredentialStore::Open(dir_ + "/lathe.db");
  ASSERT_TRUE(keys.ok()) << keys.status().ToString();
  auto digits = (*keys)->List({kKey, std::nullopt, "digits", 0});
  ASSERT_TRUE(digits.ok());
  ASSERT_EQ(digits->size(), 1u);
  EXPECT_EQ((*digits)[0].id, "k1");
  EXPECT_EQ((*digits)[0].secret_hash, std::string(64, 'b'));
  EXPECT_TRUE((*keys)->List({kKey, 1001u, "digits", 0})->empty());
  EXPECT_EQ(*(*keys)->DeleteScope(kKey, "digits"), 1);
  EXPECT_FALSE(store_->Get(kKey, "k1")->has_value());
  EXPECT_TRUE(store_->Get(kKey, "k2")->has_value());
  EXPECT_TRUE(store_->Get(kToken, "t1")->has_value());
}

// --- sessions ---

TEST_F(CredentialStoreTest, SessionsExpireByTheirEndOrTheirIdleTime) {
  ASSERT_TRUE(store_->Insert(Session("s1", 1000, "ui", 10)).ok());   // ends at 1010
  ASSERT_TRUE(store_->Insert(Session("s2", 1000, "ui", 500)).ok());  // ends at 1500
  ASSERT_TRUE(store_->Insert(Session("s3", 1000, "run:r", 600)).ok());
  ASSERT_TRUE(store_->Insert(Token("t1", 1000, 10)).ok());  // never expires; not a session
  EXPECT_EQ(store_->List({kSession, 1000u, "ui"})->size(), 2u);
  EXPECT_EQ(store_->List({kSession, 1000u})->size(), 3u);
  auto s2 = *store_->Get(kSession, "s2");
  EXPECT_TRUE(s2->LiveAt(599, 100));
  EXPECT_FALSE(s2->LiveAt(600, 100));  // unused for 100 ms
  EXPECT_FALSE(s2->LiveAt(1500, 0));   // its end
  // At 1010 with 450 ms of idle time: s1 has ended, s2 (used at 500) is
  // idle, s3 (used at 600) lives on.
  EXPECT_EQ(*store_->DeleteExpired(kSession, 1010, 450), 2);
  EXPECT_FALSE(store_->Get(kSession, "s1")->has_value());
  EXPECT_TRUE(store_->Get(kSession, "s3")->has_value());
  EXPECT_TRUE(store_->Get(kToken, "t1")->has_value());
}

TEST_F(CredentialStoreTest, TheDaemonsKeysAreMadeOnce) {
  EXPECT_EQ(*store_->KeyOrInsert("csrf", "first"), "first");
  EXPECT_EQ(*store_->KeyOrInsert("csrf", "second"), "first");
  auto other = CredentialStore::Open(dir_ + "/lathe.db");
  ASSERT_TRUE(other.ok());
  EXPECT_EQ(*(*other)->KeyOrInsert("csrf", "third"), "first");
}

// --- the kinds together ---

TEST_F(CredentialStoreTest, KindsAreApart) {
  ASSERT_TRUE(store_->Insert(Token("t1", 1000, 10)).ok());
  ASSERT_TRUE(store_->Insert(Key("k1", "digits", 1000, 10)).ok());
  ASSERT_TRUE(store_->Insert(Session("s1", 1000, "ui", 10)).ok());
  EXPECT_FALSE(store_->Get(kSession, "t1")->has_value());
  EXPECT_FALSE(store_->Get(kToken, "k1")->has_value());
  EXPECT_FALSE(*store_->Delete(kKey, "t1"));
  EXPECT_FALSE(store_->Revoke(kToken, "s1", std::nullopt)->has_value());
  EXPECT_EQ(*store_->Count({kToken, 1000u}), 1);
  EXPECT_EQ((*store_->Get(kSession, "s1"))->kind, kSession);
  EXPECT_EQ((*store_->Get(kKey, "k1"))->kind, kKey);
  EXPECT_EQ(CredentialKindName(kKey), "deploy_key");
}

TEST_F(CredentialStoreTest, RevokeIsTheOwnersOrAnAdmins) {
  ASSERT_TRUE(store_->Insert(Token("t1", 1000, 10)).ok());
  EXPECT_FALSE(store_->Revoke(kToken, "t1", 1001u)->has_value());  // another user's
  EXPECT_TRUE(store_->Get(kToken, "t1")->has_value());
  auto gone = store_->Revoke(kToken, "t1", 1000u);
  ASSERT_TRUE(gone.ok() && gone->has_value());
  EXPECT_EQ((*gone)->name, "laptop");
  EXPECT_FALSE(store_->Revoke(kToken, "t1", std::nullopt)->has_value());
  ASSERT_TRUE(store_->Insert(Token("t2", 1000, 10)).ok());
  EXPECT_TRUE(store_->Revoke(kToken, "t2", std::nullopt)->has_value());  // an admin
}

TEST_F(CredentialStoreTest, VerifyChecksTheSecretTheScopeAndTheExpiryThenRecordsTheUse) {
  const std::string secret(64, 'c'), other(64, 'd');
  CredentialRecord k = Key("k1", "digits", 1000, 10);
  k.secret_hash = HashCredentialSecret(secret);
  k.expires_at_ms = 1000;
  ASSERT_TRUE(store_->Insert(k).ok());
  VerifyRules rules{.scope = "digits", .touch_every_ms = 100};

  auto v = store_->Verify(kKey, "k1", secret, rules, 100);
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ(v->verdict, Verdict::kOk);
  EXPECT_EQ(v->record.uid, 1000u);
  EXPECT_EQ(v->record.last_used_at_ms, 100);
  EXPECT_EQ((*store_->Get(kKey, "k1"))->last_used_at_ms, 100);
  // Not written again before touch_every_ms.
  EXPECT_EQ(store_->Verify(kKey, "k1", secret, rules, 199)->record.last_used_at_ms, 100);
  EXPECT_EQ((*store_->Get(kKey, "k1"))->last_used_at_ms, 100);
  EXPECT_EQ(store_->Verify(kKey, "k1", secret, rules, 200)->record.last_used_at_ms, 200);

  // A wrong secret, an unknown id, another scope, another kind: one answer.
  EXPECT_EQ(store_->Verify(kKey, "k1", other, rules, 50)->verdict, Verdict::kInvalid);
  EXPECT_EQ(store_->Verify(kKey, "k2", secret, rules, 50)->verdict, Verdict::kInvalid);
  VerifyRules llm{.scope = "llm"};
  EXPECT_EQ(store_->Verify(kKey, "k1", secret, llm, 50)->verdict, Verdict::kInvalid);
  EXPECT_EQ(store_->Verify(kToken, "k1", secret, {}, 50)->verdict, Verdict::kInvalid);
  EXPECT_TRUE(store_->Verify(kKey, "k1", other, rules, 50)->record.id.empty());

  // Past its expiry: the right secret says so, with when.
  auto late = store_->Verify(kKey, "k1", secret, rules, 1000);
  EXPECT_EQ(late->verdict, Verdict::kExpired);
  EXPECT_EQ(late->record.expires_at_ms, 1000);
  EXPECT_EQ(store_->Verify(kKey, "k1", other, rules, 1000)->verdict, Verdict::kInvalid);

  // Revoked: gone at the next check.
  ASSERT_TRUE(*store_->Delete(kKey, "k1"));
  EXPECT_EQ(store_->Verify(kKey, "k1", secret, rules, 60)->verdict, Verdict::kInvalid);
}

TEST_F(CredentialStoreTest, VerifyAsksTheKindsOwnRuleBeforeRecordingTheUse) {
  const std::string secret(64, 'e');
  CredentialRecord s = Session("s1", 1000, "ui", 10);
  s.secret_hash = HashCredentialSecret(secret);
  ASSERT_TRUE(store_->Insert(s).ok());
  bool creator_live = false;
  VerifyRules rules{.scope = "ui",
                    .idle_ms = 100,
                    .touch_every_ms = 0,
                    .also_live = [&](const CredentialRecord& r) {
                      EXPECT_EQ(r.created_by, "socket");
                      return creator_live;
                    }};
  EXPECT_EQ(store_->Verify(kSession, "s1", secret, rules, 50)->verdict, Verdict::kInvalid);
  EXPECT_EQ((*store_->Get(kSession, "s1"))->last_used_at_ms, 10);  // not recorded
  creator_live = true;
  EXPECT_EQ(store_->Verify(kSession, "s1", secret, rules, 50)->verdict, Verdict::kOk);
  EXPECT_EQ((*store_->Get(kSession, "s1"))->last_used_at_ms, 50);
  EXPECT_EQ(store_->Verify(kSession, "s1", secret, rules, 149)->verdict, Verdict::kOk);
  EXPECT_EQ(store_->Verify(kSession, "s1", secret, rules, 249)->verdict, Verdict::kExpired);
}

TEST_F(CredentialStoreTest, OnlyTheSecretsHashIsStored) {
  const std::string token_secret(64, '7'), key_secret(64, '8'), session_secret(64, '9');
  CredentialRecord t = Token("t1", 1000, 10), k = Key("k1", "digits", 1000, 10),
                   s = Session("s1", 1000, "ui", 10);
  t.secret_hash = HashCredentialSecret(token_secret);
  k.secret_hash = HashCredentialSecret(key_secret);
  s.secret_hash = HashCredentialSecret(session_secret);
  for (const auto* r : {&t, &k, &s}) ASSERT_TRUE(store_->Insert(*r).ok());
  EXPECT_EQ(store_->Verify(kToken, "t1", token_secret, {}, 20)->verdict, Verdict::kOk);
  const std::string db = DatabaseBytes();
  for (const auto& secret : {token_secret, key_secret, session_secret}) {
    EXPECT_EQ(db.find(secret), std::string::npos);
    EXPECT_NE(db.find(HashCredentialSecret(secret)),
              std::string::npos);  // the file is the one written
  }
}

// --- migrations ---

// A home an older Lathe left at v3 (before tokens) gains the credentials, and
// its runs stay.
TEST_F(CredentialStoreTest, MigratesAVersion3Home) {
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
  auto creds = CredentialStore::Open(path);
  ASSERT_TRUE(creds.ok()) << creds.status().ToString();
  ASSERT_TRUE((*creds)->Insert(Token("t1", 1000, 1)).ok());
  ASSERT_TRUE((*creds)->Insert(Key("k1", "digits", 1000, 1)).ok());
  auto runs = RunStore::Open(path);
  ASSERT_TRUE(runs.ok());
  EXPECT_EQ((*runs)->db().schema_version(), static_cast<int>(SchemaMigrations().size()));
  EXPECT_TRUE((*runs)->Get("r-q").ok());
}

// v12 moves the three tables of v11 into credentials, row for row, and keeps
// the CSRF key.
TEST_F(CredentialStoreTest, MigratesTheThreeTablesOfAVersion11Home) {
  const std::string path = dir_ + "/old.db";
  {
    const auto& all = SchemaMigrations();
    ASSERT_GE(all.size(), 12u);
    auto db = Db::Open(path, std::vector<std::string>(all.begin(), all.begin() + 11));
    ASSERT_TRUE(db.ok()) << db.status().ToString();
    ASSERT_EQ((*db)->schema_version(), 11);
    ASSERT_TRUE((*db)
                    ->Exec("INSERT INTO api_tokens VALUES ('t1', 1000, 'u1000', 'laptop', "
                           "'h-t1', 10, 100, 55, 'socket');"
                           "INSERT INTO api_tokens VALUES ('t2', 1001, 'u1001', '', "
                           "'h-t2', 20, 0, 0, 'daemon token');"
                           "INSERT INTO browser_sessions VALUES ('s1', 1000, 'u1000', 'run:r1', "
                           "'h-s1', 30, 300, 33, 'token t1');"
                           "INSERT INTO deploy_keys VALUES ('k1', 'digits', 1001, 'u1001', 'ci', "
                           "'h-k1', 40, 400, 44, 'socket');"
                           "INSERT INTO session_keys VALUES ('csrf', 'the-key');")
                    .ok());
  }
  auto creds = CredentialStore::Open(path);
  ASSERT_TRUE(creds.ok()) << creds.status().ToString();
  auto& c = **creds;

  auto t1 = *c.Get(kToken, "t1");
  ASSERT_TRUE(t1.has_value());
  EXPECT_EQ(t1->uid, 1000u);
  EXPECT_EQ(t1->user, "u1000");
  EXPECT_EQ(t1->name, "laptop");
  EXPECT_EQ(t1->scope, "");
  EXPECT_EQ(t1->secret_hash, "h-t1");
  EXPECT_EQ(t1->created_at_ms, 10);
  EXPECT_EQ(t1->expires_at_ms, 100);
  EXPECT_EQ(t1->last_used_at_ms, 55);
  EXPECT_EQ(t1->created_by, "socket");
  auto t2 = *c.Get(kToken, "t2");
  ASSERT_TRUE(t2.has_value());
  EXPECT_EQ(t2->expires_at_ms, 0);
  EXPECT_EQ(t2->created_by, "daemon token");

  auto s1 = *c.Get(kSession, "s1");
  ASSERT_TRUE(s1.has_value());
  EXPECT_EQ(s1->uid, 1000u);
  EXPECT_EQ(s1->name, "");
  EXPECT_EQ(s1->scope, "run:r1");
  EXPECT_EQ(s1->secret_hash, "h-s1");
  EXPECT_EQ(s1->created_at_ms, 30);
  EXPECT_EQ(s1->expires_at_ms, 300);
  EXPECT_EQ(s1->last_used_at_ms, 33);
  EXPECT_EQ(s1->created_by, "token t1");

  auto k1 = *c.Get(kKey, "k1");
  ASSERT_TRUE(k1.has_value());
  EXPECT_EQ(k1->uid, 1001u);
  EXPECT_EQ(k1->user, "u1001");
  EXPECT_EQ(k1->name, "ci");
  EXPECT_EQ(k1->scope, "digits");
  EXPECT_EQ(k1->secret_hash, "h-k1");
  EXPECT_EQ(k1->created_at_ms, 40);
  EXPECT_EQ(k1->expires_at_ms, 400);
  EXPECT_EQ(k1->last_used_at_ms, 44);

  EXPECT_EQ(*c.Count({kToken}), 2);
  EXPECT_EQ(*c.Count({kSession}), 1);
  EXPECT_EQ(*c.Count({kKey}), 1);
  EXPECT_EQ(*c.KeyOrInsert("csrf", "another"), "the-key");

  auto db = Db::Open(path, SchemaMigrations());
  ASSERT_TRUE(db.ok());
  EXPECT_EQ((*db)->schema_version(), static_cast<int>(SchemaMigrations().size()));
  auto tables = (*db)->Prepare(
      "SELECT COUNT(*) FROM sqlite_master WHERE name IN ('api_tokens', 'browser_sessions', "
      "'deploy_keys')");
  ASSERT_TRUE(tables.ok());
  ASSERT_TRUE(*tables->Step());
  EXPECT_EQ(tables->Int(0), 0);  // the old tables are gone
}

}  // namespace
}  // namespace lathe::state

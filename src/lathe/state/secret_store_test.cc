#include "lathe/state/secret_store.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <sstream>

namespace lathe::state {
namespace {

constexpr const char* kValue = "hf_PlaintextThatMustNotBeStored42";

class SecretStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/lathe-secrets-XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    key_ = NewSecretKey();
    store_ = OpenWith(key_);
    ASSERT_NE(store_, nullptr);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::unique_ptr<SecretStore> OpenWith(const std::string& key) {
    auto s = SecretStore::Open(dir_ + "/lathe.db", *SecretBox::FromKey(key));
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return s.ok() ? std::move(s).value() : nullptr;
  }

  // Every file SQLite has written (the database, its WAL), as bytes.
  std::string AllDbBytes() {
    std::string all;
    for (const auto& e : std::filesystem::directory_iterator(dir_)) {
      std::ifstream in(e.path(), std::ios::binary);
      std::stringstream ss;
      ss << in.rdbuf();
      all += ss.str();
    }
    return all;
  }

  std::string dir_, key_;
  std::unique_ptr<SecretStore> store_;
};

TEST_F(SecretStoreTest, StoresOnlyTheSealedValue) {
  ASSERT_TRUE(*store_->Put(1000, "HF_TOKEN", kValue, 5));
  auto v = store_->Value(1000, "HF_TOKEN");
  ASSERT_TRUE(v.ok() && *v);
  EXPECT_EQ(**v, kValue);
  std::string bytes = AllDbBytes();
  ASSERT_NE(bytes.find("HF_TOKEN"), std::string::npos);  // the files were read
  EXPECT_EQ(bytes.find(kValue), std::string::npos);
  EXPECT_EQ(bytes.find("PlaintextThatMust"), std::string::npos);
}

TEST_F(SecretStoreTest, EachUserHasTheirOwn) {
  ASSERT_TRUE(store_->Put(1000, "A", "alice-value", 5).ok());
  ASSERT_TRUE(store_->Put(1001, "A", "bob-value", 6).ok());
  EXPECT_EQ(**store_->Value(1000, "A"), "alice-value");
  EXPECT_EQ(**store_->Value(1001, "A"), "bob-value");
  EXPECT_FALSE(store_->Value(1002, "A")->has_value());
  ASSERT_EQ(store_->List(1000)->size(), 1u);
  EXPECT_EQ(*store_->CountFor(1001), 1);
  EXPECT_TRUE(*store_->Delete(1001, "A"));
  EXPECT_FALSE(*store_->Delete(1001, "A"));
  EXPECT_EQ(**store_->Value(1000, "A"), "alice-value");
}

TEST_F(SecretStoreTest, ReplacingKeepsTheCreationTime) {
  EXPECT_TRUE(*store_->Put(1000, "B", "one", 5));
  EXPECT_FALSE(*store_->Put(1000, "B", "two", 9));
  auto l = store_->List(1000);
  ASSERT_EQ(l->size(), 1u);
  EXPECT_EQ((*l)[0].name, "B");
  EXPECT_EQ((*l)[0].created_at_ms, 5);
  EXPECT_EQ((*l)[0].updated_at_ms, 9);
  EXPECT_EQ(**store_->Value(1000, "B"), "two");
}

TEST_F(SecretStoreTest, AnotherKeyCannotOpenAValue) {
  ASSERT_TRUE(store_->Put(1000, "C", kValue, 5).ok());
  auto other = OpenWith(NewSecretKey());
  ASSERT_NE(other, nullptr);
  EXPECT_FALSE(other->Value(1000, "C").ok());
}

}  // namespace
}  // namespace lathe::state

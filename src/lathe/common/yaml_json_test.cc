#include "lathe/common/yaml_json.h"

#include <gtest/gtest.h>

#include <string>

namespace lathe {
namespace {

Result<Json> Convert(const std::string& yaml, const YamlLimits& limits = {}) {
  return YamlToJson(YAML::Load(yaml), "f.yaml", limits);
}

// Ten levels of nine aliases each: 9^10 (3.5 billion) strings once expanded.
std::string BillionLaughs() {
  std::string y = "l0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n";
  for (int i = 1; i < 10; ++i) {
    std::string prev = "*l" + std::to_string(i - 1);
    y += "l" + std::to_string(i) + ": &l" + std::to_string(i) + " [";
    for (int k = 0; k < 9; ++k) y += (k ? ", " : "") + prev;
    y += "]\n";
  }
  return y;
}

TEST(YamlToJson, PlainScalarsBecomeTypedValues) {
  auto j = Convert("a: 1\nb: 1.5\nc: true\nd: ~\ne: '2'\nf: [x, 3]\n");
  ASSERT_TRUE(j.ok()) << j.status().ToString();
  EXPECT_EQ((*j)["a"], 1);
  EXPECT_EQ((*j)["b"], 1.5);
  EXPECT_EQ((*j)["c"], true);
  EXPECT_TRUE((*j)["d"].is_null());
  EXPECT_EQ((*j)["e"], "2");
  EXPECT_EQ((*j)["f"][1], 3);
}

TEST(YamlToJson, NumbersBeyondADoubleStayAsWritten) {
  auto j = Convert("a: 1e400\nb: -1e400\nc: 99999999999999999999\n");
  ASSERT_TRUE(j.ok());
  EXPECT_EQ((*j)["a"], "1e400");
  EXPECT_EQ((*j)["b"], "-1e400");
  EXPECT_TRUE((*j)["c"].is_number_float());  // too long for an integer, fine as a double
}

TEST(YamlToJson, DuplicateKeyIsRefusedNamingItAndItsLine) {
  auto j = Convert("type: job\ncommand: [echo, one]\ncommand: [echo, two]\n");
  ASSERT_FALSE(j.ok());
  EXPECT_EQ(j.status().msg_id(), "yaml.duplicate_key");
  EXPECT_NE(j.status().message().find("'command'"), std::string::npos) << j.status().message();
  EXPECT_NE(j.status().message().find("line 3"), std::string::npos) << j.status().message();
  EXPECT_NE(j.status().message().find("f.yaml"), std::string::npos);
  EXPECT_FALSE(Convert("env: {A: 1, A: 2}\n").ok());    // nested mappings too
  EXPECT_TRUE(Convert("a: {x: 1}\nb: {x: 1}\n").ok());  // same key in two mappings is fine
}

TEST(YamlToJson, NonScalarKeyIsRefused) {
  auto j = Convert("? [a, b]\n: c\n");
  ASSERT_FALSE(j.ok());
  EXPECT_EQ(j.status().msg_id(), "yaml.bad_key");
}

TEST(YamlToJson, BillionLaughsStopsAtTheNodeLimit) {
  auto j = Convert(BillionLaughs());
  ASSERT_FALSE(j.ok());
  EXPECT_EQ(j.status().msg_id(), "yaml.too_many_nodes");
  EXPECT_NE(j.status().message().find("100000"), std::string::npos) << j.status().message();
  // The same aliases, few enough, convert.
  auto small = Convert("a: &a [x, y]\nb: [*a, *a]\n");
  ASSERT_TRUE(small.ok());
  EXPECT_EQ((*small)["b"][1][1], "y");
}

TEST(YamlToJson, AliasesOfALongScalarStopAtTheByteLimit) {
  std::string y = "s: &s " + std::string(1000, 'x') + "\nl: [";
  for (int i = 0; i < 100; ++i) y += (i ? ", " : "") + std::string("*s");
  y += "]\n";
  YamlLimits limits;
  limits.max_scalar_bytes = 50'000;
  auto j = Convert(y, limits);
  ASSERT_FALSE(j.ok());
  EXPECT_EQ(j.status().msg_id(), "yaml.too_many_bytes");
  EXPECT_TRUE(Convert(y).ok());  // 101 kB is within the default
}

TEST(YamlToJson, AliasInsideItsOwnAnchorStopsAtTheDepthLimit) {
  auto j = Convert("command: &a [echo, *a]\n");
  ASSERT_FALSE(j.ok());
  EXPECT_EQ(j.status().msg_id(), "yaml.too_deep");
  std::string deep = std::string(70, '[') + std::string(70, ']');
  EXPECT_EQ(Convert(deep).status().msg_id(), "yaml.too_deep");
  EXPECT_TRUE(Convert(std::string(60, '[') + std::string(60, ']')).ok());
}

}  // namespace
}  // namespace lathe

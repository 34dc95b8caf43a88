#include "lathe/daemon/config.h"

#include <gtest/gtest.h>

namespace lathe::daemon {
namespace {

TEST(DaemonConfig, ParsesKnownKeys) {
  auto c = ParseDaemonConfig("gpus: sim:4x24GB\nhost: 0.0.0.0\nport: 7731\ngrace: 30s\n", "c.yaml");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(*c->gpus, "sim:4x24GB");
  EXPECT_EQ(*c->host, "0.0.0.0");
  EXPECT_EQ(*c->port, 7731);
  EXPECT_EQ(*c->grace, "30s");
  auto empty = ParseDaemonConfig("", "c.yaml");
  ASSERT_TRUE(empty.ok());
  EXPECT_FALSE(empty->gpus.has_value());
}

TEST(DaemonConfig, RejectsBadKeysAndValuesNamingThem) {
  for (const char* bad : {"gpu: sim:4\n", "port: 70000\n", "port: http\n", "grace: soon\n",
                          "gpus: [a, b]\n", "- a\n"}) {
    auto c = ParseDaemonConfig(bad, "c.yaml");
    ASSERT_FALSE(c.ok()) << bad;
    EXPECT_EQ(c.status().msg_id(), "config.bad_key");
    EXPECT_NE(c.status().message().find("c.yaml"), std::string::npos);
  }
}

TEST(DaemonConfig, MissingFileIsEmpty) {
  auto c = LoadDaemonConfig("/nonexistent/lathe/config.yaml");
  ASSERT_TRUE(c.ok());
  EXPECT_FALSE(c->port.has_value());
}

}  // namespace
}  // namespace lathe::daemon

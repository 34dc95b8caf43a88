#include "lathe/api/host_check.h"

#include <gtest/gtest.h>

namespace lathe::api {
namespace {

TEST(HostCheck, NormalizesPortsCaseBracketsAndTheTrailingDot) {
  EXPECT_EQ(NormalizeHost("localhost"), "localhost");
  EXPECT_EQ(NormalizeHost("LocalHost:8421"), "localhost");
  EXPECT_EQ(NormalizeHost("localhost."), "localhost");
  EXPECT_EQ(NormalizeHost("localhost.:8421"), "localhost");
  EXPECT_EQ(NormalizeHost("127.0.0.1:1"), "127.0.0.1");
  EXPECT_EQ(NormalizeHost("[::1]"), "[::1]");
  EXPECT_EQ(NormalizeHost("[::1]:8421"), "[::1]");
  EXPECT_EQ(NormalizeHost("[FE80::1]"), "[fe80::1]");
  EXPECT_EQ(NormalizeHost("Lab.Example.ORG"), "lab.example.org");
}

TEST(HostCheck, MalformedHeadersNormalizeToNothing) {
  for (const char* bad :
       {"", ":8421", "localhost:", "localhost:84x1", "localhost:123456", "[::1", "[::1]x",
        "[::1]:", "[]", "[::g]", "local host", "a..b", ".localhost", "localhost..",
        "evil.example/x", "user@localhost", "localhost:8421:1", "::1", "\x7f"}) {
    EXPECT_EQ(NormalizeHost(bad), "") << bad;
  }
}

TEST(HostCheck, AllowsTheLoopbackNamesAndTheConfiguredOnes) {
  const std::vector<std::string> none;
  for (const char* ok : {"localhost", "localhost:8421", "LOCALHOST", "localhost.", "127.0.0.1",
                         "127.0.0.1:8421", "[::1]", "[::1]:8421"}) {
    EXPECT_TRUE(DaemonHostAllowed(ok, none)) << ok;
  }
  for (const char* no : {"", "evil.example", "evil.example:8421", "127.0.0.2", "127.0.0.1.nip.io",
                         "localhost.evil.example", "lab.example.org", "[::2]", "0.0.0.0"}) {
    EXPECT_FALSE(DaemonHostAllowed(no, none)) << no;
  }
  const std::vector<std::string> cfg = {"Lab.Example.org", "10.0.0.5", "::5", "[fe80::9]",
                                        "gpu1.example.org:8421"};
  EXPECT_TRUE(DaemonHostAllowed("lab.example.org:8421", cfg));
  EXPECT_TRUE(DaemonHostAllowed("LAB.example.org.", cfg));
  EXPECT_TRUE(DaemonHostAllowed("10.0.0.5:8421", cfg));
  EXPECT_TRUE(DaemonHostAllowed("[::5]:8421", cfg));
  EXPECT_TRUE(DaemonHostAllowed("[fe80::9]", cfg));
  EXPECT_TRUE(DaemonHostAllowed("gpu1.example.org", cfg));  // a port in the entry is ignored
  EXPECT_FALSE(DaemonHostAllowed("sub.lab.example.org", cfg));
  EXPECT_FALSE(DaemonHostAllowed("example.org", cfg));
  EXPECT_FALSE(DaemonHostAllowed("10.0.0.50", cfg));
}

// A run's origin (<run>.localhost) is not the daemon's: it is refused here,
// and the run-origin proxy answers it before this check is reached.
TEST(HostCheck, SubdomainsOfLocalhostAreNotTheDaemon) {
  EXPECT_FALSE(DaemonHostAllowed("r3k7q0m9x2a.localhost:8421", {}));
  EXPECT_FALSE(DaemonHostAllowed("app.r3k7q0m9x2a.localhost", {}));
}

TEST(HostCheck, LoopbackListenHosts) {
  for (const char* h : {"localhost", "127.0.0.1", "127.1.2.3", "::1", "[::1]"}) {
    EXPECT_TRUE(IsLoopbackListenHost(h)) << h;
  }
  for (const char* h : {"", "0.0.0.0", "::", "10.0.0.5", "lab.example.org", "localhost.evil"}) {
    EXPECT_FALSE(IsLoopbackListenHost(h)) << h;
  }
}

}  // namespace
}  // namespace lathe::api

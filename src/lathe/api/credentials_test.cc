#include "lathe/api/credentials.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <filesystem>

namespace lathe::api {
namespace {

TEST(DaemonUrl, TakesHttpHostAndPortOnly) {
  auto u = ParseDaemonUrl("http://gpu1.lab:8421/");
  ASSERT_TRUE(u.ok()) << u.status().ToString();
  EXPECT_EQ(u->host, "gpu1.lab");
  EXPECT_EQ(u->port, 8421);
  EXPECT_EQ(u->Url(), "http://gpu1.lab:8421");
  EXPECT_FALSE(u->loopback());
  EXPECT_TRUE(ParseDaemonUrl("http://127.0.0.1:1")->loopback());
  EXPECT_TRUE(ParseDaemonUrl("http://localhost:80")->loopback());
  auto v6 = ParseDaemonUrl("http://[::1]:9000");
  ASSERT_TRUE(v6.ok());
  EXPECT_TRUE(v6->loopback());
  EXPECT_EQ(v6->Url(), "http://[::1]:9000");
  auto tls = ParseDaemonUrl("https://gpu1.lab:8421/");
  ASSERT_TRUE(tls.ok()) << tls.status().ToString();
  EXPECT_TRUE(tls->tls);
  EXPECT_FALSE(u->tls);
  EXPECT_EQ(tls->Url(), "https://gpu1.lab:8421");
  EXPECT_EQ(ParseDaemonUrl("https://[::1]:9000")->Url(), "https://[::1]:9000");
  for (const char* bad : {"gpu1:8421", "http://gpu1", "http://gpu1:0", "http://gpu1:65536",
                          "http://:80", "http://gpu1:80/api", "http://a b:80", "http://::1:80",
                          "ftp://gpu1:80", "http://gpu1:8x", "https://gpu1", "https//gpu1:80"}) {
    auto r = ParseDaemonUrl(bad);
    EXPECT_EQ(r.status().msg_id(), "login.bad_url") << bad;
    EXPECT_TRUE(r.status().IsInvalidArgument()) << bad;
  }
}

class CredentialsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/lathe-creds-XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    const char* old = std::getenv("XDG_CONFIG_HOME");
    if (old) old_ = old;
    ::setenv("XDG_CONFIG_HOME", (dir_ + "/cfg").c_str(), 1);
  }
  void TearDown() override {
    if (old_) {
      ::setenv("XDG_CONFIG_HOME", old_->c_str(), 1);
    } else {
      ::unsetenv("XDG_CONFIG_HOME");
    }
    std::filesystem::remove_all(dir_);
  }
  std::string dir_;
  std::optional<std::string> old_;
};

TEST_F(CredentialsTest, SavedPrivatelyAndLoadedBack) {
  EXPECT_EQ(CredentialsPath(), dir_ + "/cfg/lathe/credentials");
  EXPECT_FALSE(LoadCredentials()->has_value());
  EXPECT_FALSE(*RemoveCredentials());
  ASSERT_TRUE(SaveCredentials({"http://gpu1:8421", "lathe_x"}).ok());
  struct stat st;
  ASSERT_EQ(::stat(CredentialsPath().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  ASSERT_EQ(::stat((dir_ + "/cfg/lathe").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  auto c = LoadCredentials();
  ASSERT_TRUE(c.ok() && c->has_value()) << c.status().ToString();
  EXPECT_EQ((*c)->url, "http://gpu1:8421");
  EXPECT_EQ((*c)->token, "lathe_x");
  EXPECT_EQ((*c)->ca_file, "");
  // An https login keeps the CA it was verified with.
  ASSERT_TRUE(SaveCredentials({"https://gpu1:8421", "lathe_y", "/etc/lab/ca.pem"}).ok());
  auto tls = LoadCredentials();
  ASSERT_TRUE(tls.ok() && tls->has_value()) << tls.status().ToString();
  EXPECT_EQ((*tls)->url, "https://gpu1:8421");
  EXPECT_EQ((*tls)->ca_file, "/etc/lab/ca.pem");
  EXPECT_TRUE(*RemoveCredentials());
  EXPECT_FALSE(LoadCredentials()->has_value());
}

TEST_F(CredentialsTest, RefusesAFileOthersMayReadOrOneItDidNotWrite) {
  ASSERT_TRUE(SaveCredentials({"http://gpu1:8421", "lathe_x"}).ok());
  ASSERT_EQ(::chmod(CredentialsPath().c_str(), 0644), 0);
  auto c = LoadCredentials();
  EXPECT_EQ(c.status().msg_id(), "credentials.mode");
  EXPECT_NE(c.status().message().find("0644"), std::string::npos);
  ASSERT_EQ(::chmod(CredentialsPath().c_str(), 0600), 0);
  ASSERT_TRUE(SaveCredentials({"ftp://nowhere", "t"}).ok());
  EXPECT_EQ(LoadCredentials().status().msg_id(), "credentials.bad");
}

}  // namespace
}  // namespace lathe::api

#include "lathe/api/browser_page.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <ctime>

#include "lathe/os/files.h"

namespace lathe::api {
namespace {

constexpr const char* kUrl = "http://localhost:8421/ui/login?code=abc123&next=/x";

TEST(SignInPage, TakesTheBrowserOnByScriptAndByRefresh) {
  auto html = SignInPageHtml(kUrl);
  ASSERT_TRUE(html.ok()) << html.status().ToString();
  EXPECT_NE(html->find("location.replace('http://localhost:8421/ui/login?code=abc123&next=/x')"),
            std::string::npos)
      << *html;
  EXPECT_NE(html->find("content=\"0; url=http://localhost:8421/ui/login?code=abc123&amp;next=/x\""),
            std::string::npos)
      << *html;
  EXPECT_NE(html->find("no-referrer"), std::string::npos);
}

TEST(SignInPage, RefusesWhatCouldEndAnAttributeOrAScript) {
  for (const char* bad :
       {"javascript:alert(1)", "file:///etc/passwd", "http://h/'-alert(1)-'", "http://h/\"><x>",
        "http://h/</script>", "http://h/a b", "http://h/a\\b", "http://h/\n", ""}) {
    EXPECT_EQ(SignInPageHtml(bad).status().code(), Code::kInvalidArgument) << bad;
  }
  EXPECT_TRUE(SignInPageHtml("https://[::1]:8421/_lathe/login?code=x%2Fy").ok());
}

class SignInPageFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/lathe-signin-XXXXXX";
    base_ = ::mkdtemp(tmpl);
  }
  void TearDown() override { (void)os::RemoveAll(base_); }
  std::string base_;
};

TEST_F(SignInPageFiles, WritesAPrivatePageAndSweepsStaleOnes) {
  const std::string dir = base_ + "/lathe/browser";
  const int64_t now_ms = int64_t{::time(nullptr)} * 1000;
  auto first = WriteSignInPage(dir, kUrl, now_ms);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ(first->rfind(dir + "/signin-", 0), 0u) << *first;
  EXPECT_EQ(*os::FileMode(dir), 0700u);
  EXPECT_EQ(*os::FileMode(*first), 0600u);
  EXPECT_EQ(*os::ReadFile(*first), *SignInPageHtml(kUrl));
  // The next page, written after the first one went stale, removes it.
  auto second = WriteSignInPage(dir, kUrl, now_ms + kStaleSignInPageMs + 1000);
  ASSERT_TRUE(second.ok());
  EXPECT_NE(*second, *first);
  EXPECT_FALSE(os::Exists(*first));
  EXPECT_TRUE(os::Exists(*second));
}

TEST_F(SignInPageFiles, NeverThroughASymlinkedDirectory) {
  ASSERT_EQ(::mkdir((base_ + "/elsewhere").c_str(), 0755), 0);
  ASSERT_EQ(::mkdir((base_ + "/lathe").c_str(), 0700), 0);
  ASSERT_EQ(::symlink((base_ + "/elsewhere").c_str(), (base_ + "/lathe/browser").c_str()), 0);
  auto page = WriteSignInPage(base_ + "/lathe/browser", kUrl, 0);
  EXPECT_TRUE(page.status().IsPermissionDenied()) << page.status().ToString();
  EXPECT_TRUE(os::ListDir(base_ + "/elsewhere")->empty());
}

TEST_F(SignInPageFiles, DirsAreTheRuntimeDirThenTheCacheOfThisUsersOwn) {
  const std::string run = base_ + "/run", home = base_ + "/home", cache = base_ + "/cache";
  for (const auto& d : {run, home, cache}) ASSERT_EQ(::mkdir(d.c_str(), 0700), 0);
  ::setenv("XDG_RUNTIME_DIR", run.c_str(), 1);
  ::setenv("XDG_CACHE_HOME", cache.c_str(), 1);
  EXPECT_EQ(SignInPageDirs(),
            (std::vector<std::string>{run + "/lathe/browser", cache + "/lathe/browser"}));
  ::setenv("XDG_RUNTIME_DIR", "relative", 1);  // XDG: a relative path is ignored
  ::unsetenv("XDG_CACHE_HOME");
  ::setenv("HOME", home.c_str(), 1);
  EXPECT_EQ(SignInPageDirs(), (std::vector<std::string>{home + "/.cache/lathe/browser"}));
  ::setenv("XDG_RUNTIME_DIR", (base_ + "/missing").c_str(), 1);
  EXPECT_EQ(SignInPageDirs(), (std::vector<std::string>{home + "/.cache/lathe/browser"}));
  if (::geteuid() == 0) {  // another user's runtime directory, inherited through sudo
    ASSERT_EQ(::chown(run.c_str(), 65534, 65534), 0);
    ::setenv("XDG_RUNTIME_DIR", run.c_str(), 1);
    EXPECT_EQ(SignInPageDirs(), (std::vector<std::string>{home + "/.cache/lathe/browser"}));
  }
}

}  // namespace
}  // namespace lathe::api

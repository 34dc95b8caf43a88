#include "lathe/api/run_origin.h"

#include <gtest/gtest.h>

namespace lathe::api {
namespace {

const std::vector<std::string> kBases = {"localhost", "lab.example.org"};

TEST(RunOrigin, TheMainPortAndANamedPortParse) {
  auto o = ParseRunOrigin("r3k7q0m9x2a.localhost:7731", kBases);
  ASSERT_TRUE(o.has_value());
  EXPECT_EQ(o->run_id, "r3k7q0m9x2a");
  EXPECT_EQ(o->port_name, "");
  EXPECT_EQ(o->base, "localhost");
  o = ParseRunOrigin("TB.R3K7Q0M9X2A.Lab.Example.Org.", kBases);
  ASSERT_TRUE(o.has_value());
  EXPECT_EQ(o->run_id, "r3k7q0m9x2a");
  EXPECT_EQ(o->port_name, "tb");
  EXPECT_EQ(o->base, "lab.example.org");
  EXPECT_EQ(RunOriginHost(*o), "tb.r3k7q0m9x2a.lab.example.org");
}

TEST(RunOrigin, TheDaemonsOwnOriginAndJunkAreNotRunOrigins) {
  for (const char* h :
       {"localhost", "localhost:7731", "127.0.0.1:7731", "[::1]:7731", "lab.example.org",
        "example.org", "r1.evil.example", "a.b.r1.localhost", "r_1.localhost", "9tb.r1.localhost",
        ".localhost", "", "r1.localhost.evil", "xlocalhost"}) {
    EXPECT_FALSE(ParseRunOrigin(h, kBases).has_value()) << h;
  }
}

TEST(RunOrigin, OnlyAPathOfThisOriginIsARedirectTarget) {
  for (const char* p : {"/", "/tree", "/lab?x=1#y", "/a/b/%2F%2Fc", "/%09/x"}) {
    EXPECT_TRUE(IsOwnOriginPath(p)) << p;
  }
  for (const char* p :
       {"", "x", "//evil.example/x", "/\\evil.example", "/\t/127.0.0.1:5555/x", "\t//evil", "/a\nb",
        "/a\rb", "/\x7f", "/a\\b", "https://evil.example/", "/\x01/evil"}) {
    EXPECT_FALSE(IsOwnOriginPath(p)) << p;
  }
}

}  // namespace
}  // namespace lathe::api

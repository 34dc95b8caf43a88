#include "lathe/net/http.h"

#include <gtest/gtest.h>

namespace lathe::net {
namespace {

TEST(PercentDecode, DecodesEscapesAndKeepsMalformedOnes) {
  EXPECT_EQ(PercentDecode("/a%20b/%E4%B8%AD", false), "/a b/\xE4\xB8\xAD");
  EXPECT_EQ(PercentDecode("a+b", false), "a+b");
  EXPECT_EQ(PercentDecode("a+b", true), "a b");
  EXPECT_EQ(PercentDecode("100%", false), "100%");
  EXPECT_EQ(PercentDecode("%zz%4", false), "%zz%4");
}

TEST(PathSegments, SkipsEmptySegments) {
  EXPECT_EQ(PathSegments("/v2/models/m/"), (std::vector<std::string>{"v2", "models", "m"}));
  EXPECT_EQ(PathSegments("//a///b"), (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(PathSegments("/").empty());
  EXPECT_TRUE(PathSegments("").empty());
}

TEST(PercentEncode, RoundTrips) {
  std::string raw = "a b&c=d/é~";
  EXPECT_EQ(PercentEncode(raw), "a%20b%26c%3Dd%2F%C3%A9~");
  EXPECT_EQ(PercentDecode(PercentEncode(raw), true), raw);
}

TEST(HttpRequest, QueryParamFindsDecodedValues) {
  HttpRequest req;
  req.query = "all=1&name=a%20b+c&flag&empty=&x%5B%5D=y";
  EXPECT_EQ(req.QueryParam("all"), "1");
  EXPECT_EQ(req.QueryParam("name"), "a b c");
  EXPECT_EQ(req.QueryParam("flag"), "");
  EXPECT_EQ(req.QueryParam("empty"), "");
  EXPECT_EQ(req.QueryParam("x[]"), "y");
  EXPECT_EQ(req.QueryParam("missing"), std::nullopt);
  EXPECT_EQ(HttpRequest{}.QueryParam("all"), std::nullopt);
}

TEST(HttpRequest, HeaderIsCaseInsensitive) {
  HttpRequest req;
  req.headers = {{"Content-Type", "text/plain"}, {"X-Token", "abc"}};
  EXPECT_EQ(req.Header("content-type"), "text/plain");
  EXPECT_EQ(req.Header("X-TOKEN"), "abc");
  EXPECT_EQ(req.Header("Accept"), "");
}

}  // namespace
}  // namespace lathe::net

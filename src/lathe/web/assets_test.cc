#include "lathe/web/assets.h"

#include <string>

#include <gtest/gtest.h>

namespace lathe::web {
namespace {

bool BuiltWithoutUi() { return FindAsset("index.html")->gzip.empty(); }  // LATHE_WEB_UI=OFF

TEST(AssetsTest, IndexNamesHashedAssetsThatExist) {
  const Asset* index = FindAsset("index.html");
  ASSERT_NE(index, nullptr);
  if (BuiltWithoutUi()) GTEST_SKIP() << "built with LATHE_WEB_UI=OFF";
  EXPECT_FALSE(index->immutable);
  EXPECT_EQ(index->content_type, "text/html; charset=utf-8");
  int named = 0;
  for (const Asset& a : Assets()) {
    if (a.path == "index.html") continue;
    ++named;
    EXPECT_TRUE(a.immutable) << a.path;
    EXPECT_EQ(a.path.rfind("assets/app-", 0), 0u) << a.path;
    EXPECT_NE(index->body.find("/ui/" + std::string(a.path)), std::string_view::npos) << a.path;
  }
  EXPECT_EQ(named, 2);  // app-<hash>.js and app-<hash>.css
  EXPECT_EQ(FindAsset("assets/none.js"), nullptr);
}

TEST(AssetsTest, EveryFileHasItsGzipAndBinaryBytesSurvive) {
  if (BuiltWithoutUi()) GTEST_SKIP() << "built with LATHE_WEB_UI=OFF";
  for (const Asset& a : Assets()) {
    ASSERT_GE(a.gzip.size(), 18u) << a.path;
    EXPECT_EQ(static_cast<unsigned char>(a.gzip[0]), 0x1f) << a.path;  // gzip's magic
    EXPECT_EQ(static_cast<unsigned char>(a.gzip[1]), 0x8b) << a.path;
    // The gzip trailer ends with the input's size mod 2^32, little-endian:
    // a NUL or any byte lost or added on the way into the binary changes it.
    const auto* end = reinterpret_cast<const unsigned char*>(a.gzip.data() + a.gzip.size());
    uint32_t isize = end[-4] | end[-3] << 8 | end[-2] << 16 | uint32_t{end[-1]} << 24;
    EXPECT_EQ(isize, a.body.size()) << a.path;
  }
}

TEST(AssetsTest, AcceptsGzip) {
  EXPECT_TRUE(AcceptsGzip("gzip"));
  EXPECT_TRUE(AcceptsGzip("gzip, deflate, br, zstd"));
  EXPECT_TRUE(AcceptsGzip("br;q=1.0, GZIP;q=0.5"));
  EXPECT_TRUE(AcceptsGzip("x-gzip"));
  EXPECT_FALSE(AcceptsGzip(""));
  EXPECT_FALSE(AcceptsGzip("identity"));
  EXPECT_FALSE(AcceptsGzip("br, deflate"));
  EXPECT_FALSE(AcceptsGzip("gzip;q=0"));
  EXPECT_FALSE(AcceptsGzip("gzip; q=0.000"));
  EXPECT_FALSE(AcceptsGzip("gzipped"));
}

}  // namespace
}  // namespace lathe::web

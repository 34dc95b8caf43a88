#include "lathe/snap/chunker.h"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "lathe/snap/sha256.h"
#include "lathe/snap/test_util/snap_files.h"

namespace lathe::snap {
namespace {

// Cuts a whole buffer the way the snapshotter does (without tensor hints).
std::vector<std::string> Chunks(const GearChunker& c, const std::string& data) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos < data.size()) {
    size_t n =
        c.NextCut(reinterpret_cast<const uint8_t*>(data.data()) + pos, data.size() - pos, true);
    out.push_back(data.substr(pos, n));
    pos += n;
  }
  return out;
}

size_t NotIn(const std::vector<std::string>& a, const std::vector<std::string>& b) {
  std::set<std::string> have(b.begin(), b.end());
  size_t n = 0;
  for (const auto& x : a) n += have.count(x) ? 0 : 1;
  return n;
}

TEST(ChunkerTest, SizesStayWithinBounds) {
  GearChunker c{ChunkerParams{}};
  std::string data = testing::RandomBytes(16 << 20, 1);
  auto chunks = Chunks(c, data);
  for (size_t i = 0; i + 1 < chunks.size(); ++i) {
    EXPECT_GE(chunks[i].size(), c.params().min_bytes);
    EXPECT_LE(chunks[i].size(), c.params().max_bytes);
  }
  double avg = static_cast<double>(data.size()) / static_cast<double>(chunks.size());
  EXPECT_GT(avg, 32 * 1024);
  EXPECT_LT(avg, 128 * 1024);
}

TEST(ChunkerTest, SameDataSameCuts) {
  GearChunker c{ChunkerParams{}};
  std::string data = testing::RandomBytes(4 << 20, 2);
  EXPECT_EQ(Chunks(c, data), Chunks(c, data));
}

TEST(ChunkerTest, InsertionNearStartChangesOnlyNearbyChunks) {
  GearChunker c{ChunkerParams{}};
  std::string data = testing::RandomBytes(8 << 20, 3);
  auto before = Chunks(c, data);
  std::string edited = data;
  edited.insert(100, "x");
  auto after = Chunks(c, edited);
  EXPECT_LE(NotIn(after, before), 2u);  // only the chunk(s) around the insertion are new
  EXPECT_GE(before.size(), 64u);
}

TEST(ChunkerTest, InsertionInTheMiddleChangesOnlyNearbyChunks) {
  GearChunker c{ChunkerParams{}};
  std::string data = testing::RandomBytes(8 << 20, 4);
  auto before = Chunks(c, data);
  std::string edited = data;
  edited.insert(4 << 20, testing::RandomBytes(1000, 5));
  edited.erase(6 << 20, 10);
  auto after = Chunks(c, edited);
  EXPECT_LE(NotIn(after, before), 4u);
}

TEST(ChunkerTest, NeedsMoreDataUnlessFinal) {
  GearChunker c{ChunkerParams{}};
  std::string data = testing::RandomBytes(100 << 10, 6);
  const auto* p = reinterpret_cast<const uint8_t*>(data.data());
  EXPECT_EQ(c.NextCut(p, data.size(), false), 0u);  // a cut may lie beyond
  size_t n = c.NextCut(p, data.size(), true);
  EXPECT_GT(n, 0u);
  EXPECT_LE(n, data.size());
  EXPECT_EQ(c.NextCut(p, 10, true), 10u);  // below min: everything
}

TEST(ChunkerTest, ValidatesParams) {
  EXPECT_TRUE(ValidChunkerParams(ChunkerParams{}));
  EXPECT_FALSE(ValidChunkerParams({16384, 60000, 262144}));  // avg not a power of two
  EXPECT_FALSE(ValidChunkerParams({65536, 65536, 262144}));
}

TEST(Sha256Test, KnownVectorAndHex) {
  EXPECT_EQ(ToHex(Sha256("abc")),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  auto d = DigestFromHex(ToHex(Sha256("abc")));
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(*d, Sha256("abc"));
  EXPECT_FALSE(DigestFromHex("xyz").has_value());
  EXPECT_TRUE(IsHexPrefix("ba78"));
  EXPECT_FALSE(IsHexPrefix("BA78"));
}

}  // namespace
}  // namespace lathe::snap

#include "lathe/common/units.h"
#include "lathe/common/json.h"

#include <gtest/gtest.h>

namespace lathe {
namespace {

TEST(ParseBytes, DecimalAndBinary) {
  EXPECT_EQ(*ParseBytes("16G"), 16'000'000'000ull);
  EXPECT_EQ(*ParseBytes("16GB"), 16'000'000'000ull);
  EXPECT_EQ(*ParseBytes("16Gi"), 16ull << 30);
  EXPECT_EQ(*ParseBytes("16GiB"), 16ull << 30);
  EXPECT_EQ(*ParseBytes("64MB"), 64'000'000ull);
  EXPECT_EQ(*ParseBytes("512Mi"), 512ull << 20);
  EXPECT_EQ(*ParseBytes("1.5Gi"), 3ull << 29);
  EXPECT_EQ(*ParseBytes("100"), 100ull);
  EXPECT_EQ(*ParseBytes("4k"), 4000ull);
  EXPECT_EQ(*ParseBytes("4Ki"), 4096ull);
  EXPECT_EQ(*ParseBytes(" 2T "), 2'000'000'000'000ull);
}

TEST(ParseBytes, RejectsGarbageNamingTheValue) {
  for (const char* bad : {"", "G", "16X", "16GG", "-1G", "1.2.3G", "16 G", "16iB", "1e9"}) {
    auto r = ParseBytes(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_TRUE(r.status().IsInvalidArgument());
    EXPECT_EQ(r.status().msg_id(), "units.bad_bytes");
    EXPECT_NE(r.status().message().find(std::string("'") + bad + "'"), std::string::npos);
  }
}

TEST(ParseDuration, Units) {
  using std::chrono::milliseconds;
  EXPECT_EQ(*ParseDuration("90s"), milliseconds(90'000));
  EXPECT_EQ(*ParseDuration("12h"), milliseconds(12 * 3'600'000LL));
  EXPECT_EQ(*ParseDuration("1h30m"), milliseconds(5'400'000));
  EXPECT_EQ(*ParseDuration("500ms"), milliseconds(500));
  EXPECT_EQ(*ParseDuration("2d"), milliseconds(2 * 86'400'000LL));
  EXPECT_EQ(*ParseDuration("30"), milliseconds(30'000));
  EXPECT_EQ(*ParseDuration("1.5s"), milliseconds(1500));
}

TEST(ParseDuration, RejectsGarbage) {
  for (const char* bad : {"", "h", "12x", "12hh", "1h30", "-5s", "12 h"}) {
    auto r = ParseDuration(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().msg_id(), "units.bad_duration");
  }
}

TEST(ParseCount, Suffixes) {
  EXPECT_EQ(*ParseCount("7B"), 7'000'000'000ull);
  EXPECT_EQ(*ParseCount("350M"), 350'000'000ull);
  EXPECT_EQ(*ParseCount("13k"), 13'000ull);
  EXPECT_EQ(*ParseCount("1.5T"), 1'500'000'000'000ull);
  EXPECT_EQ(*ParseCount("42"), 42ull);
  EXPECT_FALSE(ParseCount("7Bi").ok());
  EXPECT_FALSE(ParseCount("seven").ok());
}

TEST(Format, BytesAndDurations) {
  EXPECT_EQ(FormatBytes(16ull << 30), "16GiB");
  EXPECT_EQ(FormatBytes(24'000'000'000ull), "24GB");
  EXPECT_EQ(FormatBytes(1500), "1.5kB");
  EXPECT_EQ(FormatBytes(12), "12B");
  EXPECT_EQ(FormatBytes(2ull << 20), "2MiB");
  EXPECT_EQ(FormatDuration(std::chrono::seconds(90)), "1m30s");
  EXPECT_EQ(FormatDuration(std::chrono::hours(12)), "12h");
  EXPECT_EQ(FormatDuration(std::chrono::milliseconds(250)), "250ms");
}

// "2.1MB free, below the reserve of 2MiB" read as a contradiction: a pair is
// written in one unit, with the decimals it takes to tell them apart.
TEST(Format, BytePairsShareOneUnit) {
  using P = std::pair<std::string, std::string>;
  EXPECT_EQ(FormatBytes(2'080'000), "2.1MB");  // alone, above "2MiB" at a glance
  EXPECT_EQ(FormatBytesPair(2'080'000, 2ull << 20), P("1.98MiB", "2.00MiB"));
  EXPECT_EQ(FormatBytesPair(2ull << 20, 2'080'000), P("2.00MiB", "1.98MiB"));
  EXPECT_EQ(FormatBytesPair(5'000'000, 1'000'000), P("5MB", "1MB"));
  EXPECT_EQ(FormatBytesPair(1ull << 30, 1ull << 30), P("1GiB", "1GiB"));
  EXPECT_EQ(FormatBytesPair(1'500'000'000, 1ull << 30), P("1.4GiB", "1.0GiB"));
  EXPECT_EQ(FormatBytesPair(0, 1'000'000), P("0MB", "1MB"));
  // One byte apart: no number of decimals tells them apart, so exact bytes.
  EXPECT_EQ(FormatBytesPair((2ull << 20) - 1, 2ull << 20), P("2097151B", "2097152B"));
  EXPECT_EQ(FormatBytesPair(12, 700), P("12B", "700B"));
}

TEST(ParseJson, HugeNumbersAreAnErrorNotACrash) {
  auto r = ParseJson(R"({"gpus": 1E99999})");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().msg_id(), "json.number_out_of_range");
  EXPECT_FALSE(ParseJson("{\"a\": [").ok());
  EXPECT_TRUE(ParseJson("{\"a\": 1}").ok());
}

}  // namespace
}  // namespace lathe

#include "lathe/run/log_format.h"

#include <gtest/gtest.h>

namespace lathe::run {
namespace {

TEST(LogFormat, TimestampIsRfc3339Nanos) {
  EXPECT_EQ(FormatTimestampNs(0), "1970-01-01T00:00:00.000000000Z");
  EXPECT_EQ(FormatTimestampNs(1'764'441'000'123'456'789), "2025-11-29T18:30:00.123456789Z");
}

TEST(LogFormat, RecordRoundTrip) {
  std::string rec = FormatLogRecord(0, "stderr", false, "hello world  with  spaces");
  ASSERT_EQ(rec.back(), '\n');
  auto r = ParseLogRecord(std::string_view(rec).substr(0, rec.size() - 1));
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->stream, "stderr");
  EXPECT_FALSE(r->partial);
  EXPECT_EQ(r->content, "hello world  with  spaces");
  auto empty = ParseLogRecord("1970-01-01T00:00:00.000000000Z stdout F ");
  ASSERT_TRUE(empty.has_value());
  EXPECT_EQ(empty->content, "");
  EXPECT_FALSE(ParseLogRecord("garbage").has_value());
  EXPECT_FALSE(ParseLogRecord("ts stdout X text").has_value());
}

TEST(LogFormat, RenderJoinsPartialsAndKeepsIncompleteTail) {
  std::string text = FormatLogRecord(0, "stdout", true, "abc") + FormatLogRecord(0, "stdout", false, "def") +
                     FormatLogRecord(0, "stdout", false, "line2") +
                     FormatLogRecord(0, "stdout", true, "pending");
  std::string rest;
  EXPECT_EQ(RenderLog(text, false, &rest), "abcdef\nline2\n");
  // The partial record waits for its end in the next call.
  std::string more = rest + FormatLogRecord(0, "stdout", false, "-done");
  EXPECT_EQ(RenderLog(more, false, &rest), "pending-done\n");
  EXPECT_EQ(rest, "");
  // A record cut in the middle (no newline yet) is kept for later.
  std::string cut = FormatLogRecord(0, "stdout", false, "x");
  EXPECT_EQ(RenderLog(cut.substr(0, 10), false, &rest), "");
  EXPECT_EQ(rest, cut.substr(0, 10));
  EXPECT_EQ(RenderLog(FormatLogRecord(0, "stdout", false, "t"), true),
            "1970-01-01T00:00:00.000000000Z t\n");
}

}  // namespace
}  // namespace lathe::run

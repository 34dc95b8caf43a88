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

TEST(LogFormat, RendererJoinsPartialsPerStreamAndKeepsIncompleteTail) {
  LogRenderer r(false);
  std::string text = FormatLogRecord(0, "stdout", true, "abc") +
                     FormatLogRecord(0, "stderr", false, "err between") +
                     FormatLogRecord(0, "stdout", false, "def") +
                     FormatLogRecord(0, "stdout", false, "line2") +
                     FormatLogRecord(0, "stdout", true, "pending");
  EXPECT_EQ(r.Feed(text), "err between\nabcdef\nline2\n");
  // The partial record waits for its end in a later Feed.
  EXPECT_EQ(r.Feed(FormatLogRecord(0, "stdout", false, "-done")), "pending-done\n");
  // A record cut in the middle (no newline yet) is kept until the rest comes.
  std::string cut = FormatLogRecord(0, "stdout", false, "x");
  EXPECT_EQ(r.Feed(cut.substr(0, 10)), "");
  EXPECT_EQ(r.Feed(cut.substr(10)), "x\n");
  EXPECT_EQ(RenderLog(FormatLogRecord(0, "stdout", false, "t"), true),
            "1970-01-01T00:00:00.000000000Z t\n");
}

TEST(LogFormat, ByteAtATimeEqualsWhole) {
  std::string text;
  for (int i = 0; i < 50; ++i) {
    text +=
        FormatLogRecord(i, i % 3 ? "stdout" : "stderr", i % 5 == 1, "piece" + std::to_string(i));
  }
  text += FormatLogRecord(99, "stdout", false, "end");
  text += FormatLogRecord(99, "stderr", false, "end");
  LogRenderer r(true);
  std::string incremental;
  for (char c : text) incremental += r.Feed(std::string_view(&c, 1));
  EXPECT_EQ(incremental, RenderLog(text, true));
}

}  // namespace
}  // namespace lathe::run

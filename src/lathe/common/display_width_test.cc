#include "lathe/common/display_width.h"

#include <gtest/gtest.h>

namespace lathe {
namespace {

TEST(DisplayWidthTest, CjkTakesTwoColumns) {
  EXPECT_EQ(DisplayWidth("abc"), 3u);
  EXPECT_EQ(DisplayWidth("模拟"), 4u);
  EXPECT_EQ(DisplayWidth("GPU 利用率"), 10u);
  EXPECT_EQ(DisplayWidth("…"), 1u);  // U+2026 is not wide
  EXPECT_EQ(DisplayWidth(""), 0u);
}

TEST(DisplayWidthTest, PadsAndFitsByColumnsNotBytes) {
  EXPECT_EQ(PadRight("用户", 6), "用户  ");
  EXPECT_EQ(PadLeft("用户", 6), "  用户");
  EXPECT_EQ(PadRight("toolong", 3), "toolong");
  EXPECT_EQ(FitWidth("abcdef", 4), "abc…");
  EXPECT_EQ(FitWidth("运行中的任务", 5), "运行…");  // never half a character
  EXPECT_EQ(DisplayWidth(FitWidth("运行中的任务", 5)), 5u);
  EXPECT_EQ(FitWidth("abc", 3), "abc");
  EXPECT_EQ(FitWidth("abc", 0), "");
}

}  // namespace
}  // namespace lathe

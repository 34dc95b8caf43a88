#include "lathe/common/log.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace lathe {
namespace {

using Lines = std::vector<std::string>;

struct Fixture {
  int64_t now = 1000;
  RepeatFilter filter{RepeatFilter::Options{60000, 3}, [this] { return now; }};
};

TEST(RepeatFilter, RepeatsWithinTheWindowAreCountedAndReportedAfterIt) {
  Fixture f;
  EXPECT_EQ(f.filter.Admit("disk full"), Lines{"disk full"});
  for (int i = 0; i < 599; ++i) {  // every 100 ms for a minute
    f.now += 100;
    EXPECT_TRUE(f.filter.Admit("disk full").empty()) << i;
  }
  f.now += 100;  // 60 s after the first
  EXPECT_EQ(f.filter.Admit("disk full"),
            Lines{"disk full (599 repeats suppressed in the last 60s)"});
  f.now += 100;
  EXPECT_TRUE(f.filter.Admit("disk full").empty());  // a new window began
}

TEST(RepeatFilter, DifferentMessagesAreCountedApart) {
  Fixture f;
  EXPECT_EQ(f.filter.Admit("run a: disk full"), Lines{"run a: disk full"});
  EXPECT_EQ(f.filter.Admit("run b: disk full"), Lines{"run b: disk full"});
  EXPECT_TRUE(f.filter.Admit("run a: disk full").empty());
  EXPECT_TRUE(f.filter.Admit("run b: disk full").empty());
}

TEST(RepeatFilter, AMessageThatStoppedIsReportedWithTheNextLine) {
  Fixture f;
  f.filter.Admit("disk full");
  f.filter.Admit("disk full");
  f.filter.Admit("disk full");
  f.now += 60000;
  EXPECT_EQ(f.filter.Admit("space freed"),
            (Lines{"disk full (2 repeats suppressed in the last 60s)", "space freed"}));
  f.now += 60000;
  EXPECT_EQ(f.filter.Admit("other"), Lines{"other"});  // nothing was suppressed: no report
}

TEST(RepeatFilter, ASingleMessageAfterTheWindowIsLoggedPlain) {
  Fixture f;
  f.filter.Admit("x");
  f.now += 60000;
  EXPECT_EQ(f.filter.Admit("x"), Lines{"x"});
}

TEST(RepeatFilter, TooManyMessagesForgetTheOldestReportingItsRepeats) {
  Fixture f;  // remembers 3
  f.filter.Admit("m1");
  f.filter.Admit("m1");
  f.now += 1;
  f.filter.Admit("m2");
  f.now += 1;
  f.filter.Admit("m3");
  EXPECT_EQ(f.filter.Admit("m4"), (Lines{"m1 (1 repeats suppressed in the last 60s)", "m4"}));
  EXPECT_EQ(f.filter.Admit("m1"), Lines{"m1"});  // forgotten, so logged again
}

}  // namespace
}  // namespace lathe

#include "lathe/daemon/disk_shares.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdlib>
#include <string>

#include "lathe/os/files.h"
#include "lathe/os/test_util/fake_clock.h"

namespace lathe::daemon {
namespace {

class DiskSharesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string t = ::testing::TempDir() + "lathe-shares-XXXXXX";
    runs_ = ::mkdtemp(t.data());
  }
  void TearDown() override { (void)os::RemoveAll(runs_); }

  void RunWithLog(const std::string& id, size_t bytes) {
    ASSERT_EQ(::mkdir((runs_ + "/" + id).c_str(), 0700), 0);
    ASSERT_TRUE(os::WriteFileAtomic(runs_ + "/" + id + "/log", std::string(bytes, 'x')).ok());
  }

  std::string runs_;
  os::FakeClock clock_;
};

TEST_F(DiskSharesTest, EachOwnerGetsTheBytesOfTheirRunDirectories) {
  RunWithLog("a1", 1 << 20);
  RunWithLog("a2", 1 << 20);
  RunWithLog("b1", 256 << 10);
  std::vector<std::pair<std::string, uid_t>> owners{
      {"a1", 1001}, {"a2", 1001}, {"b1", 1002}, {"gone", 1003}};
  DiskShares shares(
      runs_, [&] { return owners; }, clock_);
  EXPECT_EQ(shares.Get().at_ms, 0);  // nothing counted yet
  shares.CountNow();
  DiskShare s = shares.Get();
  EXPECT_EQ(s.at_ms, clock_.NowMs());
  EXPECT_GE(s.bytes[1001], 2u << 20);
  EXPECT_LT(s.bytes[1001], 3u << 20);
  EXPECT_GE(s.bytes[1002], 256u << 10);
  EXPECT_LT(s.bytes[1002], 1u << 20);
  EXPECT_EQ(s.bytes.count(1003), 0u);  // a run without a directory takes nothing
}

TEST_F(DiskSharesTest, ARemovedRunNoLongerCounts) {
  RunWithLog("a1", 1 << 20);
  std::vector<std::pair<std::string, uid_t>> owners{{"a1", 1001}};
  DiskShares shares(
      runs_, [&] { return owners; }, clock_);
  shares.CountNow();
  EXPECT_GT(shares.Get().bytes[1001], 0u);
  owners.clear();
  ASSERT_TRUE(os::RemoveAll(runs_ + "/a1").ok());
  shares.CountNow();
  EXPECT_TRUE(shares.Get().bytes.empty());
}

TEST_F(DiskSharesTest, AFailedListingKeepsTheLastFigures) {
  RunWithLog("a1", 1 << 20);
  bool fail = false;
  DiskShares shares(
      runs_,
      [&]() -> Result<std::vector<std::pair<std::string, uid_t>>> {
        if (fail) return Status(Code::kIoError, "database is locked");
        return std::vector<std::pair<std::string, uid_t>>{{"a1", 1001}};
      },
      clock_);
  shares.CountNow();
  const uint64_t before = shares.Get().bytes[1001];
  fail = true;
  shares.CountNow();
  EXPECT_EQ(shares.Get().bytes[1001], before);
}

TEST_F(DiskSharesTest, TheThreadCountsAtStartAndStops) {
  RunWithLog("a1", 64 << 10);
  DiskShares shares(
      runs_,
      [] {
        return std::vector<std::pair<std::string, uid_t>>{{"a1", 7}};
      },
      os::RealClock());
  shares.Start();
  for (int i = 0; i < 500 && shares.Get().at_ms == 0; ++i) os::RealClock().SleepMs(10);
  EXPECT_GT(shares.Get().bytes[7], 0u);
  shares.Stop();
  shares.Stop();  // idempotent
}

}  // namespace
}  // namespace lathe::daemon

#include "lathe/snap/prune.h"

#include <gtest/gtest.h>

namespace lathe::snap {
namespace {

constexpr int64_t kHour = 3'600'000;

std::vector<SnapshotInfo> Hourly(int n, const std::string& run, bool complete = true) {
  std::vector<SnapshotInfo> out;
  for (int i = 0; i < n; ++i) {
    SnapshotInfo s;
    s.id = run + std::to_string(i);
    s.time_ms = i * kHour;
    s.source = "/ckpt";
    s.tags = {{"run", run}};
    s.complete = complete;
    out.push_back(s);
  }
  return out;
}

TEST(PruneTest, KeepLastPerRun) {
  auto snaps = Hourly(10, "a");
  auto b = Hourly(3, "b");
  snaps.insert(snaps.end(), b.begin(), b.end());
  auto keep = SelectKept(snaps, {2, 0, false, ""});
  EXPECT_EQ(keep, (std::set<SnapshotId>{"a9", "a8", "b2", "b1"}));
}

TEST(PruneTest, KeepEveryPeriod) {
  auto keep = SelectKept(Hourly(24, "a"), {1, 6 * kHour, false, ""});
  // The newest of each 6-hour period: 5, 11, 17, 23.
  EXPECT_EQ(keep, (std::set<SnapshotId>{"a5", "a11", "a17", "a23"}));
}

TEST(PruneTest, NewestCompleteIsAlwaysKept) {
  auto snaps = Hourly(5, "a");
  snaps[3].complete = snaps[4].complete = false;  // the two newest are incomplete
  auto keep = SelectKept(snaps, {1, 0, false, ""});
  EXPECT_EQ(keep, (std::set<SnapshotId>{"a4", "a2"}));
}

}  // namespace
}  // namespace lathe::snap

#include "lathe/sched/pool.h"

#include <gtest/gtest.h>

namespace lathe::sched {
namespace {

TEST(PickGpus, LowestIndicesFromOneRun) {
  EXPECT_EQ(PickGpus({0, 1, 2, 3}, 1), std::vector<int>{0});
  EXPECT_EQ(PickGpus({0, 1, 2, 3}, 2), (std::vector<int>{0, 1}));
  EXPECT_EQ(PickGpus({0, 1, 2, 3}, 4), (std::vector<int>{0, 1, 2, 3}));
}

TEST(PickGpus, BestFittingContiguousRun) {
  std::set<int> free = {0, 2, 3, 5, 6, 7};
  EXPECT_EQ(PickGpus(free, 1), std::vector<int>{0});
  EXPECT_EQ(PickGpus(free, 2), (std::vector<int>{2, 3}));
  EXPECT_EQ(PickGpus(free, 3), (std::vector<int>{5, 6, 7}));
}

TEST(PickGpus, TiesGoToTheLowestRun) {
  EXPECT_EQ(PickGpus({4, 5, 0, 1}, 2), (std::vector<int>{0, 1}));
}

TEST(PickGpus, FallsBackToLowestIndicesWhenNoRunIsLongEnough) {
  EXPECT_EQ(PickGpus({0, 2, 4, 6}, 3), (std::vector<int>{0, 2, 4}));
  EXPECT_EQ(PickGpus({1, 2, 5, 6}, 3), (std::vector<int>{1, 2, 5}));
}

TEST(PickGpus, ZeroOrNegativeCount) {
  EXPECT_TRUE(PickGpus({0, 1}, 0).empty());
  EXPECT_TRUE(PickGpus({0, 1}, -1).empty());
  EXPECT_TRUE(PickGpus({}, 0).empty());
}

TEST(Amount, CoversWithCpuTolerance) {
  EXPECT_TRUE(Covers({1, 0.1 + 0.2, 5}, {1, 0.3, 5}));
  EXPECT_FALSE(Covers({1, 0.3, 5}, {2, 0.3, 5}));
  EXPECT_FALSE(Covers({1, 0.3, 4}, {1, 0.3, 5}));
  EXPECT_FALSE(Covers({1, 0.29, 5}, {1, 0.3, 5}));
}

TEST(Amount, NothingRequestedIsCoveredEvenWhenOvercommitted) {
  EXPECT_TRUE(Covers({-1, -2.5, -7}, {0, 0, 0}));
  EXPECT_FALSE(Covers({-1, -2.5, -7}, {0, 0.5, 0}));
  Amount s = Shortfall({0, 1, 0}, {-1, -2, -7});
  EXPECT_EQ(s.gpus, 0);
  EXPECT_DOUBLE_EQ(s.cpus, 3);
  EXPECT_EQ(s.memory_bytes, 0);
}

TEST(Amount, HelpsOnlyWhereNeeded) {
  EXPECT_TRUE(Helps({1, 0, 0}, {1, 0, 0}));
  EXPECT_FALSE(Helps({0, 8, 0}, {1, 0, 0}));
  EXPECT_FALSE(Helps({1, 0, 0}, {0, 4, 0}));
  EXPECT_TRUE(Helps({0, 0, 1}, {0, 0, 100}));
}

TEST(Amount, MemorySaturatesInsteadOfOverflowing) {
  Amount a = ToAmount({0, 0, ~uint64_t{0}});
  Amount sum = a + a + a + a;
  EXPECT_GT(sum.memory_bytes, 0);
  EXPECT_EQ(ToResources({-1, -1, -1}).gpus, 0);
  EXPECT_EQ(ToResources({-1, -1, -1}).memory_bytes, 0u);
}

TEST(Amount, Describe) {
  EXPECT_EQ(Describe({2, 1.5, int64_t{16} << 30}), "2 GPUs, 1.5 cpus, 16GiB memory");
  EXPECT_EQ(Describe({1, 0, 0}), "1 GPU");
  EXPECT_EQ(Describe({}), "nothing");
  EXPECT_EQ(DescribeShortfall({2, 4, 0}, {1, 8, 0}), "needs 2 GPUs, 1 free");
  EXPECT_EQ(DescribeShortfall({0, 4, 0}, {1, -2, 0}), "needs 4 cpus, 0 free");
  EXPECT_EQ(DescribeShortfall({1, 1, 1}, {1, 1, 1}), "");
}

TEST(FreePool, TakeRemovesExactlyWhatItGives) {
  FreePool p{{0, 1, 2, 3}, 8, 100};
  ASSERT_TRUE(p.Fits({2, 3, 50}));
  EXPECT_EQ(p.Take({2, 3, 50}), (std::vector<int>{0, 1}));
  EXPECT_EQ(p.gpus, (std::set<int>{2, 3}));
  EXPECT_DOUBLE_EQ(p.cpus, 5);
  EXPECT_EQ(p.memory_bytes, 50);
  EXPECT_FALSE(p.Fits({3, 0, 0}));
  EXPECT_FALSE(p.Fits({0, 6, 0}));
  EXPECT_FALSE(p.Fits({0, 0, 51}));
}

}  // namespace
}  // namespace lathe::sched

#include "lathe/sched/preempt.h"

#include <gtest/gtest.h>

namespace lathe::sched {
namespace {

Holder H(std::string id, int priority, int64_t started_ms, Amount held, bool preemptible = true) {
  return Holder{std::move(id), priority, started_ms, preemptible, held, std::nullopt};
}

std::vector<std::string> Ids(const std::vector<Holder>& hs, const std::vector<size_t>& idx) {
  std::vector<std::string> out;
  for (size_t i : idx) out.push_back(hs[i].id);
  return out;
}

TEST(ChooseVictims, LowestPriorityThenYoungest) {
  std::vector<Holder> hs = {H("n-young", 1, 900, {1, 0, 0}), H("l-old", 0, 100, {1, 0, 0}),
                            H("l-young", 0, 500, {1, 0, 0})};
  EXPECT_EQ(Ids(hs, ChooseVictims(hs, 2, {1, 0, 0})), std::vector<std::string>{"l-young"});
  EXPECT_EQ(Ids(hs, ChooseVictims(hs, 2, {2, 0, 0})),
            (std::vector<std::string>{"l-young", "l-old"}));
  EXPECT_EQ(Ids(hs, ChooseVictims(hs, 2, {3, 0, 0})),
            (std::vector<std::string>{"l-young", "l-old", "n-young"}));
}

TEST(ChooseVictims, EmptyWhenEvenAllCannotCover) {
  std::vector<Holder> hs = {H("a", 0, 1, {1, 0, 0}), H("b", 0, 2, {1, 0, 0})};
  EXPECT_TRUE(ChooseVictims(hs, 1, {3, 0, 0}).empty());
  EXPECT_TRUE(ChooseVictims(hs, 1, {0, 1, 0}).empty());  // nobody holds cpus
}

TEST(ChooseVictims, OnlyStrictlyLowerAndPreemptible) {
  std::vector<Holder> hs = {H("same", 1, 9, {1, 0, 0}), H("pinned", 0, 9, {1, 0, 0}, false),
                            H("higher", 2, 9, {1, 0, 0})};
  EXPECT_TRUE(ChooseVictims(hs, 1, {1, 0, 0}).empty());
}

TEST(ChooseVictims, PrunesToAMinimalSet) {
  // Greedy: small (1 GPU, youngest), then big (2 GPUs, 8 cpus). small is then redundant.
  std::vector<Holder> hs = {H("small", 0, 900, {1, 0, 0}), H("big", 0, 100, {2, 8, 0})};
  EXPECT_EQ(Ids(hs, ChooseVictims(hs, 1, {2, 4, 0})), std::vector<std::string>{"big"});
}

TEST(ChooseVictims, MultiDimensionalDeficit) {
  std::vector<Holder> hs = {H("gpu", 0, 900, {1, 0, 0}), H("cpu", 0, 800, {0, 8, 0}),
                            H("mem", 0, 700, {0, 0, 64}), H("spare", 0, 600, {1, 8, 64})};
  // Greedy + prune gives an irredundant set, not the smallest one: the three
  // young specialists are taken before the older "spare" that alone would do.
  EXPECT_EQ(Ids(hs, ChooseVictims(hs, 1, {1, 4, 32})),
            (std::vector<std::string>{"gpu", "cpu", "mem"}));
  // Needing 2 GPUs: gpu + spare; cpu and mem were taken by greedy, then pruned.
  EXPECT_EQ(Ids(hs, ChooseVictims(hs, 1, {2, 4, 32})), (std::vector<std::string>{"gpu", "spare"}));
}

TEST(ChooseVictims, SkipsHoldersThatDoNotHelp) {
  std::vector<Holder> hs = {H("cpu-only", 0, 900, {0, 8, 0}), H("gpu", 0, 100, {1, 0, 0})};
  EXPECT_EQ(Ids(hs, ChooseVictims(hs, 1, {1, 0, 0})), std::vector<std::string>{"gpu"});
}

TEST(ChooseVictims, DeterministicOnTies) {
  std::vector<Holder> hs = {H("b", 0, 5, {1, 0, 0}), H("a", 0, 5, {1, 0, 0})};
  EXPECT_EQ(Ids(hs, ChooseVictims(hs, 1, {1, 0, 0})), std::vector<std::string>{"a"});
}

}  // namespace
}  // namespace lathe::sched

// GPU types: a typed request is placed only on GPUs whose names match.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "lathe/sched/pool.h"
#include "lathe/sched/scheduler.h"
#include "lathe/sched/test_util/builders.h"

namespace lathe::sched {
namespace {

using namespace lathe::sched::testing;  // NOLINT
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr int64_t kNow = 1'000'000;

// Two L4s at 0-1, two A100s at 2-3: a typed job must skip the lower indices.
NodeState Mixed() {
  NodeState n = Node(4);
  n.gpu_names = {"NVIDIA L4", "NVIDIA L4", "NVIDIA A100-SXM4-80GB", "NVIDIA A100-SXM4-80GB"};
  return n;
}

QueuedJob Typed(std::string id, int64_t seq, int gpus, std::string type) {
  QueuedJob j = Q(std::move(id), seq, gpus);
  j.req.gpu_type = std::move(type);
  return j;
}

TEST(GpuType, MatchesACaseInsensitiveSubstringOfTheName) {
  EXPECT_TRUE(GpuTypeMatches("NVIDIA A100-SXM4-80GB", "A100"));
  EXPECT_TRUE(GpuTypeMatches("NVIDIA A100-SXM4-80GB", "a100-sxm4"));
  EXPECT_TRUE(GpuTypeMatches("NVIDIA L4", "l4"));
  EXPECT_TRUE(GpuTypeMatches("NVIDIA L4", ""));
  EXPECT_FALSE(GpuTypeMatches("NVIDIA L4", "A100"));
  EXPECT_FALSE(GpuTypeMatches("", "A100"));
}

TEST(GpuType, MatchingGpusSkipsUnavailableAndUnnamedOnes) {
  NodeState n = Mixed();
  EXPECT_THAT(MatchingGpus(n, "a100"), ElementsAre(2, 3));
  n.unavailable_gpus = {3};
  EXPECT_THAT(MatchingGpus(n, "A100"), ElementsAre(2));
  n.gpu_names.resize(1);  // names of the others unknown
  EXPECT_THAT(MatchingGpus(n, "A100"), IsEmpty());
  EXPECT_THAT(MatchingGpus(n, "L4"), ElementsAre(0));
}

TEST(GpuType, ATypedJobLandsOnlyOnMatchingGpus) {
  Decision d = Schedule(Mixed(), {Typed("a", 1, 1, "A100"), Typed("l", 2, 2, "l4")}, {}, kNow);
  EXPECT_EQ(*GpusOf(d, "a"), std::vector<int>{2});
  EXPECT_EQ(*GpusOf(d, "l"), (std::vector<int>{0, 1}));
}

TEST(GpuType, AnUntypedJobTakesAnyGpu) {
  Decision d = Schedule(Mixed(), {Q("any", 1, 3)}, {}, kNow);
  EXPECT_EQ(*GpusOf(d, "any"), (std::vector<int>{0, 1, 2}));
}

TEST(GpuType, ATypedJobWaitsForItsOwnGpusWithoutHoldingOthersBack) {
  // The A100s are busy; two L4s are free. The A100 job waits (resources, not
  // the reservation) and the untyped job behind it still starts.
  Decision d =
      Schedule(Mixed(), {Typed("a", 1, 1, "A100"), Q("any", 2, 1)}, {R("r", {2, 3})}, kNow);
  EXPECT_EQ(WaitOf(d, "a"), WaitReason::kResources);
  EXPECT_THAT(WhyWaiting(d, "a"), HasSubstr("needs 1 A100 GPU, 0 free"));
  EXPECT_THAT(Started(d), ElementsAre("any"));
  EXPECT_THAT(d.preempt, IsEmpty());
}

TEST(GpuType, MoreMatchingGpusThanTheNodeHasIsImpossible) {
  Decision d = Schedule(Mixed(), {Typed("a", 1, 3, "A100"), Typed("h", 2, 1, "H100")}, {}, kNow);
  EXPECT_THAT(ImpossibleIds(d), ElementsAre("a", "h"));
  EXPECT_THAT(WhyWaiting(d, "a"), HasSubstr("gpu_type: requested 3 A100 GPUs, this machine has 2"));
  EXPECT_THAT(WhyWaiting(d, "h"), HasSubstr("this machine has 0"));
  EXPECT_TRUE(Validate(Mixed(), Resources{2, 0, 0, "a100"}).ok());
  EXPECT_FALSE(Validate(Mixed(), Resources{1, 0, 0, "V100"}).ok());
  EXPECT_TRUE(Validate(Mixed(), Resources{0, 0, 0, "V100"}).ok());  // no GPU asked for
}

TEST(GpuType, FreePoolTakesTheBestFittingMatchingGpus) {
  FreePool p;
  p.gpus = {0, 1, 2, 3};
  p.cpus = 8;
  p.memory_bytes = 1 << 30;
  p.gpu_names = {"A100", "L4", "A100", "A100"};
  Resources two{2, 0, 0, "a100"};
  EXPECT_TRUE(p.Fits(two));
  EXPECT_EQ(p.Take(two), (std::vector<int>{2, 3}));
  EXPECT_FALSE(p.Fits(two));  // one A100 left
  EXPECT_TRUE(p.Fits(Resources{1, 0, 0, "L4"}));
}

}  // namespace
}  // namespace lathe::sched

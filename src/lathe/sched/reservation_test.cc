#include "lathe/sched/reservation.h"

#include <gtest/gtest.h>

#include <limits>

namespace lathe::sched {
namespace {

constexpr int64_t kNow = 1000;

Holder H(std::string id, Amount held, std::optional<int64_t> end) {
  return Holder{std::move(id), 1, 0, true, held, end};
}

TEST(ComputeShadow, EarliestEndThatCovers) {
  std::vector<Holder> hs = {H("c", {1, 0, 0}, 3000), H("a", {1, 0, 0}, 2000),
                            H("b", {1, 0, 0}, 2500), H("forever", {1, 0, 0}, std::nullopt)};
  Shadow s = ComputeShadow({3, 0, 0}, {1, 0, 0}, hs, kNow);
  EXPECT_EQ(s.shadow_ms, 2500);
  EXPECT_EQ(s.extra.gpus, 0);
  EXPECT_EQ(s.waiting_on, (std::vector<std::string>{"a", "b"}));
}

TEST(ComputeShadow, HoldersEndingAtTheSameInstantAllCountForExtra) {
  std::vector<Holder> hs = {H("a", {1, 0, 0}, 2000), H("b", {1, 0, 0}, 2000),
                            H("c", {1, 0, 0}, 2000)};
  Shadow s = ComputeShadow({2, 0, 0}, {0, 0, 0}, hs, kNow);
  EXPECT_EQ(s.shadow_ms, 2000);
  EXPECT_EQ(s.extra.gpus, 1);
}

TEST(ComputeShadow, PastEndsCountAsNow) {
  Shadow s = ComputeShadow({1, 0, 0}, {0, 0, 0}, {H("late", {1, 0, 0}, 10)}, kNow);
  EXPECT_EQ(s.shadow_ms, kNow);
}

TEST(ComputeShadow, UnknownWhenEndsNeverCover) {
  std::vector<Holder> hs = {H("a", {1, 4, 0}, 2000), H("forever", {2, 0, 0}, std::nullopt),
                            H("cpu", {0, 8, 0}, std::nullopt)};
  Shadow s = ComputeShadow({3, 2, 0}, {1, 10, 5}, hs, kNow);
  EXPECT_FALSE(s.shadow_ms);
  // First claim on everything free: no GPU left over, 8 of the 10 cpus, all memory.
  EXPECT_EQ(s.extra.gpus, 0);
  EXPECT_DOUBLE_EQ(s.extra.cpus, 8);
  EXPECT_EQ(s.extra.memory_bytes, 5);
  EXPECT_EQ(s.waiting_on, std::vector<std::string>{"forever"});
}

TEST(CheckBackfill, Rules) {
  Shadow known{5000, {1, 0, 0}, {}};
  QueuedJob j;
  j.req.gpus = 1;
  j.max_duration_ms = 4000;
  EXPECT_EQ(CheckBackfill(j, known, kNow), BackfillVerdict::kEndsBeforeShadow);
  j.max_duration_ms = 4001;
  EXPECT_EQ(CheckBackfill(j, known, kNow), BackfillVerdict::kUsesExtra);
  j.req.gpus = 2;
  EXPECT_EQ(CheckBackfill(j, known, kNow), BackfillVerdict::kWouldDelay);
  Shadow unknown{std::nullopt, {0, 0, 0}, {}};
  j.req.gpus = 1;
  j.max_duration_ms = 1;
  EXPECT_EQ(CheckBackfill(j, unknown, kNow), BackfillVerdict::kWouldDelay);
  j.req.gpus = 0;
  EXPECT_EQ(CheckBackfill(j, unknown, kNow), BackfillVerdict::kUsesExtra);
}

TEST(EndTime, UnknownNonPositiveAndSaturating) {
  EXPECT_EQ(EndTime(kNow, 5), kNow + 5);
  EXPECT_FALSE(EndTime(kNow, std::nullopt));
  EXPECT_FALSE(EndTime(kNow, 0));
  EXPECT_FALSE(EndTime(kNow, -3));
  EXPECT_EQ(EndTime(kNow, std::numeric_limits<int64_t>::max()),
            std::numeric_limits<int64_t>::max());
}

}  // namespace
}  // namespace lathe::sched

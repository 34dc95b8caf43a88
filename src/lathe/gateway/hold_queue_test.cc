#include "lathe/gateway/hold_queue.h"

#include <gtest/gtest.h>

#include <memory>

namespace lathe::gateway {
namespace {

TEST(HoldQueue, BoundedInNumberAndInTime) {
  HoldQueue<std::unique_ptr<int>> q;  // move-only items, as the front's are
  EXPECT_FALSE(q.Full(2));
  q.Hold(std::make_unique<int>(1), 1000);
  q.Hold(std::make_unique<int>(2), 1500);
  EXPECT_TRUE(q.Full(2));
  EXPECT_TRUE(q.Full(0));
  EXPECT_TRUE(q.TakeExpired(999).empty());
  auto expired = q.TakeExpired(1000);  // due at its deadline
  ASSERT_EQ(expired.size(), 1u);
  EXPECT_EQ(*expired[0], 1);
  EXPECT_FALSE(q.Full(2));
  q.Hold(std::make_unique<int>(3), 1200);  // a shorter hold_ms later: expires first
  expired = q.TakeExpired(1300);
  ASSERT_EQ(expired.size(), 1u);
  EXPECT_EQ(*expired[0], 3);
  q.Hold(std::make_unique<int>(4), 9000);
  auto all = q.TakeAll();
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(*all[0], 2);  // oldest first
  EXPECT_EQ(*all[1], 4);
  EXPECT_EQ(q.size(), 0u);
}

}  // namespace
}  // namespace lathe::gateway

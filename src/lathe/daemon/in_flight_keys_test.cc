#include "lathe/daemon/in_flight_keys.h"

#include <gtest/gtest.h>

namespace lathe::daemon {
namespace {

TEST(InFlightKeys, ASecondRequestWithTheKeyWaitsForTheFirstToAnswer) {
  InFlightKeys keys;
  {
    auto first = keys.TryAcquire(1000, "k");
    ASSERT_TRUE(first.has_value());
    EXPECT_FALSE(keys.TryAcquire(1000, "k").has_value());  // still in flight: 409
    // Another user's key of the same name, and another key, are independent.
    auto other_user = keys.TryAcquire(1001, "k");
    EXPECT_TRUE(other_user.has_value());
    EXPECT_TRUE(keys.TryAcquire(1000, "k2").has_value());
    auto moved = std::move(*first);  // a moved-from lease releases nothing
    first.reset();
    EXPECT_FALSE(keys.TryAcquire(1000, "k").has_value());
  }
  EXPECT_TRUE(keys.TryAcquire(1000, "k").has_value());  // answered: free again
}

}  // namespace
}  // namespace lathe::daemon

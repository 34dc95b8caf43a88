#include "lathe/common/spin_lock.h"

#include <gtest/gtest.h>

#include <mutex>
#include <thread>
#include <vector>

namespace lathe {
namespace {

TEST(SpinLock, TryLockFailsWhileTakenAndSucceedsAfter) {
  SpinLock l;
  ASSERT_TRUE(l.try_lock());
  EXPECT_FALSE(l.try_lock());
  l.unlock();
  EXPECT_TRUE(l.try_lock());
  l.unlock();
}

// Four threads increment a plain counter under the lock: a lock that let
// two in at once would lose increments.
TEST(SpinLock, ExcludesOtherThreads) {
  SpinLock l;
  int64_t counter = 0;
  constexpr int kThreads = 4, kEach = 200000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kEach; ++i) {
        std::lock_guard lock(l);
        counter = counter + 1;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(counter, int64_t{kThreads} * kEach);
}

}  // namespace
}  // namespace lathe

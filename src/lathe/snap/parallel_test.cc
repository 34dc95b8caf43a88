#include "lathe/snap/parallel.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

namespace lathe::snap {
namespace {

// A progress reporter reads a counter in tick(); its last reading must be the
// whole, even when the last item ends just as a tick is being taken.
TEST(ParallelFor, TheLastTickSeesEveryItemDone) {
  for (int round = 0; round < 20; ++round) {
    std::atomic<int> done{0};
    int last_seen = -1;
    Status st = ParallelFor(
        8, 3,
        [&](size_t i) {
          std::this_thread::sleep_for(std::chrono::milliseconds(i % 3 == 0 ? 30 : 1));
          done++;
          return Status::OK();
        },
        [&] { last_seen = done.load(); });
    ASSERT_TRUE(st.ok());
    EXPECT_EQ(last_seen, 8) << "round " << round;
  }
}

TEST(ParallelFor, TheFirstFailureIsReturnedAndStopsNewItems) {
  std::atomic<int> started{0};
  Status st = ParallelFor(100, 1, [&](size_t i) {
    started++;
    return i == 3 ? Status::IoError("item 3") : Status::OK();
  });
  EXPECT_EQ(st.message(), "item 3");
  EXPECT_EQ(started.load(), 4);
}

}  // namespace
}  // namespace lathe::snap

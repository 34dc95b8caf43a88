#include "lathe/common/mutex.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

namespace lathe {
namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

TEST(CondVar, WaitForTimesOutWithoutASignalAndHoldsTheMutexAgain) {
  Mutex mu;
  CondVar cv;
  MutexLock l(&mu);
  const auto start = steady_clock::now();
  bool woken = true;
  // A spurious wakeup returns true: waited again until the time is up.
  while (woken && steady_clock::now() - start < milliseconds(30)) {
    woken = cv.WaitFor(&mu, milliseconds(30));
  }
  EXPECT_FALSE(woken);
  EXPECT_GE(steady_clock::now() - start, milliseconds(30));
  // Held again: another thread gets it only once this scope lets it go.
  std::atomic<bool> taken{false};
  std::thread other([&] {
    MutexLock l2(&mu);
    taken = true;
  });
  std::this_thread::sleep_for(milliseconds(50));
  EXPECT_FALSE(taken);
  l.Unlock();
  other.join();
  EXPECT_TRUE(taken);
}

TEST(CondVar, WaitUntilAPassedDeadlineTimesOut) {
  Mutex mu;
  CondVar cv;
  MutexLock l(&mu);
  EXPECT_FALSE(cv.WaitUntil(&mu, steady_clock::now() - milliseconds(1)));
}

TEST(CondVar, SignalWakesAWaiter) {
  Mutex mu;
  CondVar cv;
  bool ready = false;
  bool woken = false;
  std::thread waiter([&] {
    MutexLock l(&mu);
    const auto deadline = steady_clock::now() + std::chrono::seconds(30);
    while (!ready) {
      if (!cv.WaitUntil(&mu, deadline)) return;  // timed out: woken stays false
    }
    woken = true;
  });
  std::this_thread::sleep_for(milliseconds(20));
  {
    MutexLock l(&mu);
    ready = true;
  }
  cv.Signal();
  waiter.join();
  EXPECT_TRUE(woken);
}

TEST(CondVar, SignalAllWakesEveryWaiter) {
  Mutex mu;
  CondVar cv;
  bool go = false;
  int woken = 0;
  std::vector<std::thread> waiters;
  for (int i = 0; i < 3; ++i) {
    waiters.emplace_back([&] {
      MutexLock l(&mu);
      while (!go) cv.Wait(&mu);
      ++woken;
    });
  }
  {
    MutexLock l(&mu);
    go = true;
  }
  cv.SignalAll();
  for (auto& t : waiters) t.join();
  EXPECT_EQ(woken, 3);
}

// Unlock lets another thread in within the scope; Lock keeps it out again
// until the scope ends; the destructor after an Unlock leaves the mutex free.
TEST(MutexLock, UnlockAndLockWithinTheScope) {
  Mutex mu;
  std::atomic<int> entered{0};
  auto enter = [&] {
    MutexLock l(&mu);
    ++entered;
  };
  {
    MutexLock l(&mu);
    l.Unlock();
    std::thread t(enter);
    t.join();  // would wait forever if Unlock had kept the mutex
    EXPECT_EQ(entered, 1);
    l.Lock();
    std::thread t2(enter);
    std::this_thread::sleep_for(milliseconds(50));
    EXPECT_EQ(entered, 1);
    l.Unlock();
    t2.join();
    EXPECT_EQ(entered, 2);
  }
  std::thread t3(enter);
  t3.join();
  EXPECT_EQ(entered, 3);
}

}  // namespace
}  // namespace lathe

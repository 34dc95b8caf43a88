// SpinLock: a lock for critical sections of a few hundred nanoseconds that
// the threads of a data path share (the deployments' front: a deployment's
// balancer and counters, its metrics handles).
//
// Why not std::mutex: a thread that finds a std::mutex taken sleeps on a
// futex at once, and on a busy machine the scheduler gives its core back
// only milliseconds later — for a section that was free again a few hundred
// nanoseconds after it looked. On the front that was the p99 of every
// deployment (docs/benchmarks.md). A SpinLock waits on the core it has,
// and yields the core after kSpins tries, in case the holder was preempted.
//
// Meets Lockable (std::lock_guard, std::unique_lock); not for condition
// variables and not for sections that do I/O or wait.
#pragma once

#include <atomic>
#include <thread>

namespace lathe {

class SpinLock {
 public:
  void lock() noexcept {
    for (int tries = 0;; ++tries) {
      if (!taken_.exchange(true, std::memory_order_acquire)) return;
      // Read-only while it is taken, so that waiting does not bounce the
      // cache line between cores.
      while (taken_.load(std::memory_order_relaxed)) {
        if (++tries > kSpins) {
          std::this_thread::yield();
        } else {
          Pause();
        }
      }
    }
  }
  bool try_lock() noexcept {
    return !taken_.load(std::memory_order_relaxed) &&
           !taken_.exchange(true, std::memory_order_acquire);
  }
  void unlock() noexcept { taken_.store(false, std::memory_order_release); }

 private:
  static constexpr int kSpins = 1000;
  static void Pause() noexcept {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
  }
  std::atomic<bool> taken_{false};
};

}  // namespace lathe

// A mutex, its scoped lock and a condition variable that clang's thread-safety
// analysis can follow (thread_annotations.h). libstdc++'s std::mutex and
// std::lock_guard carry no capability attributes, so with them clang cannot
// tell whether a GUARDED_BY member is read with its lock held; these thin
// wrappers over the standard types can, and cost nothing more at run time.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>

#include "lathe/common/thread_annotations.h"

namespace lathe {

class CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() ACQUIRE() { mu_.lock(); }
  void Unlock() RELEASE() { mu_.unlock(); }
  // Tells the analysis the caller holds it, where the lock was taken out of
  // its sight. Checks nothing at run time.
  void AssertHeld() const ASSERT_CAPABILITY(this) {}

 private:
  friend class CondVar;
  std::mutex mu_;
};

// Holds `mu` for its scope. Unlock() and Lock() drop and retake it within the
// scope (to call out without it); the destructor unlocks only if it holds it.
class SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex* mu) ACQUIRE(mu) : mu_(mu) { mu_->Lock(); }
  ~MutexLock() RELEASE() {
    if (locked_) mu_->Unlock();
  }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

  void Unlock() RELEASE() {
    mu_->Unlock();
    locked_ = false;
  }
  void Lock() ACQUIRE() {
    mu_->Lock();
    locked_ = true;
  }

 private:
  Mutex* const mu_;
  bool locked_ = true;
};

// A condition variable whose waits name the Mutex they release, so that the
// analysis checks it is held (abseil's CondVar does the same; one bound to its
// mutex at construction, as LevelDB's port::CondVar, would leave the waits
// unchecked: clang cannot tell that the bound mutex is the caller's). As with
// std::condition_variable, every wait on one CondVar uses the same Mutex.
// Signal and SignalAll may be called with or without it.
class CondVar {
 public:
  CondVar() = default;
  CondVar(const CondVar&) = delete;
  CondVar& operator=(const CondVar&) = delete;

  // Each wait releases `mu` while it waits and holds it again on return.
  // Wakeups may be spurious: callers wait in a loop on their condition.
  void Wait(Mutex* mu) REQUIRES(mu) {
    std::unique_lock<std::mutex> lock(mu->mu_, std::adopt_lock);
    cv_.wait(lock);
    lock.release();  // still held: the caller's
  }
  // True when woken (or spuriously) before `timeout` has passed; false when
  // it timed out.
  template <class Rep, class Period>
  bool WaitFor(Mutex* mu, const std::chrono::duration<Rep, Period>& timeout) REQUIRES(mu) {
    std::unique_lock<std::mutex> lock(mu->mu_, std::adopt_lock);
    const std::cv_status s = cv_.wait_for(lock, timeout);
    lock.release();
    return s == std::cv_status::no_timeout;
  }
  // True when woken (or spuriously) before `deadline`; false when it timed out.
  template <class Clock, class Duration>
  bool WaitUntil(Mutex* mu, const std::chrono::time_point<Clock, Duration>& deadline) REQUIRES(mu) {
    std::unique_lock<std::mutex> lock(mu->mu_, std::adopt_lock);
    const std::cv_status s = cv_.wait_until(lock, deadline);
    lock.release();
    return s == std::cv_status::no_timeout;
  }
  void Signal() { cv_.notify_one(); }
  void SignalAll() { cv_.notify_all(); }

 private:
  std::condition_variable cv_;
};

}  // namespace lathe

#include "lathe/snap/parallel.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

namespace lathe::snap {

unsigned DefaultThreads() { return std::clamp(std::thread::hardware_concurrency(), 2u, 8u); }

Status ParallelFor(size_t n, unsigned threads, const std::function<Status(size_t)>& fn,
                   const std::function<void()>& tick) {
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  std::mutex mu;
  std::condition_variable cv;
  Status first;      // guarded by mu
  unsigned running;  // guarded by mu
  auto work = [&] {
    for (size_t i; !failed.load() && (i = next.fetch_add(1)) < n;) {
      Status st = fn(i);
      if (!st.ok()) {
        std::lock_guard<std::mutex> l(mu);
        if (first.ok()) first = st;
        failed = true;
      }
    }
    std::lock_guard<std::mutex> l(mu);
    --running;
    cv.notify_all();
  };
  unsigned count =
      static_cast<unsigned>(std::max<size_t>(1, std::min<size_t>(threads == 0 ? 1 : threads, n)));
  running = count;
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < count; ++t) pool.emplace_back(work);
  {
    std::unique_lock<std::mutex> l(mu);
    while (running > 0) {
      cv.wait_for(l, std::chrono::milliseconds(100));
      if (tick) {
        l.unlock();
        tick();
        l.lock();
      }
    }
  }
  for (auto& t : pool) t.join();
  // Once more after the last job: a tick taken just before the last worker
  // ended would otherwise be the final report, short of the total.
  if (tick) tick();
  return first;
}

}  // namespace lathe::snap

// The dynamic batcher: per-priority request queues and the one thread per model
// that turns them into batches (after Triton's dynamic_batch_scheduler).
//
// RequestQueues is the algorithm, with no threads and no clock: every call is
// given "now", so tests drive it with a fake clock. Batcher runs it under a
// mutex and hands batches to a BatchSink (the model's instances): a batch that
// can go at once is dispatched by the thread that submitted its request or
// freed an instance (and run there when the instance's backend allows it);
// its own thread, with a condition variable, handles the
// timed waits (max_queue_delay_us, queue timeouts) and answers expired requests.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <limits>
#include <memory>
#include <thread>
#include <vector>

#include "lathe/common/mutex.h"
#include "lathe/common/status.h"
#include "lathe/common/thread_annotations.h"
#include "lathe/serve/config.h"
#include "lathe/serve/request.h"

namespace lathe::serve {

// Not thread-safe: Batcher guards it with its mutex.
class RequestQueues {
 public:
  // `max_batch_size` 0 means the model does not batch: every batch is one request.
  RequestQueues(BatchingConfig config, int max_batch_size);

  // Admits `r` at its priority (clamped to 1..levels). Sets enqueue_us and, from
  // the level's policy or the request's own timeout, deadline_us. Fails with
  // ResourceExhausted when that level's queue is full; `r` is then untouched
  // and still the caller's.
  Status Enqueue(std::unique_ptr<PendingRequest>& r, int64_t now_us, int64_t request_timeout_us);

  struct Decision {
    Batch batch;           // non-empty: run it now
    Batch expired;         // past their deadline with on_timeout: reject; answer 503
    int64_t wait_us = -1;  // nothing to run: look again after this long (-1: when woken)
  };
  // One step at `now_us`. `can_dispatch` says whether an instance could take a
  // batch now; when false the queues only age (requests keep accumulating,
  // which is where batches come from under load).
  Decision Next(int64_t now_us, bool can_dispatch);

  size_t size() const;              // all levels, including delayed requests
  size_t size_at(int level) const;  // one level (1-based), without delayed ones
  size_t delayed_size() const { return delayed_.size(); }
  int levels() const { return static_cast<int>(queues_.size()); }
  // Removes every queued request (for shutdown without draining).
  Batch TakeAll();

 private:
  // Moves requests past their deadline out of the queues (into `expired` or the
  // delayed queue); returns the earliest deadline still pending (0 if none).
  int64_t Expire(int64_t now_us, Batch& expired);
  // The requests of the next batch in priority/FIFO order, all with the head's
  // shape key, at most max rows; `oldest_us` is the earliest enqueue time among them.
  std::vector<std::pair<std::deque<std::unique_ptr<PendingRequest>>*, size_t>> Gather(
      int64_t& rows, int64_t& oldest_us);
  int64_t MaxRows() const;
  int64_t CutRows(int64_t rows, bool delay_expired) const;

  const BatchingConfig config_;
  const int max_batch_size_;
  std::vector<std::deque<std::unique_ptr<PendingRequest>>> queues_;  // index = level - 1
  std::deque<std::unique_ptr<PendingRequest>> delayed_;
};

// A batch whose instance was claimed under the batcher's mutex, to be run by
// the dispatching thread once the mutex is released (see BatchSink::Dispatch).
struct ClaimedBatch {
  int instance = -1;  // the sink's own index
  Batch batch;        // empty: nothing to run
};

// Where the batcher sends batches. CanDispatch and Dispatch are called under
// the batcher's mutex, from the batcher thread or from inside Submit/Wake on
// the caller's thread: they must not call back into the Batcher, nor block.
class BatchSink {
 public:
  virtual ~BatchSink() = default;
  virtual bool CanDispatch() = 0;  // an instance would take a batch now
  // Hands `batch` to the least-loaded instance and returns an empty
  // ClaimedBatch; or, when that instance runs batches on the dispatching
  // thread, claims it and returns the batch, which the batcher passes to
  // RunClaimed after releasing its mutex.
  virtual ClaimedBatch Dispatch(Batch batch) = 0;
  // Runs a batch returned by Dispatch on the caller's thread, without the
  // batcher's mutex; it may take long and call the requests' callbacks.
  virtual void RunClaimed(ClaimedBatch claimed) { (void)claimed; }
};

class Batcher {
 public:
  struct Options {
    BatchingConfig batching;
    int max_batch_size = 0;
    std::function<int64_t()> now_us;  // monotonic microseconds; default: steady_clock
  };
  // Starts the thread. `sink` must outlive the Batcher.
  Batcher(Options options, BatchSink& sink);
  ~Batcher();  // Stop(true)

  // Admits a request (see RequestQueues::Enqueue). Unavailable once stopping.
  // On failure `r` stays the caller's. A batch that can go at once is handed to
  // the sink before Submit returns, on the caller's thread.
  Status Submit(std::unique_ptr<PendingRequest>& r, int64_t request_timeout_us) EXCLUDES(mu_);

  // An instance finished a batch (or anything else changed): look again (on
  // the caller's thread for a batch that can go at once).
  void Wake() EXCLUDES(mu_);

  // Stops admitting; with `drain` the queued requests still run, else they are
  // answered Unavailable. Joins the thread. Idempotent.
  void Stop(bool drain) EXCLUDES(mu_);

  size_t queue_size_at(int level) const EXCLUDES(mu_);
  size_t delayed_size() const EXCLUDES(mu_);

 private:
  void Loop() EXCLUDES(mu_);
  // Requires mu_. Dispatches every batch that can go now, adding those the
  // caller must run to `claimed`; true when the batcher thread must look
  // (expired requests, or a timed look due earlier than the one it waits for).
  bool StepLocked(std::vector<ClaimedBatch>& claimed) REQUIRES(mu_);
  // Without mu_. Runs the claimed batches, then whatever they let go next,
  // until nothing is left for this thread.
  void RunClaimed(std::vector<ClaimedBatch>& claimed) EXCLUDES(mu_);

  static constexpr int64_t kNever = std::numeric_limits<int64_t>::max();

  const Options options_;
  BatchSink& sink_;
  mutable Mutex mu_;
  CondVar cv_;  // waited on with mu_
  RequestQueues queues_ GUARDED_BY(mu_);
  Batch expired_ GUARDED_BY(mu_);  // answered by the batcher thread
  // When the thread looks next by itself (0: it is looking).
  int64_t wake_at_us_ GUARDED_BY(mu_) = 0;
  bool stopping_ GUARDED_BY(mu_) = false;
  bool drain_ GUARDED_BY(mu_) = true;
  std::thread thread_;
};

}  // namespace lathe::serve

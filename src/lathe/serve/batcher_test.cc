// The batcher's algorithm is driven with a fake clock: every step is given
// "now", so timing is exact and nothing sleeps.
#include "lathe/serve/batcher.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>

#include "lathe/os/test_util/fake_clock.h"

namespace lathe::serve {
namespace {

BatchingConfig Batching(int64_t delay_us, std::vector<int> preferred = {}, QueuePolicy q = {}) {
  BatchingConfig b;
  b.enabled = true;
  b.max_queue_delay_us = delay_us;
  b.preferred_batch_sizes = std::move(preferred);
  b.priority_levels = 3;
  b.default_priority = 2;
  b.queues.assign(3, q);
  return b;
}

struct Fixture {
  os::FakeClock clock{0};
  int64_t Now() { return clock.MonotonicMs() * 1000; }
  std::vector<std::string> answered;  // tags of requests answered (expired)

  std::unique_ptr<PendingRequest> Req(std::string tag, int priority = 2, int64_t rows = 1,
                                      std::string key = "k") {
    auto r = std::make_unique<PendingRequest>();
    r->rows = rows;
    r->priority = priority;
    r->shape_key = std::move(key);
    r->inputs.push_back(Tensor{tag, DataType::kFp32, {}, {}});  // the tag rides in the name
    r->done = [this, tag](InferResult res) { answered.push_back(tag + ":" + res.status.msg_id()); };
    return r;
  }
  static std::vector<std::string> Tags(const Batch& b) {
    std::vector<std::string> t;
    for (const auto& r : b) t.push_back(r->inputs[0].name);
    return t;
  }
};

Status Put(RequestQueues& q, std::unique_ptr<PendingRequest> r, int64_t now,
           int64_t timeout_us = 0) {
  return q.Enqueue(r, now, timeout_us);
}

TEST(RequestQueues, WaitsMaxQueueDelayThenSends) {
  Fixture f;
  RequestQueues q(Batching(/*delay_us=*/5000), /*max_batch_size=*/8);
  ASSERT_TRUE(Put(q, f.Req("a"), f.Now()).ok());
  auto d = q.Next(f.Now(), true);
  EXPECT_TRUE(d.batch.empty());
  EXPECT_EQ(d.wait_us, 5000);
  f.clock.Advance(4);
  ASSERT_TRUE(Put(q, f.Req("b"), f.Now()).ok());
  d = q.Next(f.Now(), true);
  EXPECT_TRUE(d.batch.empty());
  EXPECT_EQ(d.wait_us, 1000);  // measured from the oldest request
  f.clock.Advance(1);
  d = q.Next(f.Now(), true);
  EXPECT_EQ(Fixture::Tags(d.batch), std::vector<std::string>({"a", "b"}));
  EXPECT_EQ(q.size(), 0u);
}

TEST(RequestQueues, FullBatchGoesAtOnce) {
  Fixture f;
  RequestQueues q(Batching(1'000'000), 4);
  for (const char* t : {"a", "b", "c", "d", "e"}) ASSERT_TRUE(Put(q, f.Req(t), f.Now()).ok());
  auto d = q.Next(f.Now(), true);
  EXPECT_EQ(Fixture::Tags(d.batch), std::vector<std::string>({"a", "b", "c", "d"}));
  d = q.Next(f.Now(), true);
  EXPECT_TRUE(d.batch.empty());
  EXPECT_EQ(q.size(), 1u);
}

TEST(RequestQueues, RowsCountTowardsTheMaximum) {
  Fixture f;
  RequestQueues q(Batching(0), 8);
  ASSERT_TRUE(Put(q, f.Req("a", 2, 5), f.Now()).ok());
  ASSERT_TRUE(Put(q, f.Req("b", 2, 4), f.Now()).ok());  // 5 + 4 > 8: next batch
  auto d = q.Next(f.Now(), true);
  EXPECT_EQ(Fixture::Tags(d.batch), std::vector<std::string>({"a"}));
  d = q.Next(f.Now(), true);
  EXPECT_EQ(Fixture::Tags(d.batch), std::vector<std::string>({"b"}));
}

TEST(RequestQueues, PreferredSizeGoesBeforeTheDelay) {
  Fixture f;
  RequestQueues q(Batching(1'000'000, {2, 4}), 8);
  for (const char* t : {"a", "b", "c"}) ASSERT_TRUE(Put(q, f.Req(t), f.Now()).ok());
  EXPECT_TRUE(q.Next(f.Now(), true).batch.empty());  // 3 < largest preferred (4): wait
  for (const char* t : {"d", "e"}) ASSERT_TRUE(Put(q, f.Req(t), f.Now()).ok());
  auto d = q.Next(f.Now(), true);  // 5 rows: cut at 4
  EXPECT_EQ(Fixture::Tags(d.batch), std::vector<std::string>({"a", "b", "c", "d"}));
  f.clock.Advance(1000);  // the delay passes: "e" alone (no preferred size fits)
  d = q.Next(f.Now(), true);
  EXPECT_EQ(Fixture::Tags(d.batch), std::vector<std::string>({"e"}));
}

TEST(RequestQueues, AfterTheDelayCutsAtTheLargestPreferredSize) {
  Fixture f;
  RequestQueues q(Batching(100, {2, 4}), 8);
  for (const char* t : {"a", "b", "c"}) ASSERT_TRUE(Put(q, f.Req(t), f.Now()).ok());
  f.clock.Advance(1);
  auto d = q.Next(f.Now(), true);
  EXPECT_EQ(Fixture::Tags(d.batch), std::vector<std::string>({"a", "b"}));
}

TEST(RequestQueues, HigherPriorityFirst) {
  Fixture f;
  RequestQueues q(Batching(0), 2);
  ASSERT_TRUE(Put(q, f.Req("low1", 3), f.Now()).ok());
  ASSERT_TRUE(Put(q, f.Req("low2", 3), f.Now()).ok());
  ASSERT_TRUE(Put(q, f.Req("normal", 2), f.Now()).ok());
  ASSERT_TRUE(Put(q, f.Req("high", 1), f.Now()).ok());
  EXPECT_EQ(Fixture::Tags(q.Next(f.Now(), true).batch),
            std::vector<std::string>({"high", "normal"}));
  EXPECT_EQ(Fixture::Tags(q.Next(f.Now(), true).batch), std::vector<std::string>({"low1", "low2"}));
}

TEST(RequestQueues, WithoutDynamicBatchingOneRequestPerBatch) {
  Fixture f;
  BatchingConfig b = Batching(0);
  b.enabled = false;
  RequestQueues q(b, 8);
  ASSERT_TRUE(Put(q, f.Req("a"), f.Now()).ok());
  ASSERT_TRUE(Put(q, f.Req("b", 1), f.Now()).ok());
  EXPECT_EQ(Fixture::Tags(q.Next(f.Now(), true).batch), std::vector<std::string>({"b"}));
  EXPECT_EQ(Fixture::Tags(q.Next(f.Now(), true).batch), std::vector<std::string>({"a"}));
}

TEST(RequestQueues, NeverMixesShapes) {
  Fixture f;
  RequestQueues q(Batching(0), 8);
  ASSERT_TRUE(Put(q, f.Req("a", 2, 1, "x:FP32,3;"), f.Now()).ok());
  ASSERT_TRUE(Put(q, f.Req("b", 2, 1, "x:FP32,4;"), f.Now()).ok());
  ASSERT_TRUE(Put(q, f.Req("c", 2, 1, "x:FP32,3;"), f.Now()).ok());
  EXPECT_EQ(Fixture::Tags(q.Next(f.Now(), true).batch), std::vector<std::string>({"a", "c"}));
  EXPECT_EQ(Fixture::Tags(q.Next(f.Now(), true).batch), std::vector<std::string>({"b"}));
}

TEST(RequestQueues, BusyInstancesLetRequestsAccumulate) {
  Fixture f;
  RequestQueues q(Batching(0), 8);
  for (const char* t : {"a", "b", "c"}) {
    ASSERT_TRUE(Put(q, f.Req(t), f.Now()).ok());
    auto d = q.Next(f.Now(), /*can_dispatch=*/false);
    EXPECT_TRUE(d.batch.empty());
    EXPECT_EQ(d.wait_us, -1);
  }
  EXPECT_EQ(q.Next(f.Now(), true).batch.size(), 3u);
}

TEST(RequestQueues, RejectsWhenTheLevelIsFull) {
  Fixture f;
  QueuePolicy p;
  p.max_size = 2;
  RequestQueues q(Batching(0, {}, p), 8);
  ASSERT_TRUE(Put(q, f.Req("a"), f.Now()).ok());
  ASSERT_TRUE(Put(q, f.Req("b"), f.Now()).ok());
  auto r = f.Req("c");
  Status s = q.Enqueue(r, f.Now(), 0);
  EXPECT_EQ(s.code(), Code::kResourceExhausted);
  EXPECT_EQ(s.msg_id(), "serve.queue_full");
  EXPECT_NE(r, nullptr);                                // still the caller's
  EXPECT_TRUE(Put(q, f.Req("high", 1), f.Now()).ok());  // another level has room
  auto probe = f.Req("probe");
  probe->bypass_limits = true;
  EXPECT_TRUE(Put(q, std::move(probe), f.Now()).ok());
}

TEST(RequestQueues, TimeoutRejects) {
  Fixture f;
  QueuePolicy p;
  p.timeout_us = 3000;
  RequestQueues q(Batching(0, {}, p), 8);
  ASSERT_TRUE(Put(q, f.Req("a"), f.Now()).ok());
  ASSERT_TRUE(Put(q, f.Req("b"), f.Now(), /*request timeout*/ 10000).ok());
  auto d = q.Next(f.Now(), false);
  EXPECT_EQ(d.wait_us, 3000);  // wakes for the first deadline
  f.clock.Advance(3);
  d = q.Next(f.Now(), false);
  EXPECT_EQ(Fixture::Tags(d.expired), std::vector<std::string>({"a"}));
  EXPECT_EQ(d.wait_us, 7000);
  EXPECT_EQ(q.size(), 1u);
}

TEST(RequestQueues, RequestTimeoutIgnoredWhenOverrideOff) {
  Fixture f;
  QueuePolicy p;
  p.timeout_us = 1000;
  p.allow_timeout_override = false;
  RequestQueues q(Batching(0, {}, p), 8);
  ASSERT_TRUE(Put(q, f.Req("a"), f.Now(), 1'000'000).ok());
  f.clock.Advance(1);
  EXPECT_EQ(q.Next(f.Now(), false).expired.size(), 1u);
}

TEST(RequestQueues, TimeoutDelayMovesBehindTheRest) {
  Fixture f;
  QueuePolicy p;
  p.timeout_us = 1000;
  p.on_timeout = TimeoutAction::kDelay;
  RequestQueues q(Batching(0, {}, p), 1);
  ASSERT_TRUE(Put(q, f.Req("old", 1), f.Now()).ok());
  f.clock.Advance(2);
  ASSERT_TRUE(Put(q, f.Req("new", 3), f.Now()).ok());
  auto d = q.Next(f.Now(), true);  // "old" timed out: behind even the lowest level
  EXPECT_TRUE(d.expired.empty());
  EXPECT_EQ(Fixture::Tags(d.batch), std::vector<std::string>({"new"}));
  EXPECT_EQ(q.delayed_size(), 1u);
  EXPECT_EQ(Fixture::Tags(q.Next(f.Now(), true).batch), std::vector<std::string>({"old"}));
}

// The threaded batcher: requests reach the sink, batches form while the only
// instance is busy, and Stop drains.
class FakeSink : public BatchSink {
 public:
  bool CanDispatch() override { return !busy_; }
  ClaimedBatch Dispatch(Batch b) override {
    busy_ = true;
    std::lock_guard<std::mutex> l(mu_);
    sizes.push_back(b.size());
    held = std::move(b);
    cv_.notify_all();
    return {};
  }
  // Completes the held batch (as an instance would) and lets the batcher go on.
  void Finish(Batcher& batcher) {
    Batch b;
    {
      std::lock_guard<std::mutex> l(mu_);
      b = std::move(held);
    }
    for (auto& r : b) r->done(InferResult{});
    busy_ = false;
    batcher.Wake();
  }
  bool WaitBatches(size_t n) {
    std::unique_lock<std::mutex> l(mu_);
    return cv_.wait_for(l, std::chrono::seconds(30), [&] { return sizes.size() >= n; });
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<size_t> sizes;
  Batch held;
  std::atomic<bool> busy_{false};
};

TEST(Batcher, BatchesFormWhileTheInstanceIsBusy) {
  os::FakeClock clock(0);
  FakeSink sink;
  Batcher::Options o;
  o.batching = Batching(0);
  o.max_batch_size = 8;
  o.now_us = [&] { return clock.MonotonicMs() * 1000; };
  Batcher b(o, sink);
  std::atomic<int> done{0};
  auto submit = [&] {
    auto r = std::make_unique<PendingRequest>();
    r->shape_key = "k";
    r->done = [&](InferResult) { done++; };
    ASSERT_TRUE(b.Submit(r, 0).ok());
  };
  submit();
  ASSERT_TRUE(sink.WaitBatches(1));
  for (int i = 0; i < 5; ++i) submit();  // the instance is busy: these wait together
  sink.Finish(b);
  ASSERT_TRUE(sink.WaitBatches(2));
  EXPECT_EQ(sink.sizes[1], 5u);
  sink.Finish(b);
  b.Stop(true);
  EXPECT_EQ(done.load(), 6);
  auto late = std::make_unique<PendingRequest>();
  EXPECT_EQ(b.Submit(late, 0).code(), Code::kUnavailable);
}

// A batch that can go at once is dispatched inside Submit, on the caller's
// thread (no wake-up of the batcher thread per request), and the next one
// inside Wake; a batch that must wait for max_queue_delay_us is sent later by
// the batcher thread.
TEST(Batcher, ImmediateBatchesAreDispatchedByTheCallingThread) {
  struct ThreadSink : FakeSink {
    ClaimedBatch Dispatch(Batch b) override {
      {
        std::lock_guard<std::mutex> l(mu_);
        threads.push_back(std::this_thread::get_id());
      }
      return FakeSink::Dispatch(std::move(b));
    }
    std::vector<std::thread::id> threads;  // guarded by mu_
  } sink;
  Batcher::Options o;
  o.batching = Batching(0);
  o.max_batch_size = 8;
  Batcher b(o, sink);
  auto submit = [&] {
    auto r = std::make_unique<PendingRequest>();
    r->shape_key = "k";
    r->done = [](InferResult) {};
    ASSERT_TRUE(b.Submit(r, 0).ok());
  };
  submit();
  {
    std::lock_guard<std::mutex> l(sink.mu_);
    ASSERT_EQ(sink.sizes.size(), 1u);  // already dispatched when Submit returned
    EXPECT_EQ(sink.threads[0], std::this_thread::get_id());
  }
  submit();  // the instance is busy: it waits
  sink.Finish(b);
  {
    std::lock_guard<std::mutex> l(sink.mu_);
    ASSERT_EQ(sink.sizes.size(), 2u);  // Finish's Wake dispatched it
    EXPECT_EQ(sink.threads[1], std::this_thread::get_id());
  }
  sink.Finish(b);

  Batcher::Options delayed = o;
  delayed.batching = Batching(20000);  // 20 ms for a fuller batch
  ThreadSink later;
  Batcher db(delayed, later);
  auto r = std::make_unique<PendingRequest>();
  r->shape_key = "k";
  r->done = [](InferResult) {};
  ASSERT_TRUE(db.Submit(r, 0).ok());
  ASSERT_TRUE(later.WaitBatches(1));
  std::lock_guard<std::mutex> l(later.mu_);
  EXPECT_NE(later.threads[0], std::this_thread::get_id());
  later.busy_ = false;
  later.held.clear();
}

// A sink whose instance runs batches on the dispatching thread: Submit runs
// the batch before it returns; requests that arrive meanwhile are run next by
// the same thread, in a loop (not one stack frame deeper per batch).
TEST(Batcher, ClaimedBatchesRunOnTheSubmittingThreadWithoutRecursion) {
  struct InlineSink : BatchSink {
    bool CanDispatch() override { return !busy; }
    ClaimedBatch Dispatch(Batch b) override {
      busy = true;
      return ClaimedBatch{0, std::move(b)};
    }
    void RunClaimed(ClaimedBatch c) override {
      depth++;
      max_depth = std::max(max_depth, depth);
      sizes.push_back(c.batch.size());
      threads.push_back(std::this_thread::get_id());
      if (during_first) std::exchange(during_first, nullptr)();  // requests arriving while it runs
      busy = false;
      for (auto& r : c.batch) r->done(InferResult{});
      depth--;
    }
    bool busy = false;
    int depth = 0, max_depth = 0;
    std::vector<size_t> sizes;
    std::vector<std::thread::id> threads;
    std::function<void()> during_first;
  } sink;
  Batcher::Options o;
  o.batching = Batching(0);
  o.max_batch_size = 8;
  Batcher b(o, sink);
  int done = 0;
  auto submit = [&] {
    auto r = std::make_unique<PendingRequest>();
    r->shape_key = "k";
    r->done = [&](InferResult) { done++; };
    ASSERT_TRUE(b.Submit(r, 0).ok());
  };
  sink.during_first = [&] {
    for (int i = 0; i < 3; ++i) submit();  // the instance is busy: these queue
  };
  submit();
  EXPECT_EQ(done, 4);  // all answered before the first Submit returned
  EXPECT_EQ(sink.sizes, std::vector<size_t>({1, 3}));
  EXPECT_EQ(sink.max_depth, 1);
  for (auto id : sink.threads) EXPECT_EQ(id, std::this_thread::get_id());
  EXPECT_EQ(b.queue_size_at(1), 0u);
  b.Stop(true);
}

TEST(Batcher, StopWithoutDrainAnswersUnavailable) {
  FakeSink sink;
  sink.busy_ = true;  // nothing will be dispatched
  Batcher::Options o;
  o.batching = Batching(0);
  o.max_batch_size = 8;
  Batcher b(o, sink);
  Status got;
  auto r = std::make_unique<PendingRequest>();
  r->done = [&](InferResult res) { got = res.status; };
  ASSERT_TRUE(b.Submit(r, 0).ok());
  b.Stop(false);
  EXPECT_EQ(got.code(), Code::kUnavailable);
}

}  // namespace
}  // namespace lathe::serve

#include "lathe/serve/batcher.h"

#include <algorithm>
#include <chrono>
#include <limits>

#include "lathe/os/clock.h"

namespace lathe::serve {
namespace {

// A scan for compatible requests stops after this many entries, so one step
// stays cheap even when a queue is long and full of other shapes.
constexpr size_t kMaxScan = 4096;

void Answer(Batch& batch, const Status& s) {
  for (auto& r : batch) {
    InferResult res;
    res.status = s;
    if (r->done) r->done(std::move(res));
  }
  batch.clear();
}

}  // namespace

RequestQueues::RequestQueues(BatchingConfig config, int max_batch_size)
    : config_(std::move(config)), max_batch_size_(max_batch_size) {
  size_t levels = static_cast<size_t>(std::max(1, config_.priority_levels));
  queues_.resize(levels);
}

Status RequestQueues::Enqueue(std::unique_ptr<PendingRequest>& r, int64_t now_us,
                              int64_t request_timeout_us) {
  int level = std::clamp(r->priority, 1, levels());
  QueuePolicy policy = static_cast<size_t>(level) <= config_.queues.size()
                           ? config_.queues[level - 1]
                           : QueuePolicy{};
  auto& q = queues_[static_cast<size_t>(level - 1)];
  size_t waiting = q.size() + static_cast<size_t>(std::count_if(
                                  delayed_.begin(), delayed_.end(),
                                  [&](const auto& d) { return d->priority == level; }));
  if (!r->bypass_limits && policy.max_size > 0 && waiting >= policy.max_size) {
    return Status::Msg(
        Code::kResourceExhausted, "serve.queue_full",
        {{"level", std::to_string(level)}, {"max", std::to_string(policy.max_size)}});
  }
  int64_t timeout = (request_timeout_us > 0 && policy.allow_timeout_override) ? request_timeout_us
                                                                              : policy.timeout_us;
  r->priority = level;
  r->enqueue_us = now_us;
  r->deadline_us = timeout > 0 ? now_us + timeout : 0;
  r->on_timeout = policy.on_timeout;
  q.push_back(std::move(r));
  return Status::OK();
}

int64_t RequestQueues::Expire(int64_t now_us, Batch& expired) {
  int64_t next = 0;
  for (auto& q : queues_) {
    for (auto it = q.begin(); it != q.end();) {
      PendingRequest& r = **it;
      if (r.deadline_us == 0 || r.deadline_us > now_us) {
        if (r.deadline_us != 0 && (next == 0 || r.deadline_us < next)) next = r.deadline_us;
        ++it;
        continue;
      }
      if (r.on_timeout == TimeoutAction::kReject) {
        expired.push_back(std::move(*it));
      } else {
        r.delayed = true;
        r.deadline_us = 0;
        delayed_.push_back(std::move(*it));
      }
      it = q.erase(it);
    }
  }
  return next;
}

int64_t RequestQueues::MaxRows() const {
  return (config_.enabled && max_batch_size_ > 0) ? max_batch_size_ : 0;  // 0: one request
}

std::vector<std::pair<std::deque<std::unique_ptr<PendingRequest>>*, size_t>> RequestQueues::Gather(
    int64_t& rows, int64_t& oldest_us) {
  std::vector<std::pair<std::deque<std::unique_ptr<PendingRequest>>*, size_t>> picks;
  rows = 0;
  oldest_us = std::numeric_limits<int64_t>::max();
  const std::string* key = nullptr;
  const int64_t max_rows = MaxRows();
  size_t scanned = 0;
  auto scan = [&](std::deque<std::unique_ptr<PendingRequest>>& q) {
    for (size_t i = 0; i < q.size(); ++i) {
      if (++scanned > kMaxScan) return false;
      const PendingRequest& r = *q[i];
      if (key != nullptr && r.shape_key != *key) continue;  // never mix shapes
      if (key != nullptr && (max_rows == 0 || rows + r.rows > max_rows))
        return false;  // full, keep order
      key = &r.shape_key;
      picks.emplace_back(&q, i);
      rows += r.rows;
      oldest_us = std::min(oldest_us, r.enqueue_us);
      if (max_rows == 0 || rows >= max_rows) return false;
    }
    return true;
  };
  for (auto& q : queues_) {
    if (!scan(q)) return picks;
  }
  scan(delayed_);
  return picks;
}

int64_t RequestQueues::CutRows(int64_t rows, bool delay_expired) const {
  const auto& pref = config_.preferred_batch_sizes;
  // The largest preferred size the gathered rows can fill; else all of them.
  for (auto it = pref.rbegin(); it != pref.rend(); ++it) {
    if (*it <= rows) return *it;
  }
  (void)delay_expired;  // a full batch or an expired delay: either way the rows on hand
  return rows;
}

RequestQueues::Decision RequestQueues::Next(int64_t now_us, bool can_dispatch) {
  Decision d;
  // 1. Requests past their deadline leave the queues (reject) or move behind (delay).
  int64_t next_deadline = Expire(now_us, d.expired);
  int64_t deadline_wait = next_deadline == 0 ? -1 : std::max<int64_t>(0, next_deadline - now_us);
  // 2. Nothing queued, or every instance busy: wait (requests keep accumulating).
  if (size() == 0 || !can_dispatch) {
    d.wait_us = deadline_wait;
    return d;
  }
  // 3. The candidate batch: the head of the highest priority and whatever fits
  //    with the same shapes, in priority then arrival order.
  int64_t rows = 0, oldest_us = 0;
  auto picks = Gather(rows, oldest_us);
  // 4. Send now if the batch is full, a preferred size is reached, or the
  //    oldest request has waited max_queue_delay_us; else wait for more.
  const int64_t max_rows = MaxRows();
  bool full = max_rows == 0 || rows >= max_rows;
  bool delay_over = now_us - oldest_us >= config_.max_queue_delay_us;
  bool preferred =
      !config_.preferred_batch_sizes.empty() && rows >= config_.preferred_batch_sizes.back();
  if (!full && !delay_over && !preferred) {
    int64_t until_delay = oldest_us + config_.max_queue_delay_us - now_us;
    d.wait_us = deadline_wait < 0 ? until_delay : std::min(until_delay, deadline_wait);
    return d;
  }
  // 5. Cut at a preferred size when one fits, take the requests out in order.
  int64_t target = max_rows == 0 ? rows : CutRows(rows, delay_over);
  int64_t taken = 0;
  std::vector<std::deque<std::unique_ptr<PendingRequest>>*> touched;
  for (auto& [q, i] : picks) {
    int64_t r_rows = (*q)[i]->rows;
    if (!d.batch.empty() && taken + r_rows > target) break;
    taken += r_rows;
    d.batch.push_back(std::move((*q)[i]));
    if (touched.empty() || touched.back() != q) touched.push_back(q);
  }
  for (auto* q : touched) {
    q->erase(std::remove(q->begin(), q->end(), nullptr), q->end());
  }
  return d;
}

size_t RequestQueues::size() const {
  size_t n = delayed_.size();
  for (const auto& q : queues_) n += q.size();
  return n;
}

size_t RequestQueues::size_at(int level) const {
  if (level < 1 || level > levels()) return 0;
  return queues_[static_cast<size_t>(level - 1)].size();
}

Batch RequestQueues::TakeAll() {
  Batch all;
  for (auto& q : queues_) {
    for (auto& r : q) all.push_back(std::move(r));
    q.clear();
  }
  for (auto& r : delayed_) all.push_back(std::move(r));
  delayed_.clear();
  return all;
}

Batcher::Batcher(Options options, BatchSink& sink)
    : options_([&] {
        if (!options.now_us) options.now_us = os::RealMonotonicUs;
        return std::move(options);
      }()),
      sink_(sink),
      queues_(options_.batching, options_.max_batch_size) {
  thread_ = std::thread([this] { Loop(); });
}

Batcher::~Batcher() { Stop(true); }

Status Batcher::Submit(std::unique_ptr<PendingRequest>& r, int64_t request_timeout_us) {
  bool notify = false;
  std::vector<ClaimedBatch> claimed;
  {
    MutexLock l(&mu_);
    if (stopping_) return Status::Msg(Code::kUnavailable, "serve.stopping");
    RETURN_IF_ERROR(queues_.Enqueue(r, options_.now_us(), request_timeout_us));
    notify = StepLocked(claimed);
  }
  if (notify) cv_.Signal();
  RunClaimed(claimed);
  return Status::OK();
}

void Batcher::Wake() {
  bool notify = true;
  std::vector<ClaimedBatch> claimed;
  {
    MutexLock l(&mu_);
    if (!stopping_) notify = StepLocked(claimed);  // while stopping, the loop alone decides
  }
  if (notify) cv_.Signal();
  RunClaimed(claimed);
}

// Waking the batcher thread for every request cost more than the request
// itself on a 2-core VM (context switches: docs/benchmarks.md), so a batch that
// can go now is dispatched by the thread that made it possible. The batcher
// thread keeps what needs a clock or may block: timed waits and answering
// expired requests (their callbacks may take locks the caller holds).
bool Batcher::StepLocked(std::vector<ClaimedBatch>& claimed) {
  const int64_t now = options_.now_us();
  for (;;) {
    RequestQueues::Decision d = queues_.Next(now, sink_.CanDispatch());
    for (auto& r : d.expired) expired_.push_back(std::move(r));
    if (!d.batch.empty()) {
      ClaimedBatch c = sink_.Dispatch(std::move(d.batch));
      if (!c.batch.empty()) claimed.push_back(std::move(c));
      continue;
    }
    return !expired_.empty() || (d.wait_us >= 0 && now + d.wait_us < wake_at_us_);
  }
}

// A loop rather than Wake from the finished batch: under load one thread may
// drain a long queue, and recursion would grow its stack with every batch.
void Batcher::RunClaimed(std::vector<ClaimedBatch>& claimed) {
  while (!claimed.empty()) {
    for (auto& c : claimed) sink_.RunClaimed(std::move(c));
    claimed.clear();
    bool notify = true;
    {
      MutexLock l(&mu_);
      if (!stopping_) notify = StepLocked(claimed);  // a draining loop waits for this instance
    }
    if (notify) cv_.Signal();
  }
}

void Batcher::Stop(bool drain) {
  {
    MutexLock l(&mu_);
    if (!stopping_) drain_ = drain;
    stopping_ = true;
  }
  cv_.Signal();
  if (thread_.joinable()) thread_.join();
}

size_t Batcher::queue_size_at(int level) const {
  MutexLock l(&mu_);
  return queues_.size_at(level);
}

size_t Batcher::delayed_size() const {
  MutexLock l(&mu_);
  return queues_.delayed_size();
}

void Batcher::Loop() {
  MutexLock lock(&mu_);
  for (;;) {
    wake_at_us_ = 0;  // looking now: StepLocked need not wake this thread
    if (!expired_.empty()) {
      Batch expired = std::move(expired_);
      expired_.clear();
      lock.Unlock();
      Answer(expired, Status::Msg(Code::kUnavailable, "serve.queue_timeout"));
      lock.Lock();
      continue;
    }
    if (stopping_ && (!drain_ || queues_.size() == 0)) break;
    const int64_t now = options_.now_us();
    RequestQueues::Decision d = queues_.Next(now, sink_.CanDispatch());
    for (auto& r : d.expired) expired_.push_back(std::move(r));
    if (!d.batch.empty()) {
      ClaimedBatch c = sink_.Dispatch(std::move(d.batch));
      if (!c.batch.empty()) {
        lock.Unlock();
        sink_.RunClaimed(std::move(c));
        lock.Lock();
      }
      continue;
    }
    if (!expired_.empty()) continue;
    if (d.wait_us < 0) {
      wake_at_us_ = kNever;
      cv_.Wait(&mu_);
    } else {
      wake_at_us_ = now + d.wait_us;
      cv_.WaitFor(&mu_, std::chrono::microseconds(d.wait_us));
    }
  }
  Batch rest = queues_.TakeAll();
  for (auto& r : expired_) rest.push_back(std::move(r));
  expired_.clear();
  lock.Unlock();
  Answer(rest, Status::Msg(Code::kUnavailable, "serve.stopping"));
}

}  // namespace lathe::serve

// One inference request as the scheduler sees it, and how its answer comes back.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "lathe/common/status.h"
#include "lathe/serve/config.h"
#include "lathe/serve/tensor.h"

namespace lathe::serve {

// What a request gets back. `status` is OK with `outputs`, or the failure.
struct InferResult {
  Status status;
  std::vector<Tensor> outputs;
  int64_t queue_us = 0;    // admitted → handed to an instance
  int64_t compute_us = 0;  // the backend's execute of its batch
  int batch_size = 0;      // rows in the batch it ran in
};

// Called exactly once per admitted request, from a scheduler thread (batcher or
// instance) or, for an instance that runs batches inline, from the thread that
// submitted or dispatched it, possibly inside Submit. Must not block for long:
// hand slow work elsewhere.
using InferCallback = std::function<void(InferResult)>;

// A request inside the scheduler. Owned by exactly one place at a time: a
// queue, a batch on its way to an instance, or nobody once `done` was called.
struct PendingRequest {
  std::vector<Tensor> inputs;
  int64_t rows = 1;         // its size along the batch dim (1 when the model does not batch)
  std::string shape_key;    // requests batch together only when their keys are equal
  int priority = 1;         // 1 = highest
  int64_t enqueue_us = 0;   // when it was admitted (the batcher's clock)
  int64_t deadline_us = 0;  // leave the queue by then; 0 = no deadline
  TimeoutAction on_timeout = TimeoutAction::kReject;
  bool delayed = false;        // timed out with on_timeout: delay
  bool bypass_limits = false;  // health probes: never rejected for a full queue
  InferCallback done;
};

using Batch = std::vector<std::unique_ptr<PendingRequest>>;

// Rows in a batch.
inline int64_t BatchRows(const Batch& b) {
  int64_t n = 0;
  for (const auto& r : b) n += r->rows;
  return n;
}

}  // namespace lathe::serve

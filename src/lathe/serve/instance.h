// A model instance: one loaded copy of a model bound to a device, with its own
// execution thread. It takes one batch at a time from the batcher, merges the
// requests' inputs along the batch dimension, runs the backend, splits the
// outputs and answers each request.
//
// Lifecycle: Create (loads on the instance's thread, blocks until loaded) →
// Run* → Stop (finishes what it was given, unloads on its thread, joins).
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <thread>

#include "lathe/serve/backend.h"
#include "lathe/serve/request.h"

namespace lathe::serve {

struct BatchOutcome {
  int64_t rows = 0;
  int64_t compute_us = 0;
  bool ok = true;
};

class ModelInstance {
 public:
  struct Options {
    const BackendLibrary* library = nullptr;  // not owned; outlives the instance
    InstanceSpec spec;
    int max_batch_size = 0;
    std::function<int64_t()> now_us;                    // monotonic µs
    std::function<void()> on_idle;                      // a batch finished (wake the batcher)
    std::function<void(const BatchOutcome&)> on_batch;  // metrics; may be empty
  };

  static Result<std::unique_ptr<ModelInstance>> Create(Options options);
  ~ModelInstance();  // Stop()

  // True when it runs nothing and was given nothing. Any thread.
  bool idle() const { return busy_.load() == 0; }
  // Batches executed so far (least-loaded routing breaks ties with it). Any thread.
  uint64_t executed() const { return executed_.load(); }

  // Hands over a batch; returns at once. Any thread.
  void Run(Batch batch);

  // Whether the backend lets a batch run on the thread that dispatched it
  // (runs_inline in backend_api.h). Constant after Create.
  bool runs_inline() const { return runs_inline_; }
  // Takes an idle instance for one RunClaimed; false when it is busy. Any thread.
  bool TryClaim();
  // Runs a batch taken with TryClaim on the caller's thread and answers its
  // requests there; the instance is idle again when it returns. Does not call
  // on_idle: the caller looks for the next batch itself. Any thread.
  void RunClaimed(Batch batch);
  // Runs the warm-up sample on the instance's thread and waits for it.
  Status Warmup(const std::vector<Tensor>& sample);
  // The backend's description of the model (see BackendInstance::Describe).
  Json Describe();
  // Finishes the queued batches, unloads, joins. Idempotent.
  void Stop();

 private:
  explicit ModelInstance(Options options) : options_(std::move(options)) {}
  struct Task {
    Batch batch;                                 // a batch to execute, or
    std::function<void(BackendInstance&)> call;  // a call to make on the thread
  };
  void Loop(std::promise<Status>* loaded);
  void Execute(Batch& batch);
  void Post(Task task);

  const Options options_;
  bool runs_inline_ = false;  // set before Create returns
  // Held around every backend call that may come from two threads (Execute:
  // a claimed batch on the caller's thread, a Run batch on thread_), so calls
  // never overlap even if routing got it wrong, and around the unload.
  std::mutex exec_mu_;
  std::unique_ptr<BackendInstance> backend_;  // on thread_, or under exec_mu_ when runs_inline_
  std::atomic<int> busy_{0};
  std::atomic<uint64_t> executed_{0};
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Task> tasks_;  // guarded by mu_
  bool stopping_ = false;   // guarded by mu_
  std::thread thread_;
};

// Merges the requests' inputs along dimension 0 (max_batch_size > 0) or lends
// the single request's inputs; splits outputs back. Exposed for tests.
std::vector<Tensor> MergeInputs(const Batch& batch);
// Splits `outputs` of a batch with `rows` per request; InvalidArgument-free:
// an output whose first dimension is not the batch's rows is Internal.
Result<std::vector<std::vector<Tensor>>> SplitOutputs(std::vector<Tensor> outputs,
                                                      const std::vector<int64_t>& rows);

}  // namespace lathe::serve

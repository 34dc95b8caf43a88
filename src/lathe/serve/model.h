// One served version of a model: its validated config, its instances (each on
// a device with its own thread), the batcher in front of them, its state and
// its health.
//
// States and the allowed transitions (after TF Serving's LoaderHarness):
//
//   kLoading ──▶ kReady ◀──▶ kUnhealthy        (a health probe failed / passed)
//      │           │             │
//      ▼           └──────┬──────┘
//   kFailed               ▼
//                    kUnloading ──▶ kUnloaded
//
// Only kReady serves as "ready"; kUnhealthy still accepts requests (a probe
// may fail for a passing reason) but reports not-ready so a load balancer
// moves away.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "lathe/common/status.h"
#include "lathe/serve/backend.h"
#include "lathe/serve/batcher.h"
#include "lathe/serve/instance.h"
#include "lathe/serve/metrics.h"
#include "lathe/serve/repository.h"

namespace lathe::serve {

enum class ModelState { kLoading, kReady, kUnhealthy, kUnloading, kUnloaded, kFailed };
std::string_view ModelStateName(ModelState s);  // "LOADING", "READY", ... (Triton's spelling)
// Whether `from → to` is one of the transitions above.
bool ModelTransitionAllowed(ModelState from, ModelState to);

// Outcome label of lathe_serve_requests_total.
enum class RequestOutcome { kSuccess, kInvalid, kRejected, kTimeout, kUnavailable, kError };
inline constexpr int kRequestOutcomes = 6;
std::string_view RequestOutcomeName(RequestOutcome o);  // "success", "invalid", ...

struct ModelOptions {
  BackendRegistry* registry = nullptr;  // not owned
  Metrics* metrics = nullptr;           // not owned; may be null
  std::function<int64_t()> now_us;      // monotonic µs; default steady_clock
  int visible_gpus = 0;                 // CUDA devices this process may use
};

// One request handed to a model, already decoded.
struct ModelRequest {
  std::vector<Tensor> inputs;
  int priority = 0;        // 0: the model's default_priority
  int64_t timeout_us = 0;  // 0: the queue policy's
};

class ModelVersion : public BatchSink {
 public:
  // Loads every instance, fills undeclared inputs/outputs from the backend,
  // runs the warm-up sample on each instance. Fails (with the reason) when any
  // step fails; nothing is left running then.
  static Result<std::unique_ptr<ModelVersion>> Load(const ModelSource& source,
                                                    const VersionSource& version,
                                                    ModelOptions options);
  ~ModelVersion() override;

  // Validates `req` against the config and admits it (taking its inputs).
  // InvalidArgument (bad input), ResourceExhausted (queue full) or Unavailable
  // (stopping) are returned at once, `done` is never called and `req` keeps its
  // inputs (so the caller may try another version); otherwise `done` is called
  // exactly once, from a scheduler thread or, when the instance runs batches
  // inline, from this thread before Submit returns: hold no lock `done` takes.
  // Any thread.
  Status Submit(ModelRequest& req, InferCallback done);

  const ModelConfig& config() const { return config_; }  // effective: with described tensors
  const std::string& name() const { return config_.name; }
  int64_t version() const { return version_.version; }
  ModelState state() const { return state_.load(); }
  bool ready() const { return state() == ModelState::kReady; }
  std::string last_probe_error() const;

  // Health: every health_probe_interval a real inference on the warm-up sample
  // goes through the queues at the highest priority. A probe that fails, or is
  // still not answered one interval after it was sent, makes the model
  // kUnhealthy; the next one that passes makes it kReady. Call often (the
  // server's prober thread does, every ~100 ms); it never blocks.
  void ProbeTick();

  // Stops admitting, lets queued and running requests finish (`drain`) or
  // answers them Unavailable, unloads the instances. Idempotent.
  void Stop(bool drain);

  // Per-request metrics of this version (nothing without options.metrics):
  // lathe_serve_requests_total and lathe_serve_request_duration_seconds, and
  // lathe_serve_queue_duration_seconds. Their series are resolved at load, so
  // an update renders no labels. Any thread.
  void CountRequest(RequestOutcome outcome, double duration_s) const;
  void ObserveQueue(double wait_s) const;

  // For /metrics, per priority level (1-based).
  size_t queue_size_at(int level) const;
  int64_t inflight_at(int level) const;

  // BatchSink (called by the batcher).
  bool CanDispatch() override;
  ClaimedBatch Dispatch(Batch batch) override;
  void RunClaimed(ClaimedBatch claimed) override;

 private:
  ModelVersion(ModelConfig config, VersionSource version, ModelOptions options);
  Status LoadInstances(const ModelSource& source);
  Status BuildWarmup();
  void SetState(ModelState to);
  Status Validate(ModelRequest& req, std::string& shape_key, int64_t& rows) const;
  Labels ModelLabels() const;
  void ResolveSeries();

  // Constant after Load.
  ModelConfig config_;
  const VersionSource version_;
  const ModelOptions options_;
  struct SeriesHandles {  // null without metrics
    std::array<Metrics::Series*, kRequestOutcomes> requests{};
    Metrics::Series* request_duration = nullptr;
    Metrics::Series* queue_duration = nullptr;
    Metrics::Series* batch_size = nullptr;
    Metrics::Series* compute_duration = nullptr;
  } series_;
  std::vector<Tensor> warmup_;  // empty: no sample, no probes
  std::vector<std::unique_ptr<ModelInstance>> instances_;
  std::unique_ptr<Batcher> batcher_;

  std::atomic<ModelState> state_{ModelState::kLoading};
  static constexpr int kMaxLevels = 101;
  std::array<std::atomic<int64_t>, kMaxLevels> inflight_{};
  std::atomic<uint64_t> next_instance_{0};

  mutable std::mutex probe_mu_;
  bool probe_outstanding_ = false;  // guarded by probe_mu_
  int64_t probe_sent_us_ = 0;       // guarded by probe_mu_
  int64_t probe_done_us_ = 0;       // guarded by probe_mu_
  std::string probe_error_;         // guarded by probe_mu_
  std::mutex transition_mu_;        // serialises SetState
};

// Zeros for every declared input when all dims are known (batch dim 1);
// empty when it cannot be built.
std::vector<Tensor> GeneratedWarmup(const ModelConfig& c);
// The sample a config's `warmup:` describes.
Result<std::vector<Tensor>> WarmupFromConfig(const ModelConfig& c);

}  // namespace lathe::serve

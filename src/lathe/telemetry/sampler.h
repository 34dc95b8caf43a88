// The daemon's telemetry sampler: every interval (default 5 s) it samples the
// GPU source, attributes each GPU process to a run (attribution.h), reads
// each running run's CPU time and memory from its cgroup (or, without one,
// from its processes), appends one point per GPU the run holds or has
// processes on, and one for its CPU and memory, to the store (store.h), and
// raises the usage warnings (usage_warnings.h) through a hook.
//
// Threads: one thread of its own (Start/Stop); Tick() is its body, which
// tests call with a fake clock instead. The hooks are called from that
// thread, without any lock of the sampler's held. History() may be called
// from any thread.
#pragma once

#include <sys/types.h>

#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "lathe/common/json.h"
#include "lathe/common/status.h"
#include "lathe/gpu/source.h"
#include "lathe/os/clock.h"
#include "lathe/os/process_table.h"
#include "lathe/telemetry/attribution.h"
#include "lathe/telemetry/store.h"
#include "lathe/telemetry/usage_warnings.h"

namespace lathe::telemetry {

inline constexpr int64_t kDefaultIntervalMs = 5000;
inline constexpr int64_t kMinIntervalMs = 100;
// Machine-wide samples kept in memory for GET /api/v1/gpus/history.
inline constexpr size_t kHistoryPoints = 720;

struct SamplerOptions {
  int64_t interval_ms = kDefaultIntervalMs;  // ≥ kMinIntervalMs
  WarningOptions warnings;
  int64_t bound_every_ms = 60'000;  // how often the store's size bound is enforced
};

// A running run, as the daemon hands it to the sampler.
struct SampleTarget {
  RunProcesses processes;  // run id, pids, cgroup directories
  std::vector<int> gpus;   // the GPU indices it holds
};

class Sampler {
 public:
  struct Hooks {
    std::function<std::vector<SampleTarget>()> targets;
    std::function<void(const std::string& run_id, const UsageWarning& w)> on_warning;
  };
  // `source`, `store`, `table` and `clock` are not owned and outlive the sampler.
  Sampler(SamplerOptions options, gpu::GpuSource& source, TelemetryStore& store,
          os::ProcessTable& table, os::Clock& clock, Hooks hooks);
  ~Sampler();  // Stop()

  void Start();
  void Stop();
  // One sample of everything (the thread's body).
  Status Tick();

  // The machine's GPUs over the last kHistoryPoints ticks from `since_ms`:
  // {simulated, interval_ms, gpus: [{index, uuid, name, t, utilization_pct,
  // memory_used_bytes, memory_total_bytes}]}.
  Json History(int64_t since_ms);
  const SamplerOptions& options() const { return opts_; }

 private:
  struct CpuSeen {
    int64_t t_ms = 0;
    uint64_t cpu_us = 0;
  };
  struct HistoryTick {
    int64_t t_ms = 0;
    std::vector<gpu::GpuInfo> gpus;  // processes dropped
  };
  void Loop();
  std::optional<Point> HostPoint(const SampleTarget& t, int64_t now_ms);
  RunTick TickOf(const SampleTarget& t, const gpu::Inventory& inv, const Attribution& a,
                 int64_t now_ms);
  void Warn(const std::map<std::string, RunMeta>& metas, const std::vector<SampleTarget>& targets,
            const gpu::Inventory& inv, int64_t now_ms);
  void Remember(const gpu::Inventory& inv, int64_t now_ms);

  // Constant after construction.
  const SamplerOptions opts_;
  gpu::GpuSource& source_;
  TelemetryStore& store_;
  os::ProcessTable& table_;
  os::Clock& clock_;
  const Hooks hooks_;

  // The sampler thread's own (Tick is not reentrant).
  UsageWarnings warnings_;
  std::map<std::string, CpuSeen> cpu_seen_;
  int64_t bound_at_ms_ = 0;

  std::mutex mu_;  // guards what follows
  std::condition_variable cv_;
  bool stopping_ = false;
  bool simulated_ = false;
  std::deque<HistoryTick> history_;
  std::thread thread_;
};

}  // namespace lathe::telemetry

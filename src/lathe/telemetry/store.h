// Where the daemon keeps telemetry: <home>/telemetry.db, a SQLite database
// of its own, apart from the state database.
//
// Why a separate SQLite file: the state database commits with
// synchronous=FULL (an fsync per transaction, so a run's transition survives
// power loss); a sample every few seconds does not need that, and must never
// queue behind or slow a run's transition. telemetry.db uses WAL with
// synchronous=NORMAL (a crash keeps every committed tick; power loss may
// lose the last few) and is written once per tick, in one transaction for
// every run. One file rather than one per run: one fsync-free commit per
// tick whatever the number of runs, and the size bound below is one query.
//
// What it holds per run: its series (series.h: one per GPU it used, keyed
// by the GPU's index, and one for its CPU and memory, key kHostKey), their
// running totals (totals.h), and which warnings it was given.
//
// Bounds: each series as series.h states; the whole store within
// StoreOptions::max_bytes (default 256 MB) of used database pages: when
// above it, EnforceBound drops whole runs' telemetry, the run whose last
// sample is oldest first, never a run still sampled. Freed pages are reused,
// so the file stays near the bound rather than growing.
//
// Thread-safe: a mutex serialises every call (the sampler's thread appends,
// API threads read).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "lathe/common/status.h"
#include "lathe/state/db.h"
#include "lathe/telemetry/series.h"
#include "lathe/telemetry/totals.h"

namespace lathe::telemetry {

inline constexpr int kHostKey = -1;
inline constexpr uint64_t kDefaultMaxStoreBytes = 256'000'000;

struct StoreOptions {
  TierOptions tiers;
  uint64_t max_bytes = kDefaultMaxStoreBytes;
};

// One GPU's sample for a run.
struct GpuPoint {
  int index = 0;
  std::string uuid;
  std::string name;
  Point point;
};

// What one tick adds for one run.
struct RunTick {
  std::string run_id;
  std::vector<GpuPoint> gpus;
  std::optional<Point> host;  // CPU and memory, when known
};

// Warnings a run was given (bits).
enum Told : int { kToldIdle = 1, kToldThrottled = 2 };

struct RunMeta {
  bool simulated = false;
  int64_t interval_ms = 0;
  int told = 0;
  Totals totals;  // the run's own
};

struct GpuSeries {
  int index = 0;
  std::string uuid;
  std::string name;
  Totals totals;
  std::vector<Point> points;
};

// What Read returns: a run's telemetry from `since_ms` on.
struct RunTelemetry {
  std::string run_id;
  RunMeta meta;
  std::vector<GpuSeries> gpus;  // by index
  std::vector<Point> host;
};

class TelemetryStore {
 public:
  static Result<std::unique_ptr<TelemetryStore>> Open(const std::string& path,
                                                      StoreOptions options = {});

  // Appends the points of one tick at `t_ms` for every run in `ticks`, in one
  // transaction, and returns each run's metadata as it now is.
  Result<std::map<std::string, RunMeta>> Append(int64_t t_ms, int64_t interval_ms, bool simulated,
                                                const std::vector<RunTick>& ticks);
  Status SetTold(const std::string& run_id, int told);
  // NotFound when the run has no telemetry.
  Result<RunTelemetry> Read(const std::string& run_id, int64_t since_ms);
  Status Remove(const std::string& run_id);  // none is fine
  // Every run that has telemetry here.
  Result<std::vector<std::string>> RunIds();
  // See the bounds above. Returns the runs whose telemetry was dropped.
  Result<std::vector<std::string>> EnforceBound(const std::set<std::string>& sampled);
  Result<uint64_t> UsedBytes();
  const StoreOptions& options() const { return opts_; }

 private:
  TelemetryStore(std::unique_ptr<state::Db> db, StoreOptions o) : opts_(o), db_(std::move(db)) {}
  struct Live {
    Series series;
    Totals totals;
    std::string uuid, name;
  };
  // The series `key` of `run_id`, loaded from the database on first use.
  Result<Live*> LiveOf(const std::string& run_id, int key);
  Result<RunMeta> MetaOf(const std::string& run_id);
  Status AppendPoint(const std::string& run_id, int key, const Point& p, Live& live);
  Result<std::vector<std::pair<int, Point>>> ReadPoints(const std::string& run_id, int key,
                                                        int64_t since_ms);
  Status RemoveLocked(const std::string& run_id);

  const StoreOptions opts_;
  std::mutex mu_;
  std::unique_ptr<state::Db> db_;                     // guarded by mu_
  std::map<std::pair<std::string, int>, Live> live_;  // series appended in the last tick
};

}  // namespace lathe::telemetry

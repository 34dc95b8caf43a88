#include "lathe/telemetry/store.h"

#include <algorithm>

namespace lathe::telemetry {
namespace {

constexpr int kRawTier = 0;
constexpr int kBucketTier = 1;

const std::vector<std::string>& Migrations() {
  static const std::vector<std::string> m = {
      "CREATE TABLE runs (run_id TEXT PRIMARY KEY, simulated INTEGER NOT NULL, "
      "  interval_ms INTEGER NOT NULL, last_ms INTEGER NOT NULL, told INTEGER NOT NULL DEFAULT 0, "
      "  totals TEXT NOT NULL);"
      "CREATE INDEX runs_by_last ON runs (last_ms);"
      "CREATE TABLE series (run_id TEXT NOT NULL, key INTEGER NOT NULL, uuid TEXT NOT NULL, "
      "  name TEXT NOT NULL, totals TEXT NOT NULL, PRIMARY KEY (run_id, key)) WITHOUT ROWID;"
      "CREATE TABLE points (run_id TEXT NOT NULL, key INTEGER NOT NULL, tier INTEGER NOT NULL, "
      "  t_ms INTEGER NOT NULL, v TEXT NOT NULL, PRIMARY KEY (run_id, key, tier, t_ms)) "
      "  WITHOUT ROWID;",
  };
  return m;
}

Result<int64_t> PragmaInt(state::Db& db, const char* pragma) {
  ASSIGN_OR_RETURN(state::Stmt s, db.Prepare(std::string("PRAGMA ") + pragma));
  ASSIGN_OR_RETURN(bool row, s.Step());
  return row ? s.Int(0) : 0;
}

}  // namespace

Result<std::unique_ptr<TelemetryStore>> TelemetryStore::Open(const std::string& path,
                                                             StoreOptions options) {
  ASSIGN_OR_RETURN(std::unique_ptr<state::Db> db, state::Db::Open(path, Migrations()));
  // state::Db commits with FULL; samples do not need an fsync each (see store.h).
  RETURN_IF_ERROR(db->Exec("PRAGMA synchronous=NORMAL"));
  return std::unique_ptr<TelemetryStore>(new TelemetryStore(std::move(db), options));
}

Result<RunMeta> TelemetryStore::MetaOf(const std::string& run_id) {
  ASSIGN_OR_RETURN(state::Stmt s,
                   db_->Prepare("SELECT simulated, interval_ms, told, totals FROM runs "
                                "WHERE run_id = ?"));
  s.Bind(1, run_id);
  ASSIGN_OR_RETURN(bool row, s.Step());
  if (!row) return Status::NotFound("no telemetry of run " + run_id);
  RunMeta m;
  m.simulated = s.Int(0) != 0;
  m.interval_ms = s.Int(1);
  m.told = static_cast<int>(s.Int(2));
  m.totals = Totals::FromJson(state::JsonOr(s.Text(3), Json::object()));
  return m;
}

Result<std::vector<std::pair<int, Point>>> TelemetryStore::ReadPoints(const std::string& run_id,
                                                                      int key, int64_t since_ms) {
  // Buckets (tier 1) hold older points than raw ones (tier 0).
  ASSIGN_OR_RETURN(state::Stmt s,
                   db_->Prepare("SELECT tier, t_ms, v FROM points WHERE run_id = ? AND key = ? "
                                "AND t_ms >= ? ORDER BY tier DESC, t_ms"));
  s.Bind(1, run_id).Bind(2, int64_t{key}).Bind(3, since_ms);
  std::vector<std::pair<int, Point>> out;
  while (true) {
    ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) return out;
    ASSIGN_OR_RETURN(Point p, DecodePoint(s.Text(2), s.Int(1)));
    out.emplace_back(static_cast<int>(s.Int(0)), p);
  }
}

Result<TelemetryStore::Live*> TelemetryStore::LiveOf(const std::string& run_id, int key) {
  auto id = std::make_pair(run_id, key);
  if (auto it = live_.find(id); it != live_.end()) return &it->second;
  Live live;
  live.series = Series(opts_.tiers);
  ASSIGN_OR_RETURN(auto points, ReadPoints(run_id, key, INT64_MIN));
  std::vector<Point> buckets, raw;
  for (auto& [tier, p] : points) (tier == kBucketTier ? buckets : raw).push_back(p);
  live.series.Restore(std::move(buckets), std::move(raw));
  ASSIGN_OR_RETURN(state::Stmt s, db_->Prepare("SELECT uuid, name, totals FROM series "
                                               "WHERE run_id = ? AND key = ?"));
  s.Bind(1, run_id).Bind(2, int64_t{key});
  ASSIGN_OR_RETURN(bool row, s.Step());
  if (row) {
    live.uuid = s.Text(0);
    live.name = s.Text(1);
    live.totals = Totals::FromJson(state::JsonOr(s.Text(2), Json::object()));
  }
  return &live_.emplace(id, std::move(live)).first->second;
}

Status TelemetryStore::AppendPoint(const std::string& run_id, int key, const Point& p, Live& live) {
  SeriesChange change = live.series.Add(p);
  if (!change.added) return Status::OK();
  auto put = [&](int tier, const Point& q) -> Status {
    ASSIGN_OR_RETURN(state::Stmt s, db_->Prepare("INSERT OR REPLACE INTO points "
                                                 "(run_id, key, tier, t_ms, v) "
                                                 "VALUES (?, ?, ?, ?, ?)"));
    s.Bind(1, run_id).Bind(2, int64_t{key}).Bind(3, int64_t{tier}).Bind(4, q.t_ms);
    s.Bind(5, EncodePoint(q));
    return s.Run();
  };
  auto drop = [&](int tier, int64_t before) -> Status {
    ASSIGN_OR_RETURN(state::Stmt s, db_->Prepare("DELETE FROM points WHERE run_id = ? AND "
                                                 "key = ? AND tier = ? AND t_ms < ?"));
    s.Bind(1, run_id).Bind(2, int64_t{key}).Bind(3, int64_t{tier}).Bind(4, before);
    return s.Run();
  };
  if (change.raw_removed_before != 0) RETURN_IF_ERROR(drop(kRawTier, change.raw_removed_before));
  if (change.buckets_removed_before != 0) {
    RETURN_IF_ERROR(drop(kBucketTier, change.buckets_removed_before));
  }
  for (const Point& b : change.buckets) RETURN_IF_ERROR(put(kBucketTier, b));
  // The point itself may already have been folded (a bucket shorter than a tick).
  const auto pts = live.series.Points(p.t_ms);
  if (!pts.empty() && pts.back().t_ms == p.t_ms && pts.back().n == 1) {
    RETURN_IF_ERROR(put(kRawTier, p));
  }
  ASSIGN_OR_RETURN(state::Stmt s, db_->Prepare("INSERT OR REPLACE INTO series "
                                               "(run_id, key, uuid, name, totals) "
                                               "VALUES (?, ?, ?, ?, ?)"));
  s.Bind(1, run_id).Bind(2, int64_t{key}).Bind(3, live.uuid).Bind(4, live.name);
  s.Bind(5, live.totals.ToJson().dump());
  return s.Run();
}

Result<std::map<std::string, RunMeta>> TelemetryStore::Append(int64_t t_ms, int64_t interval_ms,
                                                              bool simulated,
                                                              const std::vector<RunTick>& ticks) {
  std::lock_guard<std::mutex> lock(mu_);
  std::map<std::string, RunMeta> out;
  Status st = db_->Transaction([&]() -> Status {
    for (const RunTick& tick : ticks) {
      auto known = MetaOf(tick.run_id);
      if (!known.ok() && !known.status().IsNotFound()) return known.status();
      RunMeta meta = known.ok() ? *known : RunMeta{};
      meta.simulated = simulated;
      meta.interval_ms = interval_ms;
      uint64_t reasons = 0;
      double process_memory = 0;
      for (const GpuPoint& g : tick.gpus) reasons |= g.point.reasons;
      if (meta.totals.samples == 0 || t_ms > meta.totals.last_ms) {
        meta.totals.AddTick(t_ms, reasons, interval_ms);
      }
      for (const GpuPoint& g : tick.gpus) {
        ASSIGN_OR_RETURN(Live * live, LiveOf(tick.run_id, g.index));
        if (live->series.Points(t_ms).empty()) live->totals.Add(g.point, false, interval_ms);
        live->uuid = g.uuid;
        live->name = g.name;
        meta.totals.AddValues(g.point);
        if (g.point.known[kProcessMemory]) process_memory += g.point.mean[kProcessMemory];
        RETURN_IF_ERROR(AppendPoint(tick.run_id, g.index, g.point, *live));
      }
      if (!tick.gpus.empty()) {
        double& peak = meta.totals.process_memory_peak;
        peak = std::isnan(peak) ? process_memory : std::max(peak, process_memory);
      }
      if (tick.host) {
        ASSIGN_OR_RETURN(Live * live, LiveOf(tick.run_id, kHostKey));
        live->totals.Add(*tick.host, true, interval_ms);
        meta.totals.Add(*tick.host, true, interval_ms);
        RETURN_IF_ERROR(AppendPoint(tick.run_id, kHostKey, *tick.host, *live));
      }
      ASSIGN_OR_RETURN(state::Stmt s,
                       db_->Prepare("INSERT OR REPLACE INTO runs (run_id, simulated, "
                                    "interval_ms, last_ms, told, totals) "
                                    "VALUES (?, ?, ?, ?, ?, ?)"));
      s.Bind(1, tick.run_id).Bind(2, int64_t{meta.simulated}).Bind(3, interval_ms);
      s.Bind(4, meta.totals.last_ms).Bind(5, int64_t{meta.told});
      s.Bind(6, meta.totals.ToJson().dump());
      RETURN_IF_ERROR(s.Run());
      out[tick.run_id] = meta;
    }
    return Status::OK();
  });
  // Only the runs of this tick stay in memory; one that comes back is re-read.
  std::erase_if(live_, [&](const auto& e) { return !out.contains(e.first.first); });
  if (!st.ok()) {
    live_.clear();  // the transaction rolled back: memory must not be ahead of the file
    return st;
  }
  return out;
}

Status TelemetryStore::SetTold(const std::string& run_id, int told) {
  std::lock_guard<std::mutex> lock(mu_);
  ASSIGN_OR_RETURN(state::Stmt s, db_->Prepare("UPDATE runs SET told = ? WHERE run_id = ?"));
  s.Bind(1, int64_t{told}).Bind(2, run_id);
  return s.Run();
}

Result<RunTelemetry> TelemetryStore::Read(const std::string& run_id, int64_t since_ms) {
  std::lock_guard<std::mutex> lock(mu_);
  RunTelemetry out;
  out.run_id = run_id;
  ASSIGN_OR_RETURN(out.meta, MetaOf(run_id));
  ASSIGN_OR_RETURN(state::Stmt s, db_->Prepare("SELECT key, uuid, name, totals FROM series "
                                               "WHERE run_id = ? ORDER BY key"));
  s.Bind(1, run_id);
  while (true) {
    ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) break;
    const int key = static_cast<int>(s.Int(0));
    ASSIGN_OR_RETURN(auto points, ReadPoints(run_id, key, since_ms));
    std::vector<Point> plain;
    for (auto& [tier, p] : points) plain.push_back(p);
    if (key == kHostKey) {
      out.host = std::move(plain);
      continue;
    }
    GpuSeries g;
    g.index = key;
    g.uuid = s.Text(1);
    g.name = s.Text(2);
    g.totals = Totals::FromJson(state::JsonOr(s.Text(3), Json::object()));
    g.points = std::move(plain);
    out.gpus.push_back(std::move(g));
  }
  return out;
}

Result<std::vector<std::string>> TelemetryStore::RunIds() {
  std::lock_guard<std::mutex> lock(mu_);
  ASSIGN_OR_RETURN(state::Stmt s, db_->Prepare("SELECT run_id FROM runs ORDER BY run_id"));
  std::vector<std::string> ids;
  while (true) {
    ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) break;
    ids.push_back(s.Text(0));
  }
  return ids;
}

Status TelemetryStore::RemoveLocked(const std::string& run_id) {
  live_.erase(live_.lower_bound({run_id, INT32_MIN}), live_.upper_bound({run_id, INT32_MAX}));
  return db_->Transaction([&]() -> Status {
    for (const char* table : {"points", "series", "runs"}) {
      ASSIGN_OR_RETURN(state::Stmt s,
                       db_->Prepare(std::string("DELETE FROM ") + table + " WHERE run_id = ?"));
      s.Bind(1, run_id);
      RETURN_IF_ERROR(s.Run());
    }
    return Status::OK();
  });
}

Status TelemetryStore::Remove(const std::string& run_id) {
  std::lock_guard<std::mutex> lock(mu_);
  return RemoveLocked(run_id);
}

Result<uint64_t> TelemetryStore::UsedBytes() {
  std::lock_guard<std::mutex> lock(mu_);
  ASSIGN_OR_RETURN(int64_t pages, PragmaInt(*db_, "page_count"));
  ASSIGN_OR_RETURN(int64_t free_pages, PragmaInt(*db_, "freelist_count"));
  ASSIGN_OR_RETURN(int64_t size, PragmaInt(*db_, "page_size"));
  return static_cast<uint64_t>(std::max<int64_t>(0, pages - free_pages) * size);
}

Result<std::vector<std::string>> TelemetryStore::EnforceBound(
    const std::set<std::string>& sampled) {
  std::vector<std::string> dropped;
  while (true) {
    ASSIGN_OR_RETURN(uint64_t used, UsedBytes());
    if (used <= opts_.max_bytes) return dropped;
    std::lock_guard<std::mutex> lock(mu_);
    ASSIGN_OR_RETURN(state::Stmt s, db_->Prepare("SELECT run_id FROM runs ORDER BY last_ms"));
    std::optional<std::string> victim;
    while (!victim) {
      ASSIGN_OR_RETURN(bool row, s.Step());
      if (!row) break;
      if (!sampled.contains(s.Text(0))) victim = s.Text(0);
    }
    s.Reset();
    if (!victim) return dropped;  // only runs being sampled are left
    RETURN_IF_ERROR(RemoveLocked(*victim));
    dropped.push_back(*victim);
  }
}

}  // namespace lathe::telemetry

#include "lathe/telemetry/sampler.h"

#include <algorithm>
#include <chrono>
#include <set>

#include <spdlog/spdlog.h>

#include "lathe/os/cgroup.h"

namespace lathe::telemetry {
namespace {

constexpr double kUsPerMs = 1000;

double Opt(const auto& v) { return v ? static_cast<double>(*v) : kUnknown; }

Json Column(const std::vector<double>& v) {
  Json a = Json::array();
  for (double x : v) a.push_back(std::isnan(x) ? Json(nullptr) : Json(x));
  return a;
}

}  // namespace

Sampler::Sampler(SamplerOptions options, gpu::GpuSource& source, TelemetryStore& store,
                 os::ProcessTable& table, os::Clock& clock, Hooks hooks)
    : opts_(options),
      source_(source),
      store_(store),
      table_(table),
      clock_(clock),
      hooks_(std::move(hooks)),
      warnings_(options.warnings) {}

Sampler::~Sampler() { Stop(); }

void Sampler::Start() {
  std::lock_guard<std::mutex> lock(mu_);
  if (thread_.joinable()) return;
  stopping_ = false;
  thread_ = std::thread([this] { Loop(); });
}

void Sampler::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Sampler::Loop() {
  const auto period = std::chrono::milliseconds(std::max(opts_.interval_ms, kMinIntervalMs));
  auto next = std::chrono::steady_clock::now();
  while (true) {
    if (Status st = Tick(); !st.ok()) spdlog::warn("telemetry: {}", st.ToString());
    next += period;
    const auto now = std::chrono::steady_clock::now();
    if (next < now) next = now;  // a slow tick does not cause a burst of catch-up ticks
    std::unique_lock<std::mutex> lock(mu_);
    if (cv_.wait_until(lock, next, [&] { return stopping_; })) return;
  }
}

// CPU from the run's cgroup counter (or its processes' times) as the
// difference since the last tick; memory from its cgroup (or their RSS).
std::optional<Point> Sampler::HostPoint(const SampleTarget& t, int64_t now_ms) {
  std::optional<uint64_t> cpu_us, memory;
  if (!t.processes.cgroup_dirs.empty()) {
    if (auto cg = os::RunCgroup::Open(t.processes.cgroup_dirs); cg.ok()) {
      if (auto c = (*cg)->CpuUsageUsec(); c.ok()) cpu_us = *c;
      if (auto m = (*cg)->MemoryCurrentBytes(); m.ok()) memory = *m;
    }
  }
  if (!cpu_us || !memory) {
    uint64_t cpu = 0, rss = 0;
    bool any = false;
    for (pid_t pid : t.processes.pids) {
      auto u = table_.Usage(pid);
      if (!u) continue;
      any = true;
      cpu += u->cpu_us;
      rss += u->rss_bytes;
    }
    if (any && !cpu_us) cpu_us = cpu;
    if (any && !memory) memory = rss;
  }
  if (!cpu_us && !memory) return std::nullopt;
  Point p;
  p.t_ms = now_ms;
  p.Set(kHostMemory, Opt(memory));
  if (cpu_us) {
    auto [it, fresh] = cpu_seen_.try_emplace(t.processes.run_id, CpuSeen{now_ms, *cpu_us});
    // A sum over processes drops when one exits: no figure for that tick.
    if (!fresh && now_ms > it->second.t_ms && *cpu_us >= it->second.cpu_us) {
      p.Set(kCpuCores, static_cast<double>(*cpu_us - it->second.cpu_us) /
                           (static_cast<double>(now_ms - it->second.t_ms) * kUsPerMs));
    }
    it->second = {now_ms, *cpu_us};
  }
  return p;
}

RunTick Sampler::TickOf(const SampleTarget& t, const gpu::Inventory& inv, const Attribution& a,
                        int64_t now_ms) {
  RunTick tick;
  tick.run_id = t.processes.run_id;
  const auto mine = a.find(tick.run_id);
  for (const gpu::GpuInfo& g : inv.gpus) {
    const bool held = std::find(t.gpus.begin(), t.gpus.end(), g.index) != t.gpus.end();
    const GpuShare* share = nullptr;
    if (mine != a.end()) {
      if (auto s = mine->second.find(g.index); s != mine->second.end()) share = &s->second;
    }
    if (!held && share == nullptr) continue;
    GpuPoint gp;
    gp.index = g.index;
    gp.uuid = g.uuid;
    gp.name = g.name;
    Point& p = gp.point;
    p.t_ms = now_ms;
    p.Set(kUtilization, Opt(g.utilization_gpu_pct));
    p.Set(kMemoryUsed, Opt(g.memory_used_bytes));
    p.Set(kProcessMemory, share         ? static_cast<double>(share->memory_bytes)
                          : g.processes ? 0.0
                                        : kUnknown);
    p.Set(kTemperature, Opt(g.temperature_c));
    p.Set(kPower, Opt(g.power_w));
    p.Set(kSmClock, Opt(g.sm_clock_mhz));
    p.reasons = g.throttle_reasons.value_or(0);
    p.Set(kThrottled, g.throttle_reasons ? (ThrottlingBits(p.reasons) ? 1.0 : 0.0) : kUnknown);
    tick.gpus.push_back(std::move(gp));
  }
  tick.host = HostPoint(t, now_ms);
  return tick;
}

void Sampler::Warn(const std::map<std::string, RunMeta>& metas,
                   const std::vector<SampleTarget>& targets, const gpu::Inventory& inv,
                   int64_t now_ms) {
  for (const SampleTarget& t : targets) {
    auto m = metas.find(t.processes.run_id);
    if (m == metas.end()) continue;
    RunObservation o;
    o.t_ms = now_ms;
    o.gpus_held = static_cast<int>(t.gpus.size());
    std::optional<int> max_util = 0;
    for (int i : t.gpus) {
      auto g = std::find_if(inv.gpus.begin(), inv.gpus.end(),
                            [&](const gpu::GpuInfo& x) { return x.index == i; });
      if (g == inv.gpus.end() || !g->utilization_gpu_pct) {
        max_util.reset();
        break;
      }
      max_util = std::max(*max_util, *g->utilization_gpu_pct);
    }
    o.max_utilization_pct = max_util;
    o.observed_ms = m->second.totals.observed_ms;
    o.throttled_ms = m->second.totals.throttled_ms;
    o.reason_ms = m->second.totals.reason_ms;
    bool idle = m->second.told & kToldIdle, throttled = m->second.told & kToldThrottled;
    auto said = warnings_.Observe(t.processes.run_id, o, idle, throttled);
    if (said.empty()) continue;
    int told = (idle ? kToldIdle : 0) | (throttled ? kToldThrottled : 0);
    if (Status st = store_.SetTold(t.processes.run_id, told); !st.ok()) {
      spdlog::warn("telemetry: {}", st.ToString());
    }
    for (const UsageWarning& w : said) {
      if (hooks_.on_warning) hooks_.on_warning(t.processes.run_id, w);
    }
  }
}

void Sampler::Remember(const gpu::Inventory& inv, int64_t now_ms) {
  HistoryTick h;
  h.t_ms = now_ms;
  h.gpus = inv.gpus;
  for (auto& g : h.gpus) g.processes.reset();
  std::lock_guard<std::mutex> lock(mu_);
  simulated_ = inv.simulated;
  history_.push_back(std::move(h));
  while (history_.size() > kHistoryPoints) history_.pop_front();
}

Status Sampler::Tick() {
  const int64_t now_ms = clock_.NowMs();
  ASSIGN_OR_RETURN(gpu::Inventory inv, source_.Sample());
  std::vector<SampleTarget> targets =
      hooks_.targets ? hooks_.targets() : std::vector<SampleTarget>{};
  std::vector<RunProcesses> procs;
  for (const SampleTarget& t : targets) procs.push_back(t.processes);
  const Attribution attribution = Attribute(inv, procs, table_);

  std::vector<RunTick> ticks;
  std::set<std::string> sampled;
  for (const SampleTarget& t : targets) {
    ticks.push_back(TickOf(t, inv, attribution, now_ms));
    sampled.insert(t.processes.run_id);
  }
  std::erase_if(cpu_seen_, [&](const auto& e) { return !sampled.contains(e.first); });
  Remember(inv, now_ms);
  ASSIGN_OR_RETURN(auto metas, store_.Append(now_ms, opts_.interval_ms, inv.simulated, ticks));
  Warn(metas, targets, inv, now_ms);
  if (now_ms - bound_at_ms_ >= opts_.bound_every_ms) {
    bound_at_ms_ = now_ms;
    ASSIGN_OR_RETURN(auto dropped, store_.EnforceBound(sampled));
    for (const auto& id : dropped) spdlog::info("telemetry of run {} dropped: store full", id);
  }
  return Status::OK();
}

Json Sampler::History(int64_t since_ms) {
  std::lock_guard<std::mutex> lock(mu_);
  std::map<int, Json> gpus;
  std::map<int, std::vector<double>> util, mem;
  for (const HistoryTick& h : history_) {
    if (h.t_ms < since_ms) continue;
    for (const gpu::GpuInfo& g : h.gpus) {
      auto [it, fresh] = gpus.try_emplace(g.index);
      if (fresh) {
        it->second = {{"index", g.index},
                      {"uuid", g.uuid},
                      {"name", g.name},
                      {"memory_total_bytes",
                       g.memory_total_bytes ? Json(*g.memory_total_bytes) : Json(nullptr)},
                      {"t", Json::array()}};
      }
      it->second["t"].push_back(h.t_ms);
      util[g.index].push_back(Opt(g.utilization_gpu_pct));
      mem[g.index].push_back(Opt(g.memory_used_bytes));
    }
  }
  Json out = {
      {"simulated", simulated_}, {"interval_ms", opts_.interval_ms}, {"gpus", Json::array()}};
  for (auto& [index, g] : gpus) {
    g["utilization_pct"] = Column(util[index]);
    g["memory_used_bytes"] = Column(mem[index]);
    out["gpus"].push_back(std::move(g));
  }
  return out;
}

}  // namespace lathe::telemetry

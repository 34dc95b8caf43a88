// The daemon's side of telemetry (telemetry/, docs/telemetry.md): the store
// and the sampler, the runs it samples, the warnings as run events, and what
// the API reads.
#include <sys/stat.h>

#include <spdlog/spdlog.h>

#include "lathe/common/i18n.h"
#include "lathe/daemon/daemon.h"
#include "lathe/os/files.h"
#include "lathe/telemetry/metrics_json.h"

namespace lathe::daemon {

using run::RunState;
using state::RunRecord;

Status Daemon::InitTelemetry() {
  const TelemetryOptions& t = opts_.telemetry;
  if (!t.enabled) return Status::OK();
  telemetry::StoreOptions so;
  so.max_bytes = t.max_bytes;
  const std::string path = paths_.home + "/telemetry.db";
  auto store = telemetry::TelemetryStore::Open(path, so);
  if (!store.ok()) {
    // Telemetry is an aid: a damaged file must not keep the daemon from its runs.
    spdlog::warn("telemetry off: {}: {}", path, store.status().ToString());
    return Status::OK();
  }
  telemetry_ = std::move(store).value();
  // Run ids and pids are for the API's access rules alone, as the state database is.
  for (const char* side : {"", "-wal", "-shm"})
    (void)os::Chmod(path + side, 0600);  // a side file SQLite has not made yet is fine
  os::ProcessTable& table = t.processes ? *t.processes : os::RealProcessTable();
  sampler_ = std::make_unique<telemetry::Sampler>(t.sampler, *gpu_source_, *telemetry_, table,
                                                  clock_, TelemetryHooks());
  return Status::OK();
}

telemetry::Sampler::Hooks Daemon::TelemetryHooks() {
  telemetry::Sampler::Hooks h;
  h.targets = [this] {
    std::vector<telemetry::SampleTarget> out;
    MutexLock lock(&mu_);
    auto running = store_->InStates({RunState::kRunning});
    if (!running.ok()) return out;
    for (const RunRecord& r : *running) {
      if (r.backend != backend_->Name()) continue;
      const exec::AttemptRef ref = RefOf(r);
      telemetry::SampleTarget t;
      t.processes.run_id = r.id;
      t.processes.pids = backend_->Pids(ref);
      t.processes.cgroup_dirs = backend_->CgroupDirs(ref);
      t.gpus = r.gpus;
      out.push_back(std::move(t));
    }
    return out;
  };
  h.on_warning = [this](const std::string& run_id, const telemetry::UsageWarning& w) {
    Json data = {{"msg_id", w.msg_id}, {"msg_args", w.args}};
    MsgArgs args;
    for (const auto& [k, v] : w.args) args.push_back({k, v});
    MutexLock lock(&mu_);
    // Best effort: an event only tells; what it tells of is stored already.
    (void)store_->AddEvent(run_id, "warning", Tr(w.msg_id, Lang::kEn, args), data, clock_.NowMs());
    Notify();
  };
  return h;
}

Result<Json> Daemon::RunMetrics(const Caller& caller, const std::string& ref, int64_t since_ms) {
  ASSIGN_OR_RETURN(RunRecord r, Access(caller, ref, AccessAction::kRead));
  if (!telemetry_) return Status::Msg(Code::kFailedPrecondition, "telemetry.disabled", {});
  auto t = telemetry_->Read(r.id, since_ms);
  telemetry::RunTelemetry empty;
  if (!t.ok()) {
    if (!t.status().IsNotFound()) return t.status();
    empty.run_id = r.id;
    empty.meta.simulated = inventory_.simulated;
    empty.meta.interval_ms = opts_.telemetry.sampler.interval_ms;
  }
  return telemetry::MetricsJson(t.ok() ? *t : empty, telemetry_->options().tiers, since_ms);
}

Result<Json> Daemon::GpuHistory(int64_t since_ms) {
  if (!sampler_) return Status::Msg(Code::kFailedPrecondition, "telemetry.disabled", {});
  return sampler_->History(since_ms);
}

}  // namespace lathe::daemon

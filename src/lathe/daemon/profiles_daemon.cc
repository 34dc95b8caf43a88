// GET /profiles: the configured resource profiles, what each maps to, and
// whether it fits now.
#include <set>

#include "lathe/daemon/daemon.h"
#include "lathe/sched/scheduler.h"

namespace lathe::daemon {
namespace {

Json Reason(const Status& s) {
  Json args = Json::object();
  for (const auto& a : s.args()) args[a.key] = a.value;
  return {{"msg_id", s.msg_id()}, {"args", std::move(args)}, {"message", s.message()}};
}

}  // namespace

Json Daemon::ProfilesJson() {
  std::set<int> held;  // GPUs of active runs on this node
  {
    MutexLock lock(&mu_);
    if (auto active = store_->InStates(
            {run::RunState::kStarting, run::RunState::kRunning, run::RunState::kStopping});
        active.ok()) {
      for (const auto& r : *active) held.insert(r.gpus.begin(), r.gpus.end());
    }
  }
  const sched::NodeState node = NodeOf();
  Json out = Json::array();
  for (const auto& [name, p] : opts_.profiles) {
    run::RunSpec spec;
    spec.profile = name;
    spec.gpus = p.gpus.value_or(0);
    spec.gpu_type = p.gpu_type;
    spec.cpus = p.cpus.value_or(0);
    spec.memory_bytes = p.memory_bytes.value_or(0);
    spec.pool = p.pool;
    Json e = {{"name", name}, {"fields", run::ProfileFieldsJson(p)}};
    if (!ResolvePool(spec).ok()) {
      e["pool"] = p.pool;
      e["fits"] = "never";
      out.push_back(std::move(e));
      continue;
    }
    e["pool"] = spec.pool.empty() ? std::string(run::kLocalPool) : spec.pool;
    const exec::ExecutionBackend* b = BackendFor(spec);
    if (b == nullptr || b->Caps().places_runs) {
      e["fits"] = "unknown";  // the cluster decides; its idle nodes are not asked yet
    } else if (Status fit = CheckFitsNode(spec); !fit.ok()) {
      e["fits"] = "never";
      e["reason"] = Reason(AsProfileRefusal(spec, fit));
    } else {
      int free = 0;
      for (int g : sched::MatchingGpus(node, spec.gpu_type)) free += held.count(g) ? 0 : 1;
      e["free_gpus"] = free;
      e["fits"] = free >= spec.gpus ? "yes" : "no";
      if (free < spec.gpus) {
        e["reason"] = Reason(
            Status::Msg(Code::kUnavailable, "profiles.why.free_gpus",
                        {{"free", std::to_string(free)}, {"gpus", std::to_string(spec.gpus)}}));
      }
    }
    out.push_back(std::move(e));
  }
  return {{"profiles", std::move(out)}};
}

}  // namespace lathe::daemon

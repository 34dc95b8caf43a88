// GET /profiles: the configured resource profiles, what each maps to, and
// whether it fits now.
#include <algorithm>
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

// Whether `p` fits the cluster `pool` describes (one sinfo, shared and
// reused by the backend): never without its partition or GPU type, or with
// more GPUs than the partition has; yes when that many are free now.
// A partition's GPUs are summed over its nodes: a profile needs them on one.
// `gpus` is the profile's in all (per node times its nodes).
void ClusterFit(const std::string& pool, const run::Profile& p, int gpus,
                const exec::PoolDescription& d, Json& e) {
  if (!d.error.ok()) {
    e["fits"] = "unknown";
    e["reason"] = Reason(d.error);
    return;
  }
  const std::string& wanted = p.partition.empty() ? d.partition : p.partition;
  const exec::Partition* part = nullptr;
  for (const auto& x : d.partitions) {
    if (wanted.empty() ? x.is_default : x.name == wanted) part = &x;
  }
  if (part == nullptr) {
    e["fits"] = "never";
    e["reason"] =
        Reason(Status::Msg(Code::kNotFound, "profiles.why.no_partition",
                           {{"partition", wanted.empty() ? "(default)" : wanted}, {"pool", pool}}));
    return;
  }
  e["partition"] = part->name;
  const auto& types = part->gpu_types;
  if (!p.gpu_type.empty() && std::none_of(types.begin(), types.end(), [&](const std::string& t) {
        return sched::GpuTypeMatches(t, p.gpu_type);
      })) {
    e["fits"] = "never";
    e["reason"] = Reason(Status::Msg(Code::kNotFound, "profiles.why.no_gpu_type",
                                     {{"gpu_type", p.gpu_type}, {"partition", part->name}}));
    return;
  }
  const int nodes = p.nodes.value_or(1);
  if (nodes > 1 && nodes > part->nodes_total) {
    e["fits"] = "never";
    e["reason"] = Reason(Status::Msg(Code::kNotFound, "profiles.why.partition_nodes",
                                     {{"nodes", std::to_string(nodes)},
                                      {"total", std::to_string(part->nodes_total)},
                                      {"partition", part->name}}));
    return;
  }
  if (gpus > part->gpus_total) {
    e["fits"] = "never";
    e["reason"] = Reason(Status::Msg(Code::kNotFound, "profiles.why.partition_gpus",
                                     {{"gpus", std::to_string(gpus)},
                                      {"total", std::to_string(part->gpus_total)},
                                      {"partition", part->name}}));
    return;
  }
  const int free = part->gpus_total - part->gpus_used;
  e["free_gpus"] = free;
  e["idle_nodes"] = part->nodes_idle;
  e["fits"] = free >= gpus ? "yes" : "no";
  if (free < gpus) {
    e["reason"] =
        Reason(Status::Msg(Code::kUnavailable, "profiles.why.free_gpus",
                           {{"free", std::to_string(free)}, {"gpus", std::to_string(gpus)}}));
  }
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
    spec.nodes = p.nodes.value_or(1);
    Json e = {{"name", name}, {"fields", run::ProfileFieldsJson(p)}};
    if (!ResolvePool(spec).ok()) {
      e["pool"] = p.pool;
      e["fits"] = "never";
      out.push_back(std::move(e));
      continue;
    }
    e["pool"] = spec.pool.empty() ? std::string(run::kLocalPool) : spec.pool;
    const exec::ExecutionBackend* b = BackendFor(spec);
    if (b == nullptr) {
      e["fits"] = "unknown";
    } else if (spec.nodes > 1 && !b->Caps().multi_node) {
      e["fits"] = "never";  // as Submit refuses it
      e["reason"] = Reason(Status::Msg(Code::kInvalidArgument, "profile.nodes_not_supported",
                                       {{"profile", name},
                                        {"nodes", std::to_string(spec.nodes)},
                                        {"pool", e["pool"].get<std::string>()}}));
    } else if (b->Caps().places_runs) {
      // Asked without mu_: sinfo may take a while.
      ClusterFit(spec.pool, p, spec.gpus * spec.nodes, opts_.pools.at(spec.pool)->Describe(), e);
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

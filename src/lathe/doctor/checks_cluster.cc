#include "lathe/doctor/checks_cluster.h"

#include <fmt/format.h>

#include <cstdlib>
#include <functional>

#include "lathe/doctor/probes.h"

namespace lathe::doctor {
namespace {

constexpr size_t kMaxShownOutput = 300;

// The first non-empty line of stdout, else of stderr, trimmed and cut.
std::string FirstLine(const CommandProbe& c) {
  for (const std::string* s : {&c.out, &c.err}) {
    size_t a = 0;
    while (a < s->size()) {
      size_t b = s->find('\n', a);
      if (b == std::string::npos) b = s->size();
      std::string line = s->substr(a, b - a);
      line.erase(0, line.find_first_not_of(" \t\r"));
      line.erase(line.find_last_not_of(" \t\r") + 1);
      if (!line.empty())
        return line.size() > kMaxShownOutput ? line.substr(0, kMaxShownOutput) : line;
      a = b + 1;
    }
  }
  return c.exit_code != 0 ? fmt::format("exit code {}", c.exit_code) : "no output";
}

std::string Joined(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : ", ") + s;
  return out;
}

std::string Seconds(int64_t ms) { return fmt::format("{} s", (ms + 999) / 1000); }

std::string CommandText(const CommandProbe& c) {
  std::string out;
  for (const auto& a : c.argv) out += (out.empty() ? "" : " ") + a;
  return out.size() > kMaxShownOutput ? out.substr(0, kMaxShownOutput) + "…" : out;
}

// A pool's SLURM_CONF as the texts show it.
std::string ConfText(const ClusterProbe& p) { return p.slurm_conf; }

// The finding every multi check gives when there is no pool to look at.
std::optional<Finding> NothingToCheck(const Facts& f) {
  if (f.cluster_skipped_fast) return Finding{"cluster.skipped.fast", {}};
  if (!f.cluster.config_error.empty()) {
    return Finding{"cluster.skipped.no_config",
                   {{"file", f.cluster.config_file}, {"error", f.cluster.config_error}}};
  }
  if (!f.cluster_probed || f.clusters.empty()) {
    return Finding{"cluster.skipped.no_pool", {{"file", f.cluster.config_file}}};
  }
  return std::nullopt;
}

std::vector<Finding> PerPool(const Facts& f,
                             const std::function<Finding(const ClusterProbe&)>& check) {
  if (auto none = NothingToCheck(f)) return {*none};
  std::vector<Finding> out;
  for (const auto& p : f.clusters) out.push_back(check(p));
  return out;
}

bool ControllerUp(const ClusterProbe& p) {
  return p.ping.state == CommandState::kDone && p.ping.exit_code == 0;
}

Finding Unreachable(const ClusterProbe& p) {
  return {"cluster.skipped.unreachable", {{"pool", p.pool.name}}};
}

// A command that could not give an answer: timed out or not startable.
std::optional<Finding> CommandProblem(const ClusterProbe& p, const CommandProbe& c,
                                      const std::string& check) {
  MsgArgs a = {{"pool", p.pool.name}, {"command", CommandText(c)}, {"slurm_conf", ConfText(p)}};
  if (c.state == CommandState::kTimedOut) {
    a.push_back({"timeout", Seconds(c.timeout_ms)});
    return Finding{check + ".timeout", a};
  }
  if (c.state == CommandState::kFailed) {
    a.push_back({"error", c.error});
    return Finding{check + ".cannot_run", a};
  }
  return std::nullopt;
}

}  // namespace

Finding CheckClusterPools(const SystemView&, const Facts& f) {
  const ClusterOptions& c = f.cluster;
  // The daemon's own report (GET /api/v1/doctor) is --fast and names no config.
  if (c.config_file.empty() && f.cluster_skipped_fast) return {"cluster.skipped.fast", {}};
  if (c.config_unreadable) {
    return {"cluster.skipped.no_config", {{"file", c.config_file}, {"error", c.config_error}}};
  }
  if (!c.config_error.empty()) {
    return {"cluster.pools.no_config", {{"file", c.config_file}, {"error", c.config_error}}};
  }
  if (c.pools.empty()) return {"cluster.pools.none", {{"file", c.config_file}}};
  std::vector<std::string> list;
  for (const auto& p : c.pools) {
    list.push_back(fmt::format("{} (partition {}, shared_dir {})", p.name,
                               p.partition.empty() ? "default" : p.partition, p.shared_dir));
  }
  return {"cluster.pools.ok", {{"file", c.config_file}, {"pools", Joined(list)}}};
}

std::vector<Finding> CheckClusterPing(const SystemView&, const Facts& f) {
  return PerPool(f, [](const ClusterProbe& p) -> Finding {
    if (auto bad = CommandProblem(p, p.ping, "cluster.ping")) return *bad;
    MsgArgs a = {{"pool", p.pool.name}, {"output", FirstLine(p.ping)}, {"slurm_conf", ConfText(p)}};
    return {ControllerUp(p) ? "cluster.ping.ok" : "cluster.ping.down", a};
  });
}

std::vector<Finding> CheckClusterMunge(const SystemView&, const Facts& f) {
  return PerPool(f, [](const ClusterProbe& p) -> Finding {
    std::string sock = p.munge_socket.empty() ? "munge's default socket" : p.munge_socket;
    MsgArgs a = {{"pool", p.pool.name}, {"socket", sock}, {"slurm_conf", ConfText(p)}};
    if (p.munge.state == CommandState::kFailed && p.munge.argv.empty()) {
      return {"cluster.munge.missing", a};
    }
    if (auto bad = CommandProblem(p, p.munge, "cluster.munge")) {
      bad->args.push_back({"socket", sock});
      return *bad;
    }
    std::string status;
    size_t at = p.munge.out.find("STATUS:");
    if (at != std::string::npos) {
      size_t end = p.munge.out.find('\n', at);
      status = p.munge.out.substr(at + 7, end == std::string::npos ? end : end - at - 7);
      status.erase(0, status.find_first_not_of(" \t"));
    }
    if (p.munge.exit_code == 0 && status.starts_with("Success")) return {"cluster.munge.ok", a};
    a.push_back({"status", status.empty() ? FirstLine(p.munge) : status});
    return {"cluster.munge.fail", a};
  });
}

std::vector<Finding> CheckClusterClock(const SystemView&, const Facts& f) {
  return PerPool(f, [](const ClusterProbe& p) -> Finding {
    if (!ControllerUp(p)) return Unreachable(p);
    MsgArgs a = {{"pool", p.pool.name}};
    if (auto bad = CommandProblem(p, p.sdiag, "cluster.clock")) return *bad;
    int64_t server = SdiagServerTimeMs(p.sdiag.out);
    if (p.sdiag.exit_code != 0 || server < 0) {
      a.push_back({"output", FirstLine(p.sdiag)});
      return {"cluster.clock.unknown", a};
    }
    // sdiag gives whole seconds: the controller's clock lies in [server, server + 1 s).
    int64_t local = (p.sdiag.start_ms + p.sdiag.end_ms) / 2;
    int64_t skew = 0;
    if (local < server) skew = server - local;
    if (local > server + 1000) skew = local - (server + 1000);
    int64_t slack = (p.sdiag.end_ms - p.sdiag.start_ms) / 2;
    skew = skew > slack ? skew - slack : 0;
    // Signed: this host minus the controller.
    double shown = static_cast<double>(local < server ? -skew : skew) / 1000;
    a.push_back({"skew", fmt::format("{:+.1f} s", shown)});
    if (skew > kClockSkewFailMs) return {"cluster.clock.fail", a};
    if (skew > kClockSkewWarnMs) return {"cluster.clock.warn", a};
    return {"cluster.clock.ok", a};
  });
}

std::vector<Finding> CheckClusterPartition(const SystemView&, const Facts& f) {
  return PerPool(f, [](const ClusterProbe& p) -> Finding {
    if (!ControllerUp(p)) return Unreachable(p);
    MsgArgs a = {{"pool", p.pool.name}, {"slurm_conf", ConfText(p)}};
    if (auto bad = CommandProblem(p, p.sinfo, "cluster.partition")) return *bad;
    if (p.sinfo.exit_code != 0) {
      a.push_back({"output", FirstLine(p.sinfo)});
      return {"cluster.partition.error", a};
    }
    auto parts = ParseSinfoNodes(p.sinfo.out);
    std::vector<std::string> names;
    const SinfoPartition* hit = nullptr;
    for (const auto& s : parts) {
      names.push_back(s.name + (s.is_default ? " (default)" : ""));
      if (p.pool.partition.empty() ? s.is_default : s.name == p.pool.partition) hit = &s;
    }
    a.push_back({"partitions", names.empty() ? "none" : Joined(names)});
    if (hit == nullptr) {
      if (p.pool.partition.empty()) return {"cluster.partition.no_default", a};
      a.push_back({"partition", p.pool.partition});
      return {"cluster.partition.not_found", a};
    }
    a.push_back({"partition", hit->name});
    a.push_back({"nodes", std::to_string(hit->nodes)});
    a.push_back({"up", std::to_string(hit->nodes_up)});
    a.push_back({"gpus", std::to_string(hit->gpus)});
    a.push_back({"types", hit->gpu_types.empty() ? "-" : Joined(hit->gpu_types)});
    if (hit->nodes_up == 0) return {"cluster.partition.no_node_up", a};
    if (hit->gpus == 0) return {"cluster.partition.no_gpus", a};
    return {"cluster.partition.ok", a};
  });
}

std::vector<Finding> CheckClusterSharedDir(const SystemView& view, const Facts& f) {
  std::string me = view.UserName();
  return PerPool(f, [&](const ClusterProbe& p) -> Finding {
    MsgArgs a = {{"pool", p.pool.name}, {"dir", p.pool.shared_dir}};
    if (!p.shared_exists) return {"cluster.shared_dir.missing", a};
    a.push_back({"probed", p.shared_probe_dir});
    a.push_back({"user", p.shared_user});
    if (p.shared_writable.ok()) return {"cluster.shared_dir.ok", a};
    a.push_back({"error", p.shared_writable.message()});
    // A root doctor probed as `nobody`: users may still have directories an
    // administrator made for them.
    if (p.shared_user != me) return {"cluster.shared_dir.not_open", a};
    return {"cluster.shared_dir.not_writable", a};
  });
}

namespace {

// What the test job's run says when it gave no report; nullopt when it did.
std::optional<Finding> JobProblem(const ClusterProbe& p, const JobReport& r) {
  MsgArgs a = {{"pool", p.pool.name}, {"slurm_conf", ConfText(p)}};
  if (p.job_skipped_no_flag) return Finding{"cluster.skipped.no_flag", {{"pool", p.pool.name}}};
  if (!ControllerUp(p)) return Unreachable(p);
  if (!p.shared_exists) return Finding{"cluster.shared_job.no_dir", a};
  if (p.job.state == CommandState::kTimedOut) {
    a.push_back({"timeout", Seconds(p.job.timeout_ms)});
    return Finding{"cluster.shared_job.timeout", a};
  }
  if (p.job.state != CommandState::kDone || !r.complete) {
    a.push_back({"error", p.job.state == CommandState::kDone ? FirstLine(p.job) : p.job.error});
    return Finding{"cluster.shared_job.failed", a};
  }
  return std::nullopt;
}

}  // namespace

std::vector<Finding> CheckClusterSharedJob(const SystemView&, const Facts& f) {
  return PerPool(f, [](const ClusterProbe& p) -> Finding {
    JobReport r = ParseJobReport(p.job.out);
    if (auto bad = JobProblem(p, r)) return *bad;
    MsgArgs a = {{"pool", p.pool.name}, {"node", r.node}, {"marker", p.marker_path}};
    if (!r.marker_written) {
      a.push_back({"error", r.marker_error.empty() ? "-" : r.marker_error});
      return {"cluster.shared_job.cannot_write", a};
    }
    return {p.marker_seen ? "cluster.shared_job.ok" : "cluster.shared_job.not_shared", a};
  });
}

std::vector<Finding> CheckClusterLathePath(const SystemView&, const Facts& f) {
  return PerPool(f, [](const ClusterProbe& p) -> Finding {
    JobReport r = ParseJobReport(p.job.out);
    if (auto bad = JobProblem(p, r)) {
      // The job's own failure is told once, by cluster.shared_job.
      if (bad->outcome.starts_with("cluster.shared_job.")) {
        return {"cluster.lathe_path.no_job", {{"pool", p.pool.name}}};
      }
      return *bad;
    }
    MsgArgs a = {{"pool", p.pool.name}, {"node", r.node}, {"path", p.lathe_path}};
    if (!r.lathe_found) return {"cluster.lathe_path.missing", a};
    a.push_back({"version", r.lathe_version});
    return {"cluster.lathe_path.ok", a};
  });
}

}  // namespace lathe::doctor

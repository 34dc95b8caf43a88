#include "lathe/exec/slurm/slurm_batch.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "lathe/exec/local_backend.h"

namespace lathe::exec {
namespace {

constexpr char kDefaultBinDir[] = "/usr/bin";
constexpr int64_t kMaxSignalSeconds = 65535;  // Slurm's limit for --signal's @time

int64_t CeilDiv(int64_t n, int64_t d) { return (n + d - 1) / d; }

}  // namespace

SlurmAttemptPaths SlurmPaths(const std::string& shared_dir, const std::string& user,
                             const std::string& run_id, int attempt) {
  SlurmAttemptPaths p;
  std::string base = shared_dir;
  while (base.size() > 1 && base.back() == '/') base.pop_back();
  p.user_dir = base + "/" + user;
  p.run_dir = p.user_dir + "/" + run_id;
  p.log = p.run_dir + "/log";
  p.dir = p.run_dir + "/" + std::to_string(attempt);
  p.launch = p.dir + "/launch.json";
  p.script = p.dir + "/job.sh";
  p.slurm_out = p.dir + "/slurm.out";
  p.monitor = p.dir + "/monitor.json";
  p.exit = p.dir + "/exit.json";
  p.checkpoints = p.dir + "/checkpoints.jsonl";
  return p;
}

std::string SlurmUserDirName(uid_t uid, const std::string& name) {
  return name.empty() ? std::to_string(uid) : name;
}

std::string ShellQuote(std::string_view s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  out += "'";
  return out;
}

std::string SlurmFilenameLiteral(std::string_view path) {
  if (path.find('\\') != std::string_view::npos) return std::string(path);
  std::string out;
  for (char c : path) {
    out += c;
    if (c == '%') out += '%';
  }
  return out;
}

std::string SlurmBatchScript(const std::string& lathe_path, const std::string& launch_path) {
  return fmt::format(
      "#!/bin/sh\n"
      "# Written by Lathe: the run is described in launch.json; its monitor holds it.\n"
      "# srun inside the run passes the run's environment on (the job itself had none).\n"
      "export SLURM_EXPORT_ENV=ALL\n"
      "exec {} __monitor {} -\n",
      ShellQuote(lathe_path), ShellQuote(launch_path));
}

std::string SlurmWorkdir(const LaunchRequest& req) {
  if (!req.workdir.empty()) return req.workdir;
  return req.user.home.empty() ? "/" : req.user.home;
}

int64_t SlurmTimeLimitMinutes(int64_t time_limit_ms) {
  return std::max<int64_t>(1, CeilDiv(time_limit_ms, 60'000));
}

SlurmJobShape SlurmJobShapeOf(const SlurmPoolOptions& pool, const LaunchRequest& req) {
  SlurmJobShape s;
  s.nodes = std::max(1, req.nodes);
  s.partition = req.partition.empty() ? pool.partition : req.partition;
  s.account = pool.account;
  s.qos = pool.qos;
  if (req.gpu_count > 0) {
    s.gres = req.gpu_type.empty() ? fmt::format("gpu:{}", req.gpu_count)
                                  : fmt::format("gpu:{}:{}", req.gpu_type, req.gpu_count);
  }
  if (req.cpus > 0) s.cpus_per_task = static_cast<int64_t>(std::ceil(req.cpus));
  if (req.memory_bytes > 0) s.memory_mib = CeilDiv(static_cast<int64_t>(req.memory_bytes), 1 << 20);
  if (req.time_limit_ms > 0) s.time_minutes = SlurmTimeLimitMinutes(req.time_limit_ms);
  return s;
}

std::vector<std::string> SbatchArgv(const std::string& sbatch, const SlurmPoolOptions& pool,
                                    const LaunchRequest& req, const SlurmAttemptPaths& paths) {
  const std::string out = SlurmFilenameLiteral(paths.slurm_out);
  const SlurmJobShape shape = SlurmJobShapeOf(pool, req);
  std::vector<std::string> argv = {
      sbatch,
      "--parsable",
      "--job-name=lathe-" + req.run_id,
      fmt::format("--comment=lathe:{}:{}", req.run_id, req.attempt),
      "--chdir=" + SlurmWorkdir(req),
      "--output=" + out,
      "--error=" + out,
      "--no-requeue",
      // sbatch runs with SlurmCommandEnv's few variables, which are all the
      // job inherits; the monitor builds the run's environment from
      // launch.json. Not --export=NONE: it makes slurmd load the user's login
      // environment first (--get-user-env), seconds per job.
      "--export=ALL",
      fmt::format("--nodes={}", shape.nodes),
  };
  // One task per node: the monitor on the first; a torchrun run's srun
  // starts one torchrun on each (exec/torchrun.h).
  if (shape.nodes > 1) argv.push_back("--ntasks-per-node=1");
  if (const int64_t s = SlurmWarnSeconds(pool, req); s > 0) {
    argv.push_back(fmt::format("--signal=B:USR1@{}", s));
  }
  if (!shape.partition.empty()) argv.push_back("--partition=" + shape.partition);
  if (!shape.account.empty()) argv.push_back("--account=" + shape.account);
  if (!shape.qos.empty()) argv.push_back("--qos=" + shape.qos);
  if (!shape.gres.empty()) argv.push_back("--gres=" + shape.gres);
  if (shape.cpus_per_task > 0)
    argv.push_back(fmt::format("--cpus-per-task={}", shape.cpus_per_task));
  if (shape.memory_mib > 0) argv.push_back(fmt::format("--mem={}M", shape.memory_mib));
  if (shape.time_minutes > 0) argv.push_back(fmt::format("--time={}", shape.time_minutes));
  argv.push_back(paths.script);
  return argv;
}

int64_t SlurmWarnSeconds(const SlurmPoolOptions& pool, const LaunchRequest& req) {
  if (pool.signal_grace_ms <= 0) return 0;
  int64_t s = std::min(kMaxSignalSeconds, CeilDiv(pool.signal_grace_ms, 1000));
  // A warning as long as the limit itself would stop the run as it starts.
  if (req.time_limit_ms > 0) s = std::min(s, SlurmTimeLimitMinutes(req.time_limit_ms) * 30);
  return s;
}

LaunchConfig SlurmLaunchConfig(const SlurmPoolOptions& pool, const LaunchRequest& req,
                               const SlurmAttemptPaths& paths) {
  LaunchConfig c;
  c.run_id = req.run_id;
  c.attempt = req.attempt;
  c.argv = req.argv;
  LaunchRequest unplaced = req;
  unplaced.gpus.clear();  // Slurm places them: CUDA_VISIBLE_DEVICES comes from the job
  c.env = LocalBackend::Environment(unplaced);
  // `lathe __torchrun` runs the pool's srun and scontrol (exec/torchrun.h).
  if (!pool.bin_dir.empty()) c.env["LATHE_SLURM_BIN_DIR"] = pool.bin_dir;
  c.inherit_env = kSlurmInheritedEnv;
  c.workdir = SlurmWorkdir(req);
  c.uid = req.user.uid;
  c.gid = req.user.gid;
  c.groups = req.user.groups;
  c.log_path = paths.log;
  c.setup_argv = req.setup_argv;
  c.readonly_paths = req.readonly_paths;
  c.monitor_path = paths.monitor;
  c.exit_path = paths.exit;
  c.umask = req.umask;
  c.log_max_bytes = req.log_max_bytes;
  if (!req.checkpoint_dir.empty()) {
    c.checkpoint_dir = req.checkpoint_dir;
    c.checkpoint_records = paths.checkpoints;
  }
  // The job's time limit as --time gives it, less the warning.
  if (req.time_limit_ms > 0) {
    const int64_t warn = SlurmWarnSeconds(pool, req);
    if (warn > 0) c.warn_after_ms = (SlurmTimeLimitMinutes(req.time_limit_ms) * 60 - warn) * 1000;
  }
  return c;
}

std::string SlurmCommandPath(const SlurmPoolOptions& pool, std::string_view name) {
  std::string dir = pool.bin_dir.empty() ? kDefaultBinDir : pool.bin_dir;
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  return dir + "/" + std::string(name);
}

std::map<std::string, std::string> SlurmCommandEnv(const SlurmPoolOptions& pool,
                                                   const RunUser* user) {
  std::map<std::string, std::string> env;
  const std::string bin = pool.bin_dir.empty() ? kDefaultBinDir : pool.bin_dir;
  env["PATH"] = bin == kDefaultBinDir ? std::string(kDefaultRunPath)
                                      : bin + ":" + std::string(kDefaultRunPath);
  if (!pool.slurm_conf.empty()) env["SLURM_CONF"] = pool.slurm_conf;
  if (user != nullptr) {
    env["HOME"] = user->home.empty() ? "/" : user->home;
    if (!user->name.empty()) env["USER"] = env["LOGNAME"] = user->name;
  }
  return env;
}

}  // namespace lathe::exec

#include "lathe/exec/local_backend.h"

#include <algorithm>
#include <csignal>
#include <cstdlib>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "lathe/exec/monitor_spawn.h"
#include "lathe/os/command.h"
#include "lathe/os/files.h"
#include "lathe/os/process.h"
#include "lathe/os/stream_socket.h"
#include "lathe/run/ports.h"

namespace lathe::exec {
namespace {

std::string MonitorPath(const AttemptRef& a) { return a.attempt_dir + "/monitor.json"; }
std::string ExitPath(const std::string& attempt_dir) { return attempt_dir + "/exit.json"; }

// A monitor started just before the daemon died may still be starting: give
// it a moment to write monitor.json (it does so before answering).
Result<MonitorRecord> WaitForMonitorRecord(const std::string& dir, os::Env& env, os::Clock& clock) {
  constexpr int kWaitMs = 2000, kStepMs = 50;
  if (!env.FileExists(dir + "/launch.json")) return Status::NotFound("no launch.json");
  for (int waited = 0; waited < kWaitMs; waited += kStepMs) {
    auto mon = ReadMonitorRecord(dir + "/monitor.json", env);
    if (mon.ok() || env.FileExists(dir + "/exit.json")) return mon;
    clock.SleepMs(kStepMs);
  }
  return ReadMonitorRecord(dir + "/monitor.json", env);
}

}  // namespace

Json LocalHandleToJson(const LocalHandle& h) {
  Json j = {{"cgroup_dirs", h.cgroup_dirs}};
  if (h.monitor_pid > 0) {
    j["monitor_pid"] = h.monitor_pid;
    j["monitor_start"] = h.monitor_start;
    j["child_pid"] = h.child_pid;
  }
  if (!h.endpoints.empty()) {
    Json e = Json::array();
    for (const auto& p : h.endpoints) {
      e.push_back({{"name", p.name}, {"kind", p.kind}, {"address", p.address}});
    }
    j["endpoints"] = std::move(e);
  }
  if (h.isolated_network) j["network"] = "isolated";
  if (h.netns_pid > 0) {
    j["netns_pid"] = h.netns_pid;
    j["netns_start"] = h.netns_start;
  }
  return j;
}

LocalHandle LocalHandleFromJson(const Json& j) {
  LocalHandle h;
  if (!j.is_object()) return h;
  h.monitor_pid = j.value("monitor_pid", 0);
  h.monitor_start = j.value("monitor_start", uint64_t{0});
  h.child_pid = j.value("child_pid", 0);
  h.isolated_network = j.value("network", "") == "isolated";
  h.netns_pid = j.value("netns_pid", 0);
  h.netns_start = j.value("netns_start", uint64_t{0});
  if (auto it = j.find("cgroup_dirs"); it != j.end() && it->is_array()) {
    for (const auto& d : *it) {
      if (d.is_string()) h.cgroup_dirs.push_back(d.get<std::string>());
    }
  }
  if (auto it = j.find("endpoints"); it != j.end() && it->is_array()) {
    for (const auto& e : *it) {
      if (!e.is_object()) continue;
      h.endpoints.push_back({e.value("name", ""), e.value("kind", ""), e.value("address", "")});
    }
  }
  return h;
}

LocalBackend::LocalBackend(LocalBackendOptions options)
    : opts_(std::move(options)),
      env_(opts_.env ? *opts_.env : os::RealEnv()),
      clock_(opts_.clock ? *opts_.clock : os::RealClock()) {}

Capabilities LocalBackend::Caps() const {
  Capabilities c;
  c.places_runs = false;
  c.memory_limit = opts_.cgroups.memory;
  c.cpu_limit = opts_.cgroups.cpu;
  c.private_shm = opts_.can_mount;
  c.isolated_network = opts_.can_mount;
  c.images = opts_.podman.has_value();
  c.note = opts_.cgroups.note;
  if (!c.images && !opts_.images_note.empty()) {
    c.note += (c.note.empty() ? "" : "\n") + ("images: " + opts_.images_note);
  }
  return c;
}

Status LocalBackend::Check(const run::RunSpec& spec, const RunUser& user) const {
  (void)user;  // any local user may run; the path checks are the daemon's
  if (!spec.image.empty() && !opts_.podman) {
    return Status::Msg(Code::kInvalidArgument, "spec.images_unavailable",
                       {{"note", opts_.images_note}});
  }
  if (spec.shm_bytes > 0 && !opts_.can_mount) {
    return Status::Msg(Code::kInvalidArgument, "spec.shm_needs_root",
                       {{"user", opts_.daemon_user}});
  }
  if (spec.network == run::Network::kIsolated && !opts_.can_mount) {
    return Status::Msg(Code::kInvalidArgument, "spec.network_needs_root",
                       {{"user", opts_.daemon_user}});
  }
  if (spec.workspace.readonly && !opts_.can_mount) {
    return Status::Msg(Code::kInvalidArgument, "workspace.readonly_needs_root",
                       {{"user", opts_.daemon_user}});
  }
  if (spec.memory_bytes > 0 && !opts_.cgroups.memory) {
    return Status::Msg(
        Code::kInvalidArgument, "spec.limit_unavailable",
        {{"field", "memory"}, {"controller", "memory"}, {"note", opts_.cgroups.note}});
  }
  if (spec.cpus > 0 && !opts_.cgroups.cpu) {
    return Status::Msg(Code::kInvalidArgument, "spec.limit_unavailable",
                       {{"field", "cpus"}, {"controller", "cpu"}, {"note", opts_.cgroups.note}});
  }
  return Status::OK();
}

std::map<std::string, std::string> LocalBackend::Environment(const LaunchRequest& req) {
  std::map<std::string, std::string> env;
  env["PATH"] = kDefaultRunPath;
  if (!req.user.name.empty()) {
    env["HOME"] = req.user.home;
    env["USER"] = env["LOGNAME"] = req.user.name;
    env["SHELL"] = req.user.shell;
  }
  for (const char* keep : {"LANG", "LC_ALL", "TZ"}) {
    if (const char* v = std::getenv(keep)) env[keep] = v;
  }
  for (const auto& [k, v] : req.env) env[k] = v;
  std::string devices;
  for (int g : req.gpus) devices += (devices.empty() ? "" : ",") + std::to_string(g);
  // Exactly its GPUs; an empty list hides every GPU from a CPU-only run.
  env["CUDA_VISIBLE_DEVICES"] = devices;
  env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID";
  return env;
}

Result<Json> LocalBackend::Prepare(const LaunchRequest& req) {
  LocalHandle h;
  h.isolated_network = req.isolated_network;
  if (opts_.cgroups.mode != os::CgroupSupport::Mode::kNone) {
    os::CgroupLimits limits;
    if (req.memory_bytes) limits.memory_bytes = req.memory_bytes;
    if (req.cpus > 0) limits.cpus = req.cpus;
    auto cg = os::RunCgroup::Create(opts_.cgroups, req.run_id + "-" + std::to_string(req.attempt),
                                    limits);
    if (cg.ok()) {
      h.cgroup_dirs = (*cg)->dirs();
    } else if (req.memory_bytes || req.cpus > 0) {
      return Status(cg.status().code(), "cannot set up the run's cgroup: " + cg.status().message());
    }
  }
  ASSIGN_OR_RETURN(h.endpoints, AllocateEndpoints(req));
  return LocalHandleToJson(h);
}

Result<std::vector<Endpoint>> LocalBackend::AllocateEndpoints(const LaunchRequest& req) {
  size_t tcp = 0;
  for (const auto& p : req.ports) tcp += p.port != 0 ? 1 : 0;
  std::vector<int> picked;
  if (!req.isolated_network && tcp > 0) {
    auto free = os::PickFreeLoopbackPorts(tcp);
    if (!free.ok()) {
      return Status(free.status().code(),
                    "cannot pick the run's ports: " + free.status().message());
    }
    picked = std::move(*free);
  }
  std::vector<Endpoint> out;
  size_t next = 0;
  for (const auto& p : req.ports) {
    if (p.port == 0) {
      out.push_back(Endpoint{p.name, "unix", p.socket});
      continue;
    }
    const int at = req.isolated_network ? p.port : picked[next++];
    out.push_back(Endpoint{p.name, "tcp", fmt::format("127.0.0.1:{}", at)});
  }
  return out;
}

Result<Launched> LocalBackend::Launch(const LaunchRequest& req, const Json& prepared) {
  LocalHandle h = LocalHandleFromJson(prepared);
  if (h.endpoints.size() != req.ports.size()) {  // prepared without them
    ASSIGN_OR_RETURN(h.endpoints, AllocateEndpoints(req));
  }
  LaunchConfig c;
  c.run_id = req.run_id;
  c.attempt = req.attempt;
  c.argv = req.argv;
  c.env = Environment(req);
  // Over the spec's own variables: the proxy connects where these say.
  std::vector<int> listen_ports;
  for (const auto& e : h.endpoints) {
    listen_ports.push_back(
        e.kind == "tcp" ? std::atoi(e.address.substr(e.address.rfind(':') + 1).c_str()) : 0);
  }
  for (auto& [k, v] : run::PortEnvironment(req.ports, listen_ports)) c.env[k] = std::move(v);
  c.workdir = !req.workdir.empty() ? req.workdir : !req.user.home.empty() ? req.user.home : "/";
  c.uid = req.user.uid;
  c.gid = req.user.gid;
  c.groups = req.user.groups;
  c.log_path = req.log_path;
  c.shm_bytes = req.shm_bytes;
  c.isolated_network = req.isolated_network;
  c.cgroup_dirs = h.cgroup_dirs;
  c.monitor_path = req.attempt_dir + "/monitor.json";
  c.exit_path = ExitPath(req.attempt_dir);
  c.kill_grace_ms = opts_.leftover_grace_ms;
  c.umask = req.umask;
  c.setup_argv = req.setup_argv;
  c.readonly_paths = req.readonly_paths;
  c.log_max_bytes = req.log_max_bytes;
  if (!req.image_id.empty()) RETURN_IF_ERROR(MakeContainerLaunch(req, h, c));
  const std::string launch = req.attempt_dir + "/launch.json";
  // Not fsynced: if the machine loses power before the monitor reads it, the
  // run never started and recovery requeues it.
  RETURN_IF_ERROR(
      os::WriteFileAtomic(launch, LaunchToJson(c).dump(), 0600, os::Durability::kNoSync));
  ASSIGN_OR_RETURN(SpawnResult spawned,
                   SpawnMonitor(opts_.self_exe, launch, req.attempt_dir + "/monitor.log"));
  h.monitor_pid = spawned.monitor_pid;
  if (spawned.monitor_pid > 0) {
    std::lock_guard lock(mu_);
    monitors_.insert(spawned.monitor_pid);
  }
  h.child_pid = spawned.child_pid;
  if (spawned.start_error.empty()) {
    auto mon = ReadMonitorRecord(c.monitor_path);
    h.monitor_start =
        mon.ok() ? mon->monitor_start : os::ProcessStartTime(h.monitor_pid).value_or(0);
    if (req.isolated_network) {
      h.netns_pid = h.child_pid;
      h.netns_start = mon.ok() ? mon->child_start : os::ProcessStartTime(h.child_pid).value_or(0);
    }
  }
  Launched out;
  out.handle = LocalHandleToJson(h);
  out.start_error = spawned.start_error;
  out.what = fmt::format("pid {}", h.child_pid);
  return out;
}

std::vector<ContainerMount> LocalBackend::ContainerMounts(const LaunchRequest& req,
                                                          const LaunchConfig& c) {
  std::vector<std::pair<std::string, bool>> paths;  // path, read-only
  auto add = [&](const std::string& p, bool readonly) {
    if (p.empty() || p == "/" || p[0] != '/') return;
    for (auto& [q, ro] : paths) {
      if (q == p) {
        ro = ro || readonly;
        return;
      }
    }
    paths.emplace_back(p, readonly);
  };
  add(c.workdir, false);
  for (const char* name :
       {"LATHE_WORKSPACE", "LATHE_CHECKPOINT_DIR", "LATHE_SECRETS_DIR", "LATHE_NOTEBOOK_DIR"}) {
    if (auto it = c.env.find(name); it != c.env.end()) add(it->second, false);
  }
  for (const auto& p : req.readonly_paths) add(p, true);
  std::vector<ContainerMount> out;
  for (size_t i = 0; i < paths.size(); ++i) {
    out.push_back({paths[i].first, fmt::format("{}/mnt/{}", req.attempt_dir, i), paths[i].second});
  }
  return out;
}

Status LocalBackend::MakeContainerLaunch(const LaunchRequest& req, const LocalHandle& h,
                                         LaunchConfig& c) {
  if (!opts_.podman) {
    return Status::Msg(Code::kFailedPrecondition, "spec.images_unavailable",
                       {{"note", opts_.images_note}});
  }
  // A user without a home directory (a service account): an image run that
  // names no working directory starts in the image's "/", nothing mounted
  // for it, rather than failing to mount a path that is not there.
  if (req.workdir.empty() && c.workdir == req.user.home && !os::Exists(c.workdir)) {
    c.workdir = "/";
  }
  ContainerRun r;
  r.run_id = req.run_id;
  r.attempt = req.attempt;
  r.image_id = req.image_id;
  r.uid = req.user.uid;
  r.gid = req.user.gid;
  r.groups = req.user.groups;
  r.umask = req.umask;
  r.workdir = c.workdir;
  r.mounts = ContainerMounts(req, c);
  r.shm_bytes = req.shm_bytes;
  r.argv = c.argv;
  if (!req.gpus.empty() && opts_.container_devices) {
    ASSIGN_OR_RETURN(r.devices, opts_.container_devices(req.gpus));
  }
  const std::string* memory_dir = nullptr;
  for (const auto& d : h.cgroup_dirs) {
    if (d.find("/memory/") != std::string::npos || memory_dir == nullptr) memory_dir = &d;
  }
  if (memory_dir != nullptr) {
    auto parent = os::CgroupPathInHierarchy(*memory_dir);
    if (parent.ok()) r.cgroup_parent = *parent;
  }
  std::map<std::string, std::string> env = c.env;
  for (const auto& k : req.setup_env_only) env.erase(k);
  ASSIGN_OR_RETURN(std::string env_text, ContainerEnvFile(env, req.env.count("PATH") > 0));
  r.env_file = req.attempt_dir + "/container.env";
  RETURN_IF_ERROR(os::WriteFileAtomic(r.env_file, env_text, 0600, os::Durability::kNoSync));
  c.container = PodmanRun(*opts_.podman, r);
  c.container.sidecar_argv = req.sidecar_argv;
  // podman gives the image's run these itself.
  c.shm_bytes = 0;
  c.readonly_paths.clear();
  return Status::OK();
}

void LocalBackend::RemoveContainer(const AttemptRef& a) {
  auto text = os::ReadFile(a.attempt_dir + "/launch.json");
  if (!text.ok()) return;
  auto j = ParseJson(*text);
  if (!j.ok()) return;
  auto c = LaunchFromJson(*j);
  if (!c.ok() || c->container.cleanup_argv.empty()) return;
  auto rm = os::RunCommandWithEnv(c->container.cleanup_argv, c->container.env, 60000);
  if (!rm.ok() || rm->exit_code != 0) {
    spdlog::warn("run {}: cannot remove the container of attempt {}: {}", a.run_id, a.attempt,
                 rm.ok() ? rm->err : rm.status().ToString());
  }
}

std::vector<AttemptStatus> LocalBackend::Poll(const std::vector<AttemptRef>& attempts) {
  // Reap monitors that were our children (re-adopted ones are not).
  {
    std::lock_guard lock(mu_);
    std::erase_if(monitors_, [](pid_t pid) { return os::TryReap(pid).has_value(); });
  }
  std::vector<AttemptStatus> out;
  out.reserve(attempts.size());
  for (const auto& a : attempts) out.push_back(PollOne(a));
  return out;
}

AttemptStatus LocalBackend::PollOne(const AttemptRef& a) {
  const std::string exit_path = ExitPath(a.attempt_dir);
  AttemptStatus s;
  if (auto exit = ReadExitRecord(exit_path, env_); exit.ok()) {
    s.phase = AttemptPhase::kExited;
    s.exit = *exit;
    return s;
  }
  LocalHandle h = LocalHandleFromJson(a.handle);
  if (h.monitor_pid <= 0) return s;  // still being launched
  if (env_.ProcessAlive(h.monitor_pid, h.monitor_start)) {
    s.phase = AttemptPhase::kRunning;
    return s;
  }
  // The monitor may have written exit.json just before exiting.
  if (auto exit = ReadExitRecord(exit_path, env_); exit.ok()) {
    s.phase = AttemptPhase::kExited;
    s.exit = *exit;
  } else {
    s.phase = AttemptPhase::kGone;
    s.why = "its monitor process died without recording an exit status";
  }
  return s;
}

Status LocalBackend::Signal(const AttemptRef& a, StopSignal signal) {
  LocalHandle h = LocalHandleFromJson(a.handle);
  if (h.monitor_pid <= 0) return Status::OK();  // told once it has started
  // The monitor forwards SIGTERM to the tree; SIGUSR2 makes it SIGKILL the tree.
  return os::SendSignal(h.monitor_pid, signal == StopSignal::kGraceful ? SIGTERM : SIGUSR2);
}

std::vector<std::string> LocalBackend::CgroupDirs(const AttemptRef& a) const {
  std::vector<std::string> dirs = LocalHandleFromJson(a.handle).cgroup_dirs;
  if (dirs.empty()) {
    const std::string name = a.run_id + "-" + std::to_string(a.attempt);
    const auto& cg = opts_.cgroups;
    for (const std::string& base : {cg.memory_base, cg.pids_base, cg.cpu_base}) {
      if (!base.empty()) dirs.push_back(base + "/" + name);
    }
  }
  std::vector<std::string> existing;
  for (const auto& d : dirs) {
    if (os::Exists(d) && std::find(existing.begin(), existing.end(), d) == existing.end()) {
      existing.push_back(d);
    }
  }
  return existing;
}

void LocalBackend::Release(const AttemptRef& a) {
  // The monitor removes its cgroups when the run ends; what is left belongs
  // to an attempt that was lost or never started, and must not keep GPUs busy.
  std::vector<std::string> dirs = CgroupDirs(a);
  if (dirs.empty()) return;
  RemoveContainer(a);  // its monitor did not: the container may be left
  auto cg = os::RunCgroup::Open(dirs);
  Status st = cg.ok() ? (*cg)->KillAll(SIGKILL) : cg.status();
  if (cg.ok()) {
    Status destroyed = (*cg)->Destroy();
    if (st.ok()) st = destroyed;
  }
  if (!st.ok()) {
    spdlog::warn("run {}: cannot remove the cgroups of attempt {}: {}", a.run_id, a.attempt,
                 st.ToString());
  }
}

Readoption LocalBackend::Readopt(const AttemptRef& a) {
  Readoption out;
  const std::string exit_path = ExitPath(a.attempt_dir);
  auto exited = [&](ExitRecord e) {
    out.what = Found::kExited;
    out.exit = std::move(e);
    return out;
  };
  if (auto exit = ReadExitRecord(exit_path, env_); exit.ok()) return exited(*exit);
  LocalHandle h = LocalHandleFromJson(a.handle);
  auto mon = ReadMonitorRecord(MonitorPath(a), env_);
  if (!mon.ok() && h.monitor_pid <= 0) {  // it was being launched
    mon = WaitForMonitorRecord(a.attempt_dir, env_, clock_);
    if (!mon.ok()) {
      if (auto exit = ReadExitRecord(exit_path, env_); exit.ok()) return exited(*exit);
      out.what = Found::kNeverStarted;  // no monitor ever answered
      out.handle = a.handle;
      return out;
    }
  }
  if (mon.ok() && env_.ProcessAlive(mon->monitor_pid, mon->monitor_start)) {
    h.monitor_pid = mon->monitor_pid;
    h.monitor_start = mon->monitor_start;
    h.child_pid = mon->child_pid;
    if (h.isolated_network) {
      h.netns_pid = mon->child_pid;
      h.netns_start = mon->child_start;
    }
    h.cgroup_dirs = CgroupDirs(a);
    out.what = Found::kAlive;
    out.handle = LocalHandleToJson(h);
    return out;
  }
  // Its monitor may be writing exit.json and exiting at this very moment:
  // read again after finding it gone, so a run that ended is never lost.
  if (auto exit = ReadExitRecord(exit_path, env_); exit.ok()) return exited(*exit);
  out.what = Found::kGone;
  out.handle = a.handle;
  out.why = "its monitor process vanished while the daemon was down; the exit status is unknown";
  return out;
}

std::vector<Endpoint> LocalBackend::Endpoints(const AttemptRef& a) {
  LocalHandle h = LocalHandleFromJson(a.handle);
  for (auto& e : h.endpoints) {
    if (e.kind != "tcp") continue;  // a unix socket is the file system's, in any namespace
    e.netns_pid = h.netns_pid;
    e.netns_start = h.netns_start;
  }
  return h.endpoints;
}

std::vector<pid_t> LocalBackend::Pids(const AttemptRef& a) {
  std::vector<std::string> dirs = CgroupDirs(a);
  if (!dirs.empty()) {
    if (auto cg = os::RunCgroup::Open(dirs); cg.ok()) {
      std::vector<pid_t> pids = (*cg)->Pids();
      if (!pids.empty()) return pids;
    }
  }
  LocalHandle h = LocalHandleFromJson(a.handle);
  // Only while its monitor lives: a pid of a run long gone may be reused.
  if (h.child_pid <= 0 || !env_.ProcessAlive(h.monitor_pid, h.monitor_start)) return {};
  std::vector<pid_t> pids = {h.child_pid};
  for (pid_t p : os::Descendants(h.child_pid)) pids.push_back(p);
  return pids;
}

std::string LocalBackend::LogPath(const std::string& run_dir) const { return run_dir + "/log"; }

}  // namespace lathe::exec

// The local backend: each attempt runs on this machine under a monitor
// process of its own (monitor.h), in cgroups that limit it and find all of
// its processes, as the run's user. The daemon's scheduler places attempts
// on this node's GPUs (places_runs is false).
//
// Per attempt, in the attempt directory: launch.json, monitor.json,
// exit.json (attempt_records.h) and monitor.log (the monitor's own output).
// The handle:
//   {"monitor_pid": 123, "monitor_start": 456, "child_pid": 124,
//    "cgroup_dirs": ["/sys/fs/cgroup/memory/.../lathe/r-x-1", ...],
//    "endpoints": [...], "network": "isolated", "netns_pid": 124, "netns_start": 789}
// (prepared: "cgroup_dirs", "endpoints" and "network"). Prepare picks a free
// loopback port for each tcp port of a run on the host network (the
// program is told it as LATHE_PORT_<port>, run/ports.h); an isolated run
// keeps its declared ports. An isolated run's ports are
// in the network namespace of its main process (netns_pid, with its start
// time), which Endpoints() reports with each tcp endpoint. The monitor holds the run's process: it
// outlives the daemon, and a restarted daemon re-adopts it by pid and start
// time (guarding against pid reuse).
//
// Thread-safe as backend.h asks: it keeps no state besides its options.
#pragma once

#include <functional>
#include <mutex>
#include <set>
#include <string>

#include "lathe/exec/backend.h"
#include "lathe/exec/container/podman.h"
#include "lathe/os/cgroup.h"
#include "lathe/os/clock.h"
#include "lathe/os/env.h"

namespace lathe::exec {

struct LocalBackendOptions {
  std::string self_exe;       // the lathe binary, for `lathe __monitor`
  os::CgroupSupport cgroups;  // os::DetectCgroups(), once at daemon start
  bool can_mount = false;  // running as root: a private /dev/shm and network namespace are possible
  std::string daemon_user;       // for messages ("the daemon runs as ...")
  int leftover_grace_ms = 2000;  // the monitor: SIGTERM -> SIGKILL for leftovers
  // How exit.json and monitor.json are read and monitors looked for; tests
  // inject faults through it. Not owned.
  os::Env* env = nullptr;      // null: os::RealEnv()
  os::Clock* clock = nullptr;  // null: os::RealClock(); waits in Readopt
  // Where podman works (a root daemon with podman and runc): runs in images
  // (Capabilities::images). Null: none, and `images_note` says why.
  std::optional<PodmanSetup> podman;
  std::string images_note;
  // The podman --device values that give a run in an image exactly the GPUs
  // it was placed on (CDI names or device nodes), or why it cannot have them
  // (a stale CDI spec): the daemon's, which knows the machine's GPUs. Null:
  // none are given.
  std::function<Result<std::vector<std::string>>(const std::vector<int>& gpus)> container_devices;
};

// The PATH a run's program gets unless its spec sets one.
inline constexpr char kDefaultRunPath[] =
    "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

// The handle's fields, parsed.
struct LocalHandle {
  pid_t monitor_pid = 0;
  uint64_t monitor_start = 0;
  pid_t child_pid = 0;
  std::vector<std::string> cgroup_dirs;
  // The spec's ports, in its order: 127.0.0.1:<the port chosen in Prepare,
  // or the declared one of an isolated run> or the socket's path.
  std::vector<Endpoint> endpoints;
  bool isolated_network = false;  // the run has a network namespace of its own
  pid_t netns_pid = 0;            // whose namespace (the run's main process), once started
  uint64_t netns_start = 0;       // its start time
};
Json LocalHandleToJson(const LocalHandle& h);
LocalHandle LocalHandleFromJson(const Json& j);  // missing fields stay zero

class LocalBackend final : public ExecutionBackend {
 public:
  explicit LocalBackend(LocalBackendOptions options);

  static constexpr std::string_view kName = "local";
  std::string_view Name() const override { return kName; }
  Capabilities Caps() const override;
  Status Check(const run::RunSpec& spec, const RunUser& user) const override;
  Result<Json> Prepare(const LaunchRequest& request) override;
  Result<Launched> Launch(const LaunchRequest& request, const Json& prepared) override;
  std::vector<AttemptStatus> Poll(const std::vector<AttemptRef>& attempts) override;
  Status Signal(const AttemptRef& attempt, StopSignal signal) override;
  void Release(const AttemptRef& attempt) override;
  Readoption Readopt(const AttemptRef& attempt) override;
  std::vector<Endpoint> Endpoints(const AttemptRef& attempt) override;
  // The processes of the attempt's cgroups, or its main process and its
  // descendants where there are none.
  std::vector<pid_t> Pids(const AttemptRef& attempt) override;
  // The attempt's cgroups from the handle, or found by name: a daemon that
  // died between Prepare and storing the handle left them unrecorded.
  std::vector<std::string> CgroupDirs(const AttemptRef& attempt) const override;
  std::string LogPath(const std::string& run_dir) const override;

  // The complete environment of an attempt's program: the base (PATH, HOME,
  // USER, LOGNAME, SHELL; LANG, LC_ALL and TZ from the daemon's own), the
  // request's variables over it, and exactly the placed GPUs over those.
  static std::map<std::string, std::string> Environment(const LaunchRequest& request);
  // Where each of the request's ports is served: a tcp port of a run on
  // the host network at a free loopback port picked now, an isolated run's
  // at its declared port, a socket at its path.
  static Result<std::vector<Endpoint>> AllocateEndpoints(const LaunchRequest& request);
  // The directories a run in an image sees at their own paths: its working
  // directory, workspace, checkpoint, secrets and notebook directories (from `c`'s
  // env), read-only ones as the request says; each staged in the attempt's
  // directory (ContainerMount).
  static std::vector<ContainerMount> ContainerMounts(const LaunchRequest& request,
                                                     const LaunchConfig& c);

 private:
  AttemptStatus PollOne(const AttemptRef& attempt);
  // Turns `c` into a run in the request's image.
  Status MakeContainerLaunch(const LaunchRequest& request, const LocalHandle& h, LaunchConfig& c);
  // podman rm -f of an attempt's container, when its launch.json has one.
  void RemoveContainer(const AttemptRef& attempt);

  const LocalBackendOptions opts_;
  os::Env& env_;
  os::Clock& clock_;

  // The monitors this process spawned and has not reaped yet. Only these
  // are reaped: waitpid(-1) would also take the exit status of a command
  // another thread runs (sbatch, sinfo) and waits for.
  std::mutex mu_;
  std::set<pid_t> monitors_;  // guarded by mu_
};

}  // namespace lathe::exec

// The execution seam: how the daemon has a run's attempt executed, whatever
// executes it. The daemon (daemon/) owns the run state machine — queueing,
// placement, retries, requeue after preemption, `lost`, deadlines, the
// checkpoints — and talks to an ExecutionBackend for everything that touches
// the attempt's processes. The local backend (local_backend.h: a monitor
// process per attempt, cgroups) runs on this machine; the Slurm backend
// (slurm/slurm_backend.h: the same monitor inside a batch job, one backend
// per pool) on a cluster; a container wrapper inside the local backend
// comes later.
//
// An attempt's life, as the daemon drives it:
//
//   Check(spec)                      at submission: can this backend honour it?
//   Prepare(request) -> prepared     the run is committed `starting`
//   Launch(request, prepared) -> handle
//   Poll({attempts}) -> statuses     every loop pass, one call for all attempts
//   Signal(attempt, graceful|kill)   stop, preempt, deadline; kill after the grace
//   Release(attempt)                 the attempt is over (ended, lost, failed to start)
//   Readopt(attempt)                 at daemon start, for each attempt it left active
//
// The handle is the backend's durable memory of an attempt: JSON that the
// daemon stores in the run record ({backend, handle}) once Launch returned,
// hands back in every later call, and keeps across daemon restarts. Nothing
// else about an attempt survives a restart, so a backend keeps no state of
// its own that Readopt could not rebuild from the handle and its files.
//
// Ownership and threads. The daemon owns the backend (or a test does) and
// outlives every call. Check, Prepare, Poll, Signal, Release and Readopt are
// called with the daemon's mutex held — from the supervisor thread, from API
// threads (Check, and Signal for a stop) or from the thread that creates the
// daemon (Readopt, at start) — so they are serialised, and must be quick.
// Launch is called without the mutex, from one thread per starting attempt,
// several at once, and may block (a handshake, a submission to a cluster);
// it must be safe concurrently with itself and with the other calls.
//
// Identity. Every request carries the run's user (RunUser): a backend runs
// the program, and touches any path of the user's, as that user.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "lathe/common/json.h"
#include "lathe/common/status.h"
#include "lathe/exec/attempt_records.h"
#include "lathe/run/spec.h"

namespace lathe::exec {

// Who a run runs as, resolved by the daemon from the run's uid.
struct RunUser {
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<gid_t> groups;  // supplementary groups
  std::string name;           // "" when the uid has no passwd entry
  std::string home;
  std::string shell;
};

// What a backend can do, so the daemon can refuse a spec it cannot honour
// (Check) instead of failing at start. Reported by `lathe status` too.
struct Capabilities {
  // false: the daemon's scheduler (sched/) places attempts on this node's
  // GPUs and passes them in LaunchRequest::gpus; true: the backend places
  // them itself (a cluster) and the daemon only queues.
  bool places_runs = false;
  bool memory_limit = false;  // spec.memory is enforced
  bool cpu_limit = false;     // spec.cpus is enforced
  bool private_shm = false;   // spec.shm: a private /dev/shm (a mount namespace)
  bool images = false;        // runs in a container image
  bool ports = false;         // a run may listen on ports reported as endpoints
  // spec.network isolated: a network namespace of the run's own, entered by
  // the proxy (Endpoint::netns_pid)
  bool isolated_network = false;
  bool multi_node = false;  // one attempt on several nodes
  std::string note;         // why something is missing, for people
};
Json CapabilitiesToJson(const Capabilities& c);

// One attempt to start, everything resolved by the daemon.
struct LaunchRequest {
  std::string run_id;
  std::string run_name;
  int attempt = 0;  // 1, 2, ...
  RunUser user;
  std::vector<std::string> argv;
  // The run's own environment: the spec's variables and Lathe's (LATHE_RUN_ID,
  // LATHE_CHECKPOINT_DIR...). The backend adds the base (PATH, HOME, USER...)
  // below it and the GPU selection above it.
  std::map<std::string, std::string> env;
  std::string workdir;    // "" = the user's home
  std::vector<int> gpus;  // placed by sched/; empty when the backend places runs
  // How many GPUs the run asks for (spec.gpus), for a backend that places
  // runs itself (Capabilities::places_runs: a cluster's --gres=gpu:N); the
  // daemon fills it for every backend, and one that is given `gpus` ignores it.
  int gpu_count = 0;
  // For a backend that places runs itself: the GPUs' type (spec.gpu_type; a
  // cluster's --gres=gpu:TYPE:N) and the partition to use instead of the
  // pool's (spec.partition); "" = none. The local backend is given `gpus`
  // already placed on matching GPUs and ignores both.
  std::string gpu_type;
  std::string partition;
  // spec.nodes: how many nodes the attempt spans (Capabilities::multi_node);
  // gpu_count is per node.
  int nodes = 1;
  // What is left of the run's max_duration when the attempt starts, for a
  // backend that can end it itself (Slurm's --time); 0 = no limit. The
  // daemon's own deadline still applies.
  int64_t time_limit_ms = 0;
  double cpus = 0;  // 0 = no limit
  uint64_t memory_bytes = 0;
  uint64_t shm_bytes = 0;
  unsigned umask = 022;
  std::vector<run::PortSpec> ports;  // what the run serves (spec.ports)
  bool isolated_network = false;     // spec.network isolated
  std::string attempt_dir;           // the daemon's directory for this attempt (exists)
  std::string log_path;              // the run's log, appended to by every attempt
  // A step run as the user before argv (a read-only workspace's clone,
  // daemon/workspaces.h), in the run's cgroups, its output in the log,
  // started in "/"; a non-zero exit ends the attempt with that status.
  std::vector<std::string> setup_argv;
  // Variables of `env` the setup step alone gets, not a program in an image
  // (a notebook's token, which the setup step moves into a file).
  std::vector<std::string> setup_env_only;
  // For a run in an image: a program of the host's run beside the container
  // as the user, in the run's cgroups and network, ended with it (a command
  // replica's relay; exec/attempt_records.h ContainerLaunch::sidecar_argv).
  std::vector<std::string> sidecar_argv;
  // Bind-mounted read-only in the run's mount namespace after the setup
  // step, before argv starts (needs Capabilities::private_shm: a root daemon).
  std::vector<std::string> readonly_paths;
  // The most of the run's log kept on disk (run/log_writer.h); 0: no cap.
  uint64_t log_max_bytes = 0;
  // spec.checkpoints.dir, resolved ("" = none): a backend whose runs write
  // where the daemon cannot watch (a cluster's nodes) records each finished
  // checkpoint there and counts them in AttemptStatus::checkpoints_recorded.
  std::string checkpoint_dir;
  // The container image the program runs in (Capabilities::images): its id
  // (64 hex digits: what the daemon resolved spec.image to at submission)
  // and the name the user gave, for messages. Both "": on the host.
  std::string image_id;
  std::string image;
};

// An attempt the daemon asks about after Prepare.
struct AttemptRef {
  std::string run_id;
  int attempt = 0;
  std::string attempt_dir;
  RunUser user;  // uid and name only: the full identity came with the LaunchRequest
  Json handle;   // from Launch; {} while the attempt is still being launched
};

// What Launch did. A program that could not be started (no such command, a
// workdir the user cannot enter) is not an error of the call: start_error
// says why, and the attempt has ended.
struct Launched {
  Json handle;
  std::string start_error;
  std::string what;  // for the run's event: "pid 1234", "job 56"
};

enum class AttemptPhase {
  kStarting,  // not known to be running yet (Launch has not returned)
  kRunning,
  kExited,  // ended; `exit` says how
  kGone,    // its supervision vanished without recording how it ended
};

struct AttemptStatus {
  AttemptPhase phase = AttemptPhase::kStarting;
  ExitRecord exit;  // when kExited
  std::string why;  // when kGone: for the run's reason, in the backend's terms
  // What the backend last heard about the attempt, for people ("why it
  // waits"): a cluster's state and reason, "PENDING (Resources)"; "" when
  // the backend has nothing to add (the local one).
  std::string note;
  // When kExited: the cluster's word for an end that was not the program's
  // doing — "PREEMPTED", "NODE_FAIL", "TIMEOUT" — so the daemon can treat it
  // as it treats a preemption or a deadline here; "" otherwise.
  // kPartitionTimeLimit: the job reached the time limit of its cluster's
  // partition, which is shorter than the run's own (or the run has none):
  // the run goes on in a new attempt, from its last checkpoint.
  std::string cluster_end;
  // How many finished checkpoints the attempt's node has recorded so far
  // (LaunchRequest::checkpoint_dir); the daemon captures one snapshot when
  // the count grows. Always 0 for a backend whose runs the daemon watches
  // itself (the local one).
  int64_t checkpoints_recorded = 0;
};

inline constexpr std::string_view kPartitionTimeLimit = "PARTITION_TIME_LIMIT";

enum class StopSignal {
  kGraceful,  // SIGTERM to the whole tree; the program may save and exit
  kKill,      // SIGKILL to the whole tree
};

// What Readopt found of an attempt the previous daemon left active.
enum class Found {
  kAlive,         // still running: `handle` (possibly updated) supervises it
  kExited,        // ended while no daemon watched: `exit`
  kNeverStarted,  // the program was never started: the run may be requeued
  kGone,          // vanished; how it ended is unknown
};
struct Readoption {
  Found what = Found::kGone;
  Json handle;
  ExitRecord exit;
  std::string why;  // when kGone
};

// An address a run serves on (a notebook, a service replica).
struct Endpoint {
  std::string name;     // the spec's port name ("p8888", "tb")
  std::string kind;     // "tcp" | "unix"
  std::string address;  // "127.0.0.1:8888", "/run/.../sock"
  // A tcp endpoint of an isolated run: the address is inside the network
  // namespace of this process (the run's main one), identified with its
  // start time against pid reuse (os::OpenNetworkNamespace). 0: the host's.
  pid_t netns_pid = 0;
  uint64_t netns_start = 0;
};

// A partition of a cluster pool as its scheduler reports it (a Slurm pool:
// one sinfo, exec/slurm/slurm_sinfo.h). Counts are over the partition's
// nodes; a node in two partitions counts in both.
struct Partition {
  std::string name;
  bool is_default = false;   // where a job that names no partition goes
  std::string state;         // the partition's own: "up", "down", "drain", "inact"
  int64_t max_time_ms = -1;  // the longest a job may ask for (MaxTime); -1 = no limit
  int nodes_total = 0;
  int nodes_idle = 0;
  int nodes_allocated = 0;  // running jobs, wholly or partly (allocated, mixed, completing)
  int nodes_down = 0;       // down, drained, draining, failing, not responding
  int cpus_total = 0;
  int cpus_allocated = 0;
  int gpus_total = 0;                  // GRES "gpu" of the nodes
  int gpus_used = 0;                   // allocated to jobs
  std::vector<std::string> gpu_types;  // sorted, once each ("a100", "fake"); untyped GPUs: none
  int64_t memory_mb = 0;               // the nodes' memory together
};

// What a pool says about itself for `lathe pools` (ExecutionBackend::Describe).
struct PoolDescription {
  // Where the pool's config sends jobs ("" = the cluster's default / none).
  std::string partition, account, qos;
  std::vector<Partition> partitions;  // none for this machine
  // Why `partitions` is empty though the pool has some: the cluster could not
  // be asked (a catalog message naming the pool: slurm.sinfo_failed). OK else.
  Status error;
};

class ExecutionBackend {
 public:
  virtual ~ExecutionBackend() = default;

  // Stored in the run record beside the handle; stable across versions.
  virtual std::string_view Name() const = 0;
  virtual Capabilities Caps() const = 0;
  // OK when the backend can run `spec` as `user`; otherwise why not, with a
  // catalog message naming the field (spec.limit_unavailable...).
  virtual Status Check(const run::RunSpec& spec, const RunUser& user) const = 0;

  // Reserves what the attempt needs before it is launched (cgroups) and
  // returns it as a preliminary handle. An error fails the attempt.
  virtual Result<Json> Prepare(const LaunchRequest& request) = 0;
  // Starts the attempt (see the thread rule above). An error means nothing
  // was started; Release is called either way.
  virtual Result<Launched> Launch(const LaunchRequest& request, const Json& prepared) = 0;
  // The state of each attempt, in the order given. Also the backend's
  // periodic housekeeping (the local one reaps its children here), so the
  // daemon calls it every pass, with an empty list when nothing runs.
  virtual std::vector<AttemptStatus> Poll(const std::vector<AttemptRef>& attempts) = 0;
  virtual Status Signal(const AttemptRef& attempt, StopSignal signal) = 0;
  // Kills whatever is left of the attempt and frees what Prepare reserved.
  // Idempotent; called once the attempt is over, however it ended.
  virtual void Release(const AttemptRef& attempt) = 0;
  // After a daemon restart: is the attempt still there? May wait briefly for
  // an attempt that was being launched when the daemon died.
  virtual Readoption Readopt(const AttemptRef& attempt) = 0;

  // Where the attempt can be reached (none for a plain job). A tcp port of a
  // run on the host network is one the backend chose for the attempt and
  // told the program through the environment (run/ports.h).
  virtual std::vector<Endpoint> Endpoints(const AttemptRef& attempt) = 0;
  // The attempt's live processes on this machine, to tell what they listen
  // on when a port does not answer (run/ports.h); empty when the backend
  // cannot see them (a cluster's nodes).
  virtual std::vector<pid_t> Pids([[maybe_unused]] const AttemptRef& attempt) { return {}; }
  // The attempt's cgroup directories on this machine (absolute), for its
  // CPU and memory figures (telemetry); empty when it has none or the
  // backend cannot see them.
  virtual std::vector<std::string> CgroupDirs([[maybe_unused]] const AttemptRef& attempt) const {
    return {};
  }
  // The pool's partitions and their load, for people (`lathe pools`). Unlike
  // the calls above it is made WITHOUT the daemon's mutex, from an API
  // thread, concurrently with any other call, and may block on the cluster
  // (bounded by the backend's own command timeout); a failure is the
  // description's `error`, never a hang. This machine's: nothing.
  virtual PoolDescription Describe() { return {}; }
  // The run's log, a file in the CRI format (run/log_format.h) that the
  // daemon's log reader reads and follows; `run_dir` is the daemon's
  // directory for the run.
  virtual std::string LogPath(const std::string& run_dir) const = 0;
};

}  // namespace lathe::exec

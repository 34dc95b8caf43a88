// The per-run monitor: a small process (`lathe __monitor`) that holds one run's
// process tree so that the run's output and exit status never depend on the
// daemon being alive (the conmon / containerd-shim design).
//
// The local backend (local_backend.h) writes a LaunchConfig to <attempt
// dir>/launch.json (attempt_records.h) and calls SpawnMonitor()
// (monitor_spawn.h). The monitor, in its own session:
//   1. becomes a child subreaper, so processes that setsid() and lose their
//      parent are re-parented to it and stay findable;
//   2. forks the run's process: it joins the run's cgroups, optionally gets a
//      private /dev/shm (mount namespace) and a network namespace of its own
//      with only loopback (network: isolated), drops to the run's user, chdirs and
//      execs. A failure at any step is reported back, never left "starting";
//   3. answers the daemon's handshake ("ok <pid>" or "err <reason>") and
//      writes monitor.json (its own and the child's pid and start time);
//   4. writes stdout/stderr to the run's log (CRI format, log_format.h)
//      through a LogWriter (log_writer.h): when the file takes nothing, the
//      output is held and the pipes are not read, for a bounded time; what is
//      lost after that is counted, marked in the log and in exit.json;
//   5. forwards SIGTERM (and SIGUSR1, Slurm's warning before a job's time
//      limit) to the whole tree as SIGTERM; SIGUSR2 means SIGKILL the tree;
//   6. when the main process exits, ends what is left of the tree, and
//      writes exit.json atomically: exit code or signal, OOM kill.
// The monitor forks before any thread is started (the checkpoint watch below
// is the only one), which makes fork-then-configure safe.
// This file is the monitor's side; monitor_spawn.h is the spawning side.
//
// Without a handshake (handshake fd "-": the Slurm backend's batch script
// execs `lathe __monitor <launch.json> -` on a compute node, as the run's
// user) the monitor does the same, except that: it is not root, so it
// switches to no user and refuses what needs root (CheckUnprivilegedLaunch)
// and a launch config for another uid; it first copies the variables named
// in launch.json's inherit_env from its own environment (what Slurm set:
// CUDA_VISIBLE_DEVICES, SLURM_*); a failure to start the run is written to
// exit.json (start_error) and stderr; and its exit status is the run's (the
// code, or 128 + the signal), so that Slurm's record of the job agrees.
//
// A launch config with a checkpoint_dir (Slurm jobs) also makes the monitor
// watch that directory on the node, once the run's process is started, and
// record each finished checkpoint (checkpoint_records.h); the watch is
// stopped, flushing what is pending, when the run has ended and before
// exit.json is written.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "lathe/common/status.h"

namespace lathe::exec {

// Watches a directory and calls back, on a thread of its own, once per
// settled burst of finished files with their paths relative to it. The
// returned function stops the watch, first calling back with what is
// pending. The binary wires in snap::Watcher (exec does not link snap/).
using DirWatchCallback = std::function<void(const std::vector<std::string>& paths)>;
using DirWatchStart =
    std::function<Result<std::function<void()>>(const std::string& dir, DirWatchCallback)>;

// The body of `lathe __monitor <launch_path> <handshake_fd>`; a negative
// handshake_fd (given as "-") means none. `watch` (may be empty: nothing is
// recorded) watches a checkpoint directory. Returns the process exit code.
int MonitorMain(const std::string& launch_path, int handshake_fd, const DirWatchStart& watch = {});

// The handshake argument of `lathe __monitor`: a descriptor number, or "-"
// for none (-1).
int ParseHandshakeFd(const char* arg);

}  // namespace lathe::exec

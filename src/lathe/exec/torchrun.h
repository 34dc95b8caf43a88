// `lathe __torchrun`: a torchrun run's first process (spec `torchrun: true`).
// The daemon puts it in front of the run's command (TorchrunWrapArgv); it
// starts torchrun the way the run's resources say, so that --nproc_per_node
// always equals the GPUs per node and --nnodes the nodes of the allocation:
//
//   one node (a local run, or a Slurm job of one node):
//     torchrun --standalone --nnodes=1 --nproc_per_node=N SCRIPT ARGS...
//   several nodes (inside a Slurm allocation of exactly NNODES nodes), on
//   the first node:
//     srun --nodes=M --ntasks=M --ntasks-per-node=1 --kill-on-bad-exit=1
//          LATHE __torchrun --node N M RUN -- SCRIPT ARGS...
//   and on each node (--node, one task per node):
//     torchrun --nnodes=M --nproc_per_node=N --rdzv_backend=c10d
//              --rdzv_endpoint=FIRST_NODE:PORT --rdzv_id=RUN SCRIPT ARGS...
//
// A command whose first word is a Python interpreter (python, python3,
// /usr/bin/python3.11) is given to torchrun with --no_python, as it is;
// otherwise torchrun runs it with its own Python.
//
// The program gets, besides torchrun's RANK/LOCAL_RANK/WORLD_SIZE:
// LATHE_NNODES, LATHE_GPUS_PER_NODE, LATHE_NODE_RANK (SLURM_NODEID on a node
// of the allocation, 0 on one node) and LATHE_HOSTFILE: a file with one node
// per line (WriteHostfile), removed when torchrun ends: `lathe __torchrun`
// runs torchrun as its child and waits for it (os::RunForegroundChild)
// instead of exec'ing it, and ends as torchrun ended. On several nodes torchrun is started with
// MASTER_ADDR (the allocation's first node as `scontrol show hostnames` lists it) and MASTER_PORT
// (29500 plus the job id modulo 1000: a job's nodes agree on it without talking), for launchers
// other than torchrun; torchrun's workers see the values torchrun sets itself. A node lost mid-run
// ends the step (--kill-on-bad-exit) and so the attempt; the daemon's next attempt resumes from the
// last checkpoint.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "lathe/common/status.h"

namespace lathe::exec {

inline constexpr int kTorchrunBasePort = 29500;
inline constexpr int kTorchrunPortRange = 1000;

// The arguments after `__torchrun`.
struct TorchrunArgs {
  bool on_node = false;  // --node: one task of the srun step, on its node
  int nproc_per_node = 1;
  int nnodes = 1;
  std::string run_id;
  std::vector<std::string> script;  // the run's command: the script and its arguments
};
// `[--node] NPROC NNODES RUN_ID -- SCRIPT [ARGS...]`; InvalidArgument otherwise.
Result<TorchrunArgs> ParseTorchrunArgs(const std::vector<std::string>& args);

// The run's argv with `lathe __torchrun` in front (daemon side): NPROC is
// the GPUs per node, or 1 without GPUs.
std::vector<std::string> TorchrunWrapArgv(const std::string& self_exe, int gpus_per_node, int nodes,
                                          const std::string& run_id,
                                          const std::vector<std::string>& command);

// What `lathe __torchrun` execs, and the variables it sets first.
struct TorchrunPlan {
  std::vector<std::string> argv;
  std::map<std::string, std::string> env;
  std::vector<std::string> hosts;  // the hostfile's lines; empty: no hostfile
};

// A pure function of the arguments, this process's variables `env` (SLURM_*,
// MASTER_*; LATHE_SLURM_BIN_DIR, the pool's bin_dir, where srun is) and the
// allocation's nodes `hosts` (ignored on one node).
// `self_exe` is the lathe binary that srun starts on every node.
// InvalidArgument when several nodes are asked for outside an allocation
// of exactly that many nodes.
Result<TorchrunPlan> PlanTorchrun(const TorchrunArgs& args, const std::string& self_exe,
                                  const std::map<std::string, std::string>& env,
                                  const std::vector<std::string>& hosts);

// The rendezvous port of a Slurm job: kTorchrunBasePort + job id modulo
// kTorchrunPortRange (kTorchrunBasePort when the id is not a number).
int TorchrunPort(const std::string& job_id);

// This user's hostfile directory under `tmp` ($TMPDIR, else /tmp):
// TMP/lathe-hosts-UID.
std::string HostfileDir(const std::string& tmp);

// Writes `hosts`, one a line, as a new file (O_EXCL|O_NOFOLLOW, mode 0600)
// named after the run and the job in HostfileDir(tmp), which is made (0700)
// when missing and refused (PermissionDenied) when it is a symlink or
// another user's; a file of the same name (an attempt killed outright left
// it) is replaced. Returns the file's path.
Result<std::string> WriteHostfile(const std::string& tmp, const std::string& run_id,
                                  const std::string& job, const std::vector<std::string>& hosts);

// `lathe __torchrun ARGS...` (argv[0] is lathe, argv[1] "__torchrun"): plans,
// writes the hostfile, sets the variables and runs torchrun (on one node, or
// one node of several: as its child, removing the hostfile after it; srun's
// side: exec'd). Returns torchrun's exit code (a signal that killed it
// kills this process too), 2 for bad arguments, 127 when nothing could be
// started.
int TorchrunMain(int argc, char** argv);

}  // namespace lathe::exec

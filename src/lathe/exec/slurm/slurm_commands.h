// How the Slurm backend runs Slurm's commands (sbatch, squeue, scancel,
// sacct): behind an interface, so that its tests answer for Slurm.
//
// A command run for a user runs as that user to the kernel — real uid, gid
// and supplementary groups, through setpriv(1) — because munge signs the
// real uid: Slurm then accepts, runs and accounts the job as the user, and
// refuses what the user could not do. The daemon (root) never submits with
// `sbatch --uid`. Every command gets exactly the environment the caller
// builds (CommandEnvironment in slurm_batch.h), nothing of the daemon's.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "lathe/common/status.h"
#include "lathe/exec/backend.h"
#include "lathe/os/command.h"

namespace lathe::exec {

class SlurmCommands {
 public:
  virtual ~SlurmCommands() = default;
  // Runs `argv` (argv[0] an absolute path) with exactly `env` as its
  // environment, as `user` when given (its uid, gid and groups; no groups
  // and a name: the name's groups from the group database), else as this
  // process. Errors as os::RunCommand: NotFound when argv[0] cannot be
  // executed, DeadlineExceeded past the timeout. Thread-safe: Launch calls
  // it from several threads at once.
  virtual Result<os::CommandOutput> Run(const std::vector<std::string>& argv, const RunUser* user,
                                        const std::map<std::string, std::string>& env) = 0;
};

// The real commands, each killed after `timeout_ms`.
std::unique_ptr<SlurmCommands> MakeRealSlurmCommands(int64_t timeout_ms);

// What the real commands put before argv to run it as `user`:
// {"/usr/bin/setpriv", "--reuid=U", "--regid=G", "--groups=A,B" | "--init-groups"
//  | "--clear-groups", "--"}.
std::vector<std::string> SetprivPrefix(const RunUser& user);

}  // namespace lathe::exec

// What the daemon's config says about one Slurm pool: where its runs go and
// how they are submitted (exec/slurm/slurm_backend.h uses it).
#pragma once

#include <cstdint>
#include <string>

namespace lathe::exec {

// slurmrestd, where the pool submits through it (slurm_rest.h).
struct SlurmRestOptions {
  // "" = none (sbatch only); "http://host:port" or "unix:/path/to/socket".
  std::string url;
  std::string version = "v0.0.38";  // the OpenAPI plugin: /slurm/<version>/job/submit
  // Each user's token (`scontrol token lifespan=`), renewed once less than a
  // third of it is left.
  int64_t token_lifespan_ms = 1800 * 1000;
};

struct SlurmPoolOptions {
  std::string name;          // the pool's name in the daemon's config ("cluster")
  std::string partition;     // "" = the cluster's default
  std::string account, qos;  // "" = none
  // Absolute; seen at the same path on every node and on the daemon's host.
  // Each user's attempts go under <shared_dir>/<user>/: the directory must
  // let users make their own there (mode 1777, like /tmp) or hold one per
  // user made by an administrator (owned by the user).
  std::string shared_dir;
  int64_t signal_grace_ms = 90000;  // --signal=B:USR1@<seconds>: the warning before --time
  std::string slurm_conf;           // "" = Slurm's default; else SLURM_CONF for every command
  std::string lathe_path;  // the lathe binary on the nodes ("" = the daemon's own path, self_exe)
  std::string bin_dir;     // where sbatch/squeue/scancel/sacct/sinfo are ("" = /usr/bin)
  int64_t command_timeout_ms = 30000;  // each Slurm command, killed after this
  SlurmRestOptions rest;
};

}  // namespace lathe::exec

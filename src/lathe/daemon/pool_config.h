// config.yaml `pools:` — the cluster pools a daemon hands runs to, each
// executed by its own backend (exec/slurm/ for `type: slurm`):
//
//   pools:
//     cluster:
//       type: slurm              # the only type today
//       partition: gpu          # "" = the cluster's default partition
//       account: lab            # optional
//       qos: normal             # optional
//       shared_dir: /shared/lathe  # seen at the same path by the nodes and this host (required)
//       signal_grace: 90s       # USR1 this long before the time limit (0s-1h)
//       slurm_conf: /etc/slurm/slurm.conf  # SLURM_CONF for every Slurm command
//       lathe_path: /usr/local/bin/lathe   # the lathe binary on the nodes (default: the daemon's)
//       bin_dir: /usr/bin       # where sbatch, squeue, scancel, sacct, sinfo are
//   default_pool: cluster        # where a job without `pool:` goes (default: local)
//
// Paths are absolute; names and Slurm values are checked here, so nothing
// the config says reaches a command line unchecked.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "lathe/common/status.h"
#include "lathe/exec/slurm/slurm_options.h"

namespace YAML {
class Node;
}

namespace lathe::daemon {

struct PoolSettings {
  std::string type;              // "slurm"
  exec::SlurmPoolOptions slurm;  // what the pool's backend is made with (its name included)
};

// `node` is the value of `pools:`; errors are config.bad_key naming the key.
Result<std::map<std::string, PoolSettings>> ParsePools(const YAML::Node& node,
                                                       std::string_view file);

}  // namespace lathe::daemon

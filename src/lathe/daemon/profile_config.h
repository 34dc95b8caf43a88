// config.yaml `profiles:` — the named resource profiles a spec may take
// (run/profile.h; docs/cli.md "Resource profiles"):
//
//   profiles:
//     a100x2: {gpus: 2, gpu_type: A100, cpus: 16, memory: 128GB, shm: 16GB,
//              pool: cluster, partition: gpu-a100}
//     small: {gpus: 1, memory: 24GB}
//     a100x2x4: {gpus: 2, gpu_type: A100, nodes: 4, pool: cluster}
//
// Each field is checked as the spec's own; a profile's pool must be `local`
// or a pool of the same file (checked by ParseDaemonConfig).
#pragma once

#include <map>
#include <string>
#include <string_view>

#include "lathe/common/status.h"
#include "lathe/run/profile.h"

namespace YAML {
class Node;
}

namespace lathe::daemon {

// `node` is the value of `profiles:`; errors are config.bad_key naming the
// key ("profiles.a100x2.gpus") and what it allows.
Result<std::map<std::string, run::Profile>> ParseProfiles(const YAML::Node& node,
                                                          std::string_view file);

}  // namespace lathe::daemon

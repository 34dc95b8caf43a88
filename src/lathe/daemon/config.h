// The daemon's optional configuration file, <home>/config.yaml:
//
//   gpus: sim:4x24GB      # auto | none | sim:NxSIZE
//   host: 127.0.0.1       # TCP address of the API
//   port: 7731            # 0: any free port
//   grace: 10s            # SIGTERM -> SIGKILL when stopping a run
//
// Command-line flags override it. Unknown keys are errors naming the key.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "lathe/common/status.h"

namespace lathe::daemon {

struct DaemonConfig {
  std::optional<std::string> gpus;
  std::optional<std::string> host;
  std::optional<int> port;
  std::optional<std::string> grace;
};

// Parses the text of a config file; `file` names it in errors.
Result<DaemonConfig> ParseDaemonConfig(std::string_view yaml, std::string_view file);
// Reads `path`; a missing file is an empty config.
Result<DaemonConfig> LoadDaemonConfig(const std::string& path);

}  // namespace lathe::daemon

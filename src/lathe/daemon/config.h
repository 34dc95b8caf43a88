// The daemon's optional configuration file, <home>/config.yaml:
//
//   gpus: sim:4x24GB      # auto | none | sim:NxSIZE
//   host: 127.0.0.1       # TCP address of the API
//   port: 7731            # absent: a free port, chosen at the first start and kept; 0: any free
//   one each time grace: 10s            # SIGTERM -> SIGKILL when stopping a run retention: # what
//   the daemon removes by itself (default: nothing)
//     finished_runs: 30d  # finished runs that ended this long ago; 0: keep forever
//     snapshots: true     # their snapshots too (default false)
//   allowed_hosts:        # Host names the API answers to besides localhost,
//     - lab.example.org   # 127.0.0.1, [::1] and `host` (DNS rebinding guard)
//   quotas:               # per-user and per-group limits (quotas.h)
//     default: {gpus: 2, runs: 4, gpu_hours: 100, period: 7d}
//   fair_share: {half_life: 7d}
//   notebooks:            # notebook runs (docs/notebooks.md)
//     idle: 30m           # stop a notebook idle this long (a spec's idle wins); 0: never
//     poll: 10s           # how often the daemon looks at each notebook
//     gpu_busy_pct: 5     # a GPU at or above this utilization keeps a notebook active
//   deployments:          # the deployments' front (docs/deployments.md)
//     listen: 127.0.0.1:7733   # where the endpoints /d/NAME/ are served; port 0: any free one
//     gateway_user: lathe-gateway  # a root daemon runs the front as this user (made if missing)
//   metrics:              # GET /metrics (docs/metrics.md)
//     open_on_loopback: false  # true: loopback TCP scrapes need no token
//   telemetry:            # GPU telemetry per run (docs/telemetry.md)
//     enabled: true       # false: no sampling, no telemetry.db
//     interval: 5s        # how often the GPUs are sampled (100ms or more)
//     max_size: 256MB     # telemetry.db's bound; the oldest finished runs' data goes first
//     idle_pct: 5         # the "allocated but idle" warning: under this utilization …
//     idle_for: 10m       # … for this long
//     throttle_pct: 20    # the "throttled" warning: at least this share of the time …
//     throttle_after: 5m  # … once this much has been observed
//   pools:                # cluster pools (pool_config.h, docs/slurm.md)
//     cluster: {type: slurm, partition: gpu, shared_dir: /shared/lathe}
//   default_pool: cluster # where a job without `pool:` goes (default: local)
//   profiles:             # named resource profiles (profile_config.h, docs/cli.md)
//     small: {gpus: 1, gpu_type: L4, memory: 24GB}
//   tls:                  # the API's TCP listener speaks TLS (required when host is not loopback)
//     cert: /etc/lathe/server.pem  # PEM certificate, then any intermediates (absolute path)
//     key: /etc/lathe/server.key   # its PEM private key (absolute path)
//
// Command-line flags override it. Unknown keys are errors naming the key.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "lathe/common/json.h"
#include "lathe/common/status.h"
#include "lathe/daemon/pool_config.h"
#include "lathe/daemon/profile_config.h"
#include "lathe/daemon/quotas.h"
#include "lathe/daemon/retention.h"

namespace lathe::daemon {

// notebooks: (notebook_watch.h)
struct NotebookSettings {
  std::optional<int64_t> idle_ms;
  std::optional<int64_t> poll_ms;
  std::optional<int> gpu_busy_pct;
};

// deployments: (deployments.h)
struct DeploymentSettings {
  std::optional<std::string> listen;
  std::optional<std::string> gateway_user;
  std::optional<int> max_per_user;
};

// metrics: (docs/metrics.md)
struct MetricsSettings {
  std::optional<bool> open_on_loopback;
};

// telemetry: (telemetry/sampler.h, telemetry/usage_warnings.h)
struct TelemetrySettings {
  std::optional<bool> enabled;
  std::optional<int64_t> interval_ms;
  std::optional<uint64_t> max_bytes;
  std::optional<int> idle_pct;
  std::optional<int64_t> idle_ms;
  std::optional<int> throttle_pct;
  std::optional<int64_t> throttle_ms;
};

// tls: both or neither (the daemon checks, since a flag may give the other).
struct TlsSettings {
  std::string cert;  // tls.cert; "" when not given
  std::string key;   // tls.key
};

struct DaemonConfig {
  std::optional<std::string> gpus;
  std::optional<std::string> host;
  std::optional<int> port;
  std::optional<std::string> grace;
  std::optional<RetentionPolicy> retention;
  std::optional<std::vector<std::string>> allowed_hosts;
  std::optional<QuotaConfig> quotas;  // `quotas:` and `fair_share:`
  std::optional<TlsSettings> tls;
  std::optional<NotebookSettings> notebooks;
  std::optional<DeploymentSettings> deployments;
  std::optional<MetricsSettings> metrics;
  std::optional<TelemetrySettings> telemetry;
  std::optional<int64_t> retry_backoff_ms;      // `retry_backoff`: the first wait before a retry
  std::optional<int64_t> retry_backoff_max_ms;  // `retry_backoff_max`: the longest wait
  std::optional<uint64_t> run_log_max_bytes;    // `run_log_max`: one run's log at most
  std::optional<uint64_t> images_max_bytes;     // `images: {max_size}`: the image store at most
  std::optional<std::map<std::string, PoolSettings>> pools;
  std::optional<std::string> default_pool;  // a name in pools, or "local"
  std::optional<std::map<std::string, run::Profile>> profiles;
};

// HOST:PORT with a port from 0 to 65535, else config.bad_key naming `key`
// (in `file`: a config file, or a flag).
Status CheckListen(const std::string& v, std::string_view file, const std::string& key);

// Parses the text of a config file; `file` names it in errors.
Result<DaemonConfig> ParseDaemonConfig(std::string_view yaml, std::string_view file);
// Reads `path`; a missing file is an empty config.
Result<DaemonConfig> LoadDaemonConfig(const std::string& path);

// A setting `lathe up` was given that the daemon already running does not
// have (a running daemon keeps the settings it started with).
struct SettingMismatch {
  std::string flag;     // "--gpus"
  std::string asked;    // the value given to `lathe up`
  std::string running;  // the running daemon's value
};

// The settings of `asked` (the flags given to `lathe up`; unset fields were
// not given) that differ from those of the daemon described by `status`, its
// GET /api/v1/status answer: --gpus against gpus.spec, --host and --port
// against tcp (port 0, "any free port", matches every port), --grace against
// grace_ms. A setting the status does not report is not compared.
std::vector<SettingMismatch> CompareWithRunning(const DaemonConfig& asked, const Json& status);

}  // namespace lathe::daemon

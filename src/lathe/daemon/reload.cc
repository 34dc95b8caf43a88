// `lathe reload` and SIGHUP (Daemon::ReloadConfig): config.yaml read again
// while the daemon runs, its settings that can change at once put in force.
#include <spdlog/spdlog.h>

#include "lathe/daemon/config.h"
#include "lathe/daemon/daemon.h"
#include "lathe/daemon/images.h"

namespace lathe::daemon {

void ApplyReloadableConfig(const DaemonConfig& c, DaemonOptions& o) {
  if (c.retention) o.retention = *c.retention;
  if (c.quotas) o.quotas = *c.quotas;
  if (c.retry_backoff_ms) o.retry_backoff_ms = *c.retry_backoff_ms;
  if (c.retry_backoff_max_ms) o.retry_backoff_max_ms = *c.retry_backoff_max_ms;
  if (c.run_log_max_bytes) o.run_log_max_bytes = *c.run_log_max_bytes;
  if (c.images_max_bytes) o.images_max_bytes = *c.images_max_bytes;
}

Result<Json> Daemon::ReloadConfig() {
  const std::string path = paths_.home + "/config.yaml";
  // A file that does not parse or check leaves everything as it is.
  ASSIGN_OR_RETURN(DaemonConfig c, LoadDaemonConfig(path));
  // What a start on this file would give them (the defaults where it is silent).
  DaemonOptions o;
  ApplyReloadableConfig(c, o);
  {
    MutexLock lock(&mu_);
    live_ = LiveSettings::Of(o);
    gpu_attempts_stale_ = true;  // the quotas' look-back may differ
    kicked_ = true;              // a raised limit may let a queued run start now
  }
  if (images_) images_->SetMaxBytes(o.images_max_bytes);
  loop_cv_.SignalAll();
  spdlog::info(
      "config: {} read again: quotas, fair share, retention, retry backoff, run log "
      "cap and image store cap are in force",
      path);
  return Json{{"config", path},
              {"applied",
               {"quotas", "fair_share", "retention", "retry_backoff", "retry_backoff_max",
                "run_log_max", "images.max_size"}},
              {"at_next_start",
               {"gpus", "host", "port", "grace", "tls", "allowed_hosts", "notebooks", "deployments",
                "metrics", "telemetry", "pools", "default_pool", "profiles"}}};
}

}  // namespace lathe::daemon

// `lathe reload` and SIGHUP (Daemon::ReloadConfig): config.yaml read again
// while the daemon runs, its settings that can change at once put in force.
#include <spdlog/spdlog.h>

#include "lathe/daemon/config.h"
#include "lathe/daemon/daemon.h"
#include "lathe/daemon/images.h"

namespace lathe::daemon {

Result<Json> Daemon::ReloadConfig() {
  const std::string path = paths_.home + "/config.yaml";
  // A file that does not parse or check leaves everything as it is.
  ASSIGN_OR_RETURN(DaemonConfig c, LoadDaemonConfig(path));
  const DaemonOptions defaults;
  LiveSettings next;
  next.quotas = c.quotas.value_or(QuotaConfig{});
  next.retention = c.retention.value_or(RetentionPolicy{});
  next.retry_backoff_ms = c.retry_backoff_ms.value_or(defaults.retry_backoff_ms);
  next.retry_backoff_max_ms = c.retry_backoff_max_ms.value_or(defaults.retry_backoff_max_ms);
  next.run_log_max_bytes = c.run_log_max_bytes.value_or(defaults.run_log_max_bytes);
  {
    MutexLock lock(&mu_);
    live_ = std::move(next);
    gpu_attempts_stale_ = true;  // the quotas' look-back may differ
    kicked_ = true;              // a raised limit may let a queued run start now
  }
  if (images_) images_->SetMaxBytes(c.images_max_bytes.value_or(0));
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

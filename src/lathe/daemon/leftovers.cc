// What a kill -9 of the daemon leaves behind, reclaimed when it starts again
// (docs/security.md, "Files and their modes"): a run's directory whose run
// was never recorded (killed during submission) or whose record was removed
// (killed during `lathe rm`), and telemetry series of runs that are gone.
// Every removal of a run writes its record first, so a directory or a
// series without one is nobody's any more.
#include <spdlog/spdlog.h>

#include "lathe/daemon/daemon.h"
#include "lathe/daemon/secret_files.h"
#include "lathe/os/files.h"

namespace lathe::daemon {

void Daemon::ReclaimLeftovers() {
  auto known = [&](const std::string& id) REQUIRES(mu_) {
    auto r = store_->Get(id);
    return r.ok() || !r.status().IsNotFound();  // an error keeps it: only "no record" reclaims
  };
  size_t dirs = 0, series = 0;
  if (auto names = os::ListDir(paths_.runs); names.ok()) {
    for (const auto& id : *names) {
      if (known(id)) continue;
      if (Status st = RemoveDaemonTree(paths_.runs + "/" + id); !st.ok()) {
        spdlog::warn("leftovers: run directory {} not removed: {}", id, st.ToString());
        continue;
      }
      ++dirs;
    }
  }
  if (telemetry_) {
    if (auto ids = telemetry_->RunIds(); ids.ok()) {
      for (const auto& id : *ids) {
        if (!known(id) && telemetry_->Remove(id).ok()) ++series;
      }
    }
  }
  // Containers of attempts that are not active any more (their monitor was
  // killed with the daemon down, or a lost attempt): lathe-<run>-<attempt>.
  size_t containers = 0;
  for (const std::string& name : images_->ContainerNames()) {
    const std::string rest = name.substr(6);
    const size_t dash = rest.rfind('-');
    auto r = dash == std::string::npos ? Result<state::RunRecord>(Status::NotFound(name))
                                       : store_->Get(rest.substr(0, dash));
    if (!r.ok() && !r.status().IsNotFound()) continue;  // an error keeps it
    const bool active =
        r.ok() && std::to_string(r->attempt) == rest.substr(dash + 1) &&
        (r->state == run::RunState::kStarting || r->state == run::RunState::kRunning ||
         r->state == run::RunState::kStopping);
    if (active) continue;
    if (Status st = images_->RemoveContainer(name); !st.ok()) {
      spdlog::warn("leftovers: container {} not removed: {}", name, st.ToString());
      continue;
    }
    ++containers;
  }
  if (containers > 0)
    spdlog::info("leftovers: removed {} containers of ended attempts", containers);
  if (dirs + series > 0) {
    spdlog::info(
        "leftovers: removed {} run directories and {} telemetry series of runs that "
        "no longer exist (a kill before their removal ended)",
        dirs, series);
  }
}

}  // namespace lathe::daemon

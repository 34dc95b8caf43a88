// Why a run's port does not answer (run/ports.h): what the run's processes
// listen on, from the tables of their network namespace.
#include <unistd.h>

#include "lathe/daemon/daemon.h"
#include "lathe/os/listening.h"
#include "lathe/os/process.h"

namespace lathe::daemon {

using state::RunRecord;

std::vector<Daemon::PortStatus> Daemon::CheckPorts(const RunRecord& r) {
  std::vector<PortStatus> out;
  for (const auto& p : r.spec.ports) out.push_back({p, p.port != 0 ? "tcp" : "unix", "", {}});
  if (!run::IsActive(r.state) || r.backend != backend_->Name()) {
    for (auto& s : out) s.check.state = run::PortState::kNotRunning;
    return out;
  }
  std::vector<exec::Endpoint> endpoints;
  std::vector<pid_t> pids;
  {
    MutexLock lock(&mu_);  // backend calls other than Launch hold it
    endpoints = backend_->Endpoints(RefOf(r));
    pids = backend_->Pids(RefOf(r));
  }
  // The tables are read without the lock: /proc/net/tcp of a busy host is large.
  const std::vector<os::Listener> mine = os::ListenersOf(pids);
  pid_t netns = pids.empty() ? 0 : pids.front();
  for (const auto& e : endpoints) {
    if (netns == 0 && e.netns_pid > 0) netns = e.netns_pid;  // an isolated run's
  }
  std::vector<os::Listener> all;
  if (auto got = os::NamespaceListeners(netns > 0 ? netns : os::SelfPid()); got.ok()) {
    all = std::move(*got);
  }
  for (auto& s : out) {
    for (const auto& e : endpoints) {
      if (e.name == s.spec.name) s.address = e.address;
    }
    // Still being launched: its address is not recorded yet, nothing listens.
    if (s.address.empty()) continue;
    s.check = run::CheckPort(s.kind, s.address, r.uid, r.uid == 0 ? uid_ : r.uid, mine, all);
  }
  return out;
}

Status Daemon::ExplainPort(const std::string& run_id, const std::string& port_name,
                           const Status& fallback) {
  Result<RunRecord> r = Status::NotFound(run_id);
  {
    MutexLock lock(&mu_);
    r = store_->Get(run_id);
  }
  if (!r.ok()) return fallback;
  for (const auto& s : CheckPorts(*r)) {
    if (!port_name.empty() && s.spec.name != port_name) continue;
    if (s.check.state == run::PortState::kNotRunning) {
      return run::ExplainNotRunning(r->id, s.spec, run::StateName(r->state));
    }
    Status why = run::ExplainPort(r->id, s.spec, s.address.empty() ? "-" : s.address, s.check);
    return why.ok() ? fallback : why;
  }
  return fallback;
}

}  // namespace lathe::daemon

#include "lathe/doctor/checks_lathe.h"

#include "lathe/doctor/check_util.h"
#include "lathe/doctor/probes.h"
#include "lathe/doctor/system_view.h"

namespace lathe::doctor {

Finding CheckDaemon(const SystemView&, const Facts& f) {
  const DaemonProbe& d = f.daemon;
  if (d.state != ProbeState::kDone) return {"lathe.daemon.unknown", {}};
  if (d.up) return {"lathe.daemon.ok", {{"where", d.where}}};
  return {"lathe.daemon.down", {{"where", d.where.empty() ? "-" : d.where}, {"reason", d.reason}}};
}

Finding CheckHome(const SystemView& view, const Facts&) {
  std::string home = view.LatheHome();
  if (home.empty()) return {"lathe.home.unknown", {}};
  bool exists = view.ListDir(home).ok();
  std::string dir = exists ? home : ExistingAncestor(view, home);
  Status w = view.ProbeWritable(dir);
  if (!w.ok()) return {"lathe.home.not_writable", {{"path", home}, {"error", w.message()}}};
  return {exists ? "lathe.home.ok" : "lathe.home.creatable", {{"path", home}}};
}

// The snapshot store (snap/) is not part of this build yet: the checks say
// so instead of pretending. When it lands they run `fsck` and the
// checkpoint-capture round trip through the daemon.
Finding CheckStore(const SystemView&, const Facts&) { return {"lathe.store.unavailable", {}}; }

Finding CheckCapture(const SystemView&, const Facts& f) {
  if (!f.daemon.up) return {"lathe.capture.no_daemon", {}};
  return {"lathe.capture.unavailable", {}};
}

}  // namespace lathe::doctor

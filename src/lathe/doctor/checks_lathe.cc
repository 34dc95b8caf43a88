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
  // The system daemon's home is root's: a user reaches it through the
  // socket; not writing it is how it should be, and nothing to fix.
  if (view.LatheHomeIsOthers()) return {"lathe.home.system", {{"path", home}}};
  bool exists = view.ListDir(home).ok();
  std::string dir = exists ? home : ExistingAncestor(view, home);
  Status w = view.ProbeWritable(dir);
  if (!w.ok()) return {"lathe.home.not_writable", {{"path", home}, {"error", w.message()}}};
  return {exists ? "lathe.home.ok" : "lathe.home.creatable", {{"path", home}}};
}

Finding CheckStore(const SystemView&, const Facts& f) {
  const StoreProbe& s = f.store;
  switch (s.state) {
    case ProbeState::kNotRun:
      return {"lathe.store.fast", {}};
    case ProbeState::kTimedOut:
      return {"lathe.store.slow",
              {{"path", s.path}, {"seconds", std::to_string(f.store_timeout_ms / 1000)}}};
    case ProbeState::kFailed:
      return {"lathe.store.error", {{"path", s.path}, {"error", s.error}}};
    case ProbeState::kDone:
      break;
  }
  if (s.path.empty() && !s.unreadable.empty())
    return {"lathe.store.not_readable", {{"path", s.unreadable}}};
  if (s.path.empty()) return {"lathe.store.none", {}};
  if (s.problems > 0) {
    return {"lathe.store.damaged",
            {{"path", s.path}, {"count", std::to_string(s.problems)}, {"first", s.first_problem}}};
  }
  return {"lathe.store.ok",
          {{"path", s.path},
           {"snapshots", std::to_string(s.snapshots)},
           {"packs", std::to_string(s.packs)},
           {"chunks", std::to_string(s.chunks)}}};
}

Finding CheckCapture(const SystemView&, const Facts& f) {
  if (!f.daemon.up) return {"lathe.capture.no_daemon", {}};
  const CaptureProbe& c = f.capture;
  if (c.state == ProbeState::kNotRun) return {"lathe.capture.fast", {}};
  if (c.state != ProbeState::kDone) return {"lathe.capture.fail", {{"error", c.error}}};
  MsgArgs a = {{"snapshot", c.result.snapshot.substr(0, 12)}, {"ms", std::to_string(c.result.ms)}};
  if (!c.result.left_run.empty()) {
    a.push_back({"run", c.result.left_run});
    a.push_back({"error", c.result.cleanup_error});
    return {"lathe.capture.left_behind", a};
  }
  return {"lathe.capture.ok", a};
}

}  // namespace lathe::doctor

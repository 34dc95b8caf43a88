// GET /api/v1/doctor: `lathe doctor --fast` as the daemon sees the machine,
// in both languages, for the web UI's overview. The checks take tens of
// milliseconds; they run at most once a minute (`?refresh=1`: now), under
// a mutex, so that a page polling it costs the machine nothing.
#include "lathe/api/routes.h"
#include "lathe/api/server.h"
#include "lathe/common/i18n.h"
#include "lathe/daemon/home.h"
#include "lathe/doctor/doctor.h"
#include "lathe/doctor/real_system.h"
#include "lathe/doctor/report_format.h"
#include "lathe/os/clock.h"
#include "lathe/os/process.h"

namespace lathe::api {
namespace {

constexpr int64_t kDoctorCacheMs = 60'000;

}  // namespace

void ApiServer::GetDoctor(ApiCall& call) {
  std::lock_guard<std::mutex> lock(doctor_mu_);
  const int64_t now = (opts_.clock ? *opts_.clock : os::RealClock()).NowMs();
  if (doctor_at_ms_ == 0 || now - doctor_at_ms_ >= kDoctorCacheMs ||
      Truthy(call.req.QueryParam("refresh"))) {
    doctor::RealSystemOptions ro;
    ro.lathe_home = daemon_.paths().home;
    ro.self_exe = os::SelfExe();
    ro.gpu_spec = daemon_.gpu_spec();
    // This is the daemon: it is up, where its socket is.
    ro.daemon_status = [this](std::string* where) {
      *where = daemon_.paths().socket;
      return Status::OK();
    };
    auto view = doctor::NewRealSystemView(std::move(ro));
    doctor::DoctorOptions o;
    o.fast = true;
    auto report = doctor::RunDoctor(*view, o);
    if (!report.ok()) return call.Reply(report.status());
    doctor_ = Json{{"en", doctor::ReportToJson(*report, Lang::kEn, false)},
                   {"zh", doctor::ReportToJson(*report, Lang::kZh, false)}};
    doctor_at_ms_ = now;
  }
  Json out = doctor_;
  out["at_ms"] = doctor_at_ms_;
  call.Reply(out);
}

}  // namespace lathe::api

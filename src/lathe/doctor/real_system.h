// The SystemView of the machine the doctor runs on.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "lathe/doctor/system_view.h"

namespace lathe::doctor {

struct RealSystemOptions {
  // The Lathe home a daemon would use (daemon/home.h DaemonHome("").home).
  std::string lathe_home;
  // The home is the system daemon's and this process is not root.
  bool lathe_home_is_others = false;
  // Asks the daemon whether it is up (the CLI passes one built on
  // api::ApiClient, which the doctor module does not link). Null: the
  // daemon is reported Unavailable("not checked").
  std::function<Status(std::string* where)> daemon_status;
  // The daemon's snapshot store when readable ("" = none), and the lathe
  // binary that checks it.
  std::string store_dir;
  std::string unreadable_store_dir;  // exists, not readable by this user
  std::string self_exe;
  // The capture round trip through the daemon (the CLI builds it on
  // api::ApiClient). Null: Unavailable("not checked").
  std::function<Result<CaptureResult>(int64_t timeout_ms)> capture;
  // A command in one of the user's images, through the daemon (the CLI
  // builds it on api::ApiClient). Null: Unavailable("not checked").
  std::function<Result<CommandOutput>(
      const std::string& image, const std::vector<std::string>& argv, int gpus, int64_t timeout_ms)>
      run_in_image;
  // GPU source spec for SampleGpus(), as gpu/source.h OpenGpuSource takes it.
  std::string gpu_spec = "auto";
};

std::unique_ptr<SystemView> NewRealSystemView(RealSystemOptions options);

}  // namespace lathe::doctor

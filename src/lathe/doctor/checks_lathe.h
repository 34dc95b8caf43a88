// The Lathe group: the daemon, the home directory, the snapshot store.
#pragma once

#include "lathe/doctor/check.h"

namespace lathe::doctor {

Finding CheckDaemon(const SystemView& view, const Facts& facts);
Finding CheckHome(const SystemView& view, const Facts& facts);
Finding CheckStore(const SystemView& view, const Facts& facts);
Finding CheckCapture(const SystemView& view, const Facts& facts);

}  // namespace lathe::doctor

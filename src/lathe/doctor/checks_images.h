// Environments (runs in container images, docs/environments.md): podman and
// the image store (lathe group), a CDI spec against the loaded driver (gpu
// group).
#pragma once

#include "lathe/doctor/check.h"

namespace lathe::doctor {

Finding CheckImages(const SystemView& view, const Facts& facts);
Finding CheckCdi(const SystemView& view, const Facts& facts);

}  // namespace lathe::doctor

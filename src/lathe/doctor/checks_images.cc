#include "lathe/doctor/checks_images.h"

#include "lathe/doctor/check_util.h"
#include "lathe/doctor/system_view.h"
#include "lathe/gpu/cdi.h"

namespace lathe::doctor {
namespace {

// A build needs several times its image (layers, the context, the result):
// under this, the store's disk is tight for the images a training stack uses.
constexpr uint64_t kImagesWarnBytes = 30ULL << 30;

}  // namespace

Finding CheckImages(const SystemView& view, const Facts&) {
  for (const char* bin : {"podman", "runc", "catatonit"}) {
    if (!view.FindExecutable(bin) && !view.FindExecutable(std::string("/usr/sbin/") + bin) &&
        !view.FindExecutable(std::string("/usr/bin/") + bin)) {
      return {"lathe.images.missing", {{"program", bin}}};
    }
  }
  const std::string home = view.LatheHome();
  if (home.empty()) return {"lathe.images.unknown", {}};
  const std::string store = home + "/images";
  const std::string where = ExistingAncestor(view, store);
  auto st = view.StatFs(where);
  if (!st.ok()) return {"lathe.images.unknown", {}};
  MsgArgs a = {{"path", store}, {"free", Bytes(st->free_bytes)}};
  if (st->free_bytes < kImagesWarnBytes) return {"lathe.images.tight", a};
  return {"lathe.images.ok", a};
}

Finding CheckCdi(const SystemView& view, const Facts&) {
  const gpu::CdiState state =
      gpu::CollectCdiState([&](const std::string& dir) { return view.ListDir(dir); },
                           [&](const std::string& path) { return view.ReadFile(path); });
  if (state.specs.empty()) return {"gpu.cdi.none", {}};
  if (state.loaded_driver.empty()) return {"gpu.cdi.no_driver", {{"path", state.specs[0].path}}};
  if (const gpu::CdiSpec* stale = gpu::StaleCdiSpec(state)) {
    return {
        "gpu.cdi.stale",
        {{"path", stale->path}, {"spec", stale->driver_version}, {"loaded", state.loaded_driver}}};
  }
  return {"gpu.cdi.ok", {{"path", state.specs[0].path}, {"loaded", state.loaded_driver}}};
}

}  // namespace lathe::doctor

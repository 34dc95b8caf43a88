#include "lathe/doctor/checks_images.h"

#include "lathe/doctor/check_util.h"
#include "lathe/doctor/system_view.h"
#include "lathe/gpu/cdi.h"

namespace lathe::doctor {
namespace {

// A build needs several times its image (layers, the context, the result):
// under this, the store's disk is tight for the images a training stack uses.
constexpr uint64_t kImagesWarnBytes = 30ULL << 30;

bool SpecFile(const std::string& name) {
  return name.ends_with(".yaml") || name.ends_with(".yml") || name.ends_with(".json");
}

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
  gpu::CdiState state;
  for (std::string_view dir : gpu::kCdiDirs) {
    auto names = view.ListDir(std::string(dir));
    if (!names.ok()) continue;
    for (const auto& name : *names) {
      if (!SpecFile(name)) continue;
      const std::string path = std::string(dir) + "/" + name;
      auto text = view.ReadFile(path);
      if (!text.ok() || !gpu::CdiHasNvidiaGpus(*text)) continue;
      state.specs.push_back({path, gpu::CdiDriverVersion(*text).value_or("")});
    }
  }
  for (const char* f : {"/sys/module/nvidia/version", "/proc/driver/nvidia/version"}) {
    auto text = view.ReadFile(f);
    if (!text.ok()) continue;
    if (auto v = gpu::LoadedDriverVersion(*text)) {
      state.loaded_driver = *v;
      break;
    }
  }
  if (state.specs.empty()) return {"gpu.cdi.none", {}};
  if (state.loaded_driver.empty()) return {"gpu.cdi.no_driver", {{"path", state.specs[0].path}}};
  for (const auto& spec : state.specs) {
    if (!spec.driver_version.empty() && spec.driver_version != state.loaded_driver) {
      return {
          "gpu.cdi.stale",
          {{"path", spec.path}, {"spec", spec.driver_version}, {"loaded", state.loaded_driver}}};
    }
  }
  return {"gpu.cdi.ok", {{"path", state.specs[0].path}, {"loaded", state.loaded_driver}}};
}

}  // namespace lathe::doctor

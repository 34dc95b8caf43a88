#include "lathe/gpu/cdi.h"

#include <cctype>

#include "lathe/os/files.h"

namespace lathe::gpu {
namespace {

// The version after the first of `prefixes` in `text`: digits and dots.
std::optional<std::string> VersionAfter(std::string_view text,
                                        std::initializer_list<std::string_view> prefixes) {
  for (std::string_view prefix : prefixes) {
    size_t at = 0;
    while ((at = text.find(prefix, at)) != std::string_view::npos) {
      at += prefix.size();
      size_t end = at;
      while (end < text.size() &&
             (std::isdigit(static_cast<unsigned char>(text[end])) || text[end] == '.')) {
        ++end;
      }
      std::string v(text.substr(at, end - at));
      while (!v.empty() && v.back() == '.') v.pop_back();
      // A major version alone (libcuda.so.1) is the soname, not the driver's.
      if (v.find('.') != std::string::npos) return v;
    }
  }
  return std::nullopt;
}

bool SpecFile(const std::string& name) {
  for (std::string_view ext : {".yaml", ".yml", ".json"}) {
    if (name.size() > ext.size() && name.ends_with(ext)) return true;
  }
  return false;
}

}  // namespace

bool CdiHasNvidiaGpus(std::string_view text) {
  return text.find("nvidia.com/gpu") != std::string_view::npos;
}

std::optional<std::string> CdiDriverVersion(std::string_view text) {
  return VersionAfter(text, {"libnvidia-ml.so.", "libcuda.so.", "libnvidia-ptxjitcompiler.so."});
}

std::optional<std::string> LoadedDriverVersion(std::string_view text) {
  std::string_view t = text;
  if (size_t at = t.find("Kernel Module"); at != std::string_view::npos) {
    t = t.substr(at + 13);
  }
  size_t start = 0;
  while (start < t.size() && !std::isdigit(static_cast<unsigned char>(t[start]))) {
    if (t[start] == '\n') return std::nullopt;
    ++start;
  }
  size_t end = start;
  while (end < t.size() && (std::isdigit(static_cast<unsigned char>(t[end])) || t[end] == '.')) {
    ++end;
  }
  std::string v(t.substr(start, end - start));
  if (v.empty() || v.find('.') == std::string::npos) return std::nullopt;
  return v;
}

CdiState CollectCdiState(const CdiListDir& list, const CdiReadFile& read) {
  CdiState s;
  for (std::string_view dir : kCdiDirs) {
    auto names = list(std::string(dir));
    if (!names.ok()) continue;
    for (const auto& name : *names) {
      if (!SpecFile(name)) continue;
      const std::string path = std::string(dir) + "/" + name;
      auto text = read(path);
      if (!text.ok() || !CdiHasNvidiaGpus(*text)) continue;
      s.specs.push_back({path, CdiDriverVersion(*text).value_or("")});
    }
  }
  for (const char* f : {"/sys/module/nvidia/version", "/proc/driver/nvidia/version"}) {
    auto text = read(f);
    if (!text.ok()) continue;
    if (auto v = LoadedDriverVersion(*text)) {
      s.loaded_driver = *v;
      break;
    }
  }
  return s;
}

CdiState ReadCdiState(const std::string& root) {
  return CollectCdiState(
      [&](const std::string& dir) { return os::ListDir(root + dir); },
      [&](const std::string& path) { return os::ReadFileUpTo(root + path, 4 << 20); });
}

const CdiSpec* StaleCdiSpec(const CdiState& state) {
  if (state.loaded_driver.empty()) return nullptr;
  for (const auto& spec : state.specs) {
    if (!spec.driver_version.empty() && spec.driver_version != state.loaded_driver) return &spec;
  }
  return nullptr;
}

Status CheckCdiCurrent(const CdiState& state) {
  const CdiSpec* stale = StaleCdiSpec(state);
  if (stale == nullptr) return Status::OK();
  return Status::Msg(
      Code::kFailedPrecondition, "gpu.cdi_stale",
      {{"path", stale->path}, {"spec", stale->driver_version}, {"loaded", state.loaded_driver}});
}

}  // namespace lathe::gpu

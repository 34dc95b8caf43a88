// CDI (the Container Device Interface) specs for NVIDIA GPUs, as
// `nvidia-ctk cdi generate` writes them (/etc/cdi/nvidia.yaml,
// /var/run/cdi/*.yaml): what a run in an image is given its GPUs with
// (`podman run --device nvidia.com/gpu=N`), and how the doctor and the daemon
// tell a spec made for another driver from a current one.
//
// A spec names the driver's libraries by their versioned file names
// (libnvidia-ml.so.535.104.05, libcuda.so.535.104.05): after a driver update
// the spec still points at files that are gone, and a container started with
// it sees no GPU (podman#26233, nvidia-container-toolkit#1860). Comparing that
// version with the loaded module's (/sys/module/nvidia/version,
// /proc/driver/nvidia/version) finds it before a run starts.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "lathe/common/status.h"

namespace lathe::gpu {

// Where CDI specs are looked for, in CDI's order (later wins).
inline constexpr std::string_view kCdiDirs[] = {"/etc/cdi", "/var/run/cdi"};

// Whether a spec's text describes NVIDIA GPUs (kind: nvidia.com/gpu).
bool CdiHasNvidiaGpus(std::string_view spec_text);
// The driver version its library paths carry ("535.104.05"); nullopt when
// none does.
std::optional<std::string> CdiDriverVersion(std::string_view spec_text);
// The loaded driver's version from /sys/module/nvidia/version ("535.104.05\n")
// or /proc/driver/nvidia/version ("NVRM version: NVIDIA UNIX x86_64 Kernel
// Module  535.104.05  Sat ..."); nullopt when the text has none.
std::optional<std::string> LoadedDriverVersion(std::string_view text);

struct CdiSpec {
  std::string path;
  std::string driver_version;  // "" when its paths carry none
};

// What this machine has: the NVIDIA specs under kCdiDirs (files ending in
// .yaml, .yml or .json) and the loaded driver's version ("" when no NVIDIA
// module is loaded).
struct CdiState {
  std::vector<CdiSpec> specs;
  std::string loaded_driver;
};
// Reads it through `list` (a directory's names) and `read` (a file's text):
// the daemon's files, or the doctor's SystemView.
using CdiListDir = std::function<Result<std::vector<std::string>>(const std::string& dir)>;
using CdiReadFile = std::function<Result<std::string>(const std::string& path)>;
CdiState CollectCdiState(const CdiListDir& list, const CdiReadFile& read);
// CollectCdiState of this machine; `root` prefixes every path (tests: a fake tree).
CdiState ReadCdiState(const std::string& root = "");

// The first spec whose driver differs from the loaded one; null when none
// does (no spec, no driver, or versions that agree).
const CdiSpec* StaleCdiSpec(const CdiState& state);
// FailedPrecondition naming StaleCdiSpec, both versions and the fix command
// (gpu.cdi_stale); OK when there is none.
Status CheckCdiCurrent(const CdiState& state);

}  // namespace lathe::gpu

#include "lathe/doctor/checks_gpu.h"

#include <fmt/format.h>
#include <re2/re2.h>

#include <algorithm>
#include <cctype>
#include <set>

#include "lathe/doctor/check_util.h"
#include "lathe/doctor/probes.h"
#include "lathe/gpu/nvml.h"

namespace lathe::doctor {
namespace {

// Throttle reasons that mean the GPU is slowed down by heat or the board,
// not by being idle or by the (normal) software power cap.
constexpr uint64_t kSlowdownBits =
    nvmlClocksThrottleReasonHwSlowdown | nvmlClocksThrottleReasonSwThermalSlowdown |
    nvmlClocksThrottleReasonHwThermalSlowdown | nvmlClocksThrottleReasonHwPowerBrakeSlowdown;

// GPU memory in use before anything of ours runs: this share of a GPU's
// memory, and at least this much (a display server holds a few hundred MiB).
constexpr double kGpuBusyShare = 0.10;
constexpr uint64_t kGpuBusyMinBytes = 1ULL << 30;

const std::vector<gpu::GpuInfo>* Gpus(const Facts& f) {
  if (!f.gpus.ok() || f.gpus->gpus.empty()) return nullptr;
  return &f.gpus->gpus;
}

std::string Join(const std::vector<std::string>& v, std::string_view sep = ", ") {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : std::string(sep)) + s;
  return out;
}

// NVIDIA display/3D controllers on the PCI bus, and /dev/nvidiaN nodes.
std::vector<std::string> NvidiaHardware(const SystemView& view) {
  std::vector<std::string> found;
  if (auto devs = view.ListDir("/sys/bus/pci/devices"); devs.ok()) {
    for (const auto& d : *devs) {
      std::string base = "/sys/bus/pci/devices/" + d;
      auto vendor = ReadLine(view, base + "/vendor");
      auto cls = ReadLine(view, base + "/class");
      if (vendor == "0x10de" && cls && cls->starts_with("0x03")) found.push_back(d);
    }
  }
  if (auto dev = view.ListDir("/dev"); dev.ok() && found.empty()) {
    for (const auto& n : *dev) {
      if (RE2::FullMatch(n, R"(nvidia\d+)")) found.push_back("/dev/" + n);
    }
  }
  std::sort(found.begin(), found.end());
  return found;
}

Finding NoGpu(const char* outcome) { return {outcome, {}}; }

std::string GpuList(const std::vector<std::string>& items) { return Join(items); }

}  // namespace

Finding CheckGpuDriver(const SystemView& view, const Facts& f) {
  if (!f.gpus.ok()) return {"gpu.driver.error", {{"error", f.gpus.status().message()}}};
  const gpu::Inventory& inv = *f.gpus;
  if (inv.source == "nvml") {
    if (inv.gpus.empty()) return {"gpu.driver.no_devices", {{"driver", inv.driver_version}}};
    std::set<std::string> names;
    for (const auto& g : inv.gpus) names.insert(g.name);
    return {"gpu.driver.ok",
            {{"driver", inv.driver_version},
             {"cuda", inv.cuda_driver_version.empty() ? "?" : inv.cuda_driver_version},
             {"count", std::to_string(inv.gpus.size())},
             {"names", Join({names.begin(), names.end()})}}};
  }
  std::vector<std::string> hw = NvidiaHardware(view);
  if (!hw.empty()) {
    return {"gpu.driver.not_loaded", {{"devices", Join(hw)}, {"error", inv.note}}};
  }
  return {"gpu.driver.no_gpu", {{"note", inv.note}}};
}

namespace {

bool ValidOrdinal(const std::string& tok, size_t count) {
  if (tok.empty() || !std::all_of(tok.begin(), tok.end(), ::isdigit)) return false;
  return std::stoul(tok) < count;
}

bool ValidUuid(const std::string& tok, const std::vector<gpu::GpuInfo>& gpus) {
  if (tok.starts_with("MIG-")) return true;  // MIG instances are not in the inventory
  if (!tok.starts_with("GPU-")) return false;
  return std::any_of(gpus.begin(), gpus.end(),
                     [&](const gpu::GpuInfo& g) { return g.uuid.starts_with(tok); });
}

}  // namespace

Finding CheckGpuVisible(const SystemView& view, const Facts& f) {
  const auto* gpus = Gpus(f);
  if (gpus == nullptr) return NoGpu("gpu.visible.no_gpu");
  std::string count = std::to_string(gpus->size());
  auto cvd = view.Getenv("CUDA_VISIBLE_DEVICES");
  size_t visible = gpus->size();
  if (cvd) {
    std::string v = *cvd;
    if (v.empty() || v == "-1" || v == "NoDevFiles") {
      return {"gpu.visible.hidden", {{"value", v}, {"count", count}}};
    }
    std::vector<std::string> toks;
    for (size_t s = 0, e; s <= v.size(); s = e + 1) {
      e = std::min(v.find(',', s), v.size());
      toks.push_back(v.substr(s, e - s));
    }
    for (const auto& t : toks) {
      if (!ValidOrdinal(t, gpus->size()) && !ValidUuid(t, *gpus)) {
        return {"gpu.visible.invalid",
                {{"value", v},
                 {"bad", t},
                 {"count", count},
                 {"max", std::to_string(gpus->size() - 1)}}};
      }
    }
    visible = toks.size();
  }
  std::set<std::string> models;
  for (const auto& g : *gpus) models.insert(g.name);
  if (models.size() > 1 && view.Getenv("CUDA_DEVICE_ORDER").value_or("") != "PCI_BUS_ID") {
    return {"gpu.visible.order",
            {{"count", count}, {"models", Join({models.begin(), models.end()})}}};
  }
  if (cvd) {
    return {"gpu.visible.subset",
            {{"value", *cvd}, {"visible", std::to_string(visible)}, {"count", count}}};
  }
  return {"gpu.visible.all", {{"count", count}}};
}

Finding CheckGpuCuda(const SystemView& view, const Facts& f) {
  std::string driver = f.gpus.ok() ? f.gpus->cuda_driver_version : "";
  std::string toolkit = f.toolkit.version.empty() ? "-" : f.toolkit.version;
  std::string torch_cuda = "-";
  for (const auto& t : f.torch) {
    if (t.importable && !t.cuda.empty()) torch_cuda = t.cuda;
  }
  auto dv = ParseCudaVersion(driver);
  if (!dv) {
    return {"gpu.cuda.no_driver", {{"toolkit", toolkit}, {"torch", torch_cuda}}};
  }
  std::vector<Finding> findings;
  for (const auto& t : f.torch) {
    auto tv = ParseCudaVersion(t.cuda);
    if (!t.importable || !tv || *tv <= *dv) continue;
    MsgArgs a = {
        {"torch", t.cuda}, {"version", t.version}, {"python", t.python}, {"driver", driver}};
    findings.push_back(
        {tv->major > dv->major ? "gpu.cuda.torch_newer" : "gpu.cuda.torch_minor_newer", a});
  }
  if (auto kv = ParseCudaVersion(f.toolkit.version); kv && *kv > *dv) {
    findings.push_back(
        {"gpu.cuda.toolkit_newer",
         {{"toolkit", f.toolkit.version}, {"path", f.toolkit.path}, {"driver", driver}}});
  }
  findings.push_back(
      {"gpu.cuda.ok", {{"driver", driver}, {"toolkit", toolkit}, {"torch", torch_cuda}}});
  return Worst(findings);
}

namespace {

Finding TorchFinding(const TorchProbe& t, const std::vector<gpu::GpuInfo>* gpus,
                     int64_t timeout_ms) {
  MsgArgs a = {{"python", t.python}, {"version", t.version}, {"cuda", t.cuda}};
  switch (t.state) {
    case ProbeState::kTimedOut:
      return {"gpu.torch.timeout",
              {{"python", t.python}, {"timeout", fmt::format("{}s", timeout_ms / 1000)}}};
    case ProbeState::kFailed:
      return {"gpu.torch.probe_failed", {{"python", t.python}, {"error", t.error}}};
    case ProbeState::kNotRun:
      return {"gpu.torch.not_installed", {{"pythons", t.python}}};
    case ProbeState::kDone:
      break;
  }
  if (!t.importable) return {"gpu.torch.not_installed", {{"pythons", t.python}}};
  if (gpus == nullptr) return {"gpu.torch.cpu_ok", a};
  a.push_back({"count", std::to_string(gpus->size())});
  if (t.cuda.empty()) return {"gpu.torch.cpu_build", a};
  if (!t.cuda_available) {
    a.push_back({"reason", t.cuda_error.empty() ? "-" : t.cuda_error});
    return {"gpu.torch.cuda_unavailable", a};
  }
  a.push_back({"devices", std::to_string(t.capabilities.size())});
  return {"gpu.torch.ok", a};
}

}  // namespace

Finding CheckGpuTorch(const SystemView& view, const Facts& f) {
  if (f.torch_skipped_fast) return {"gpu.torch.fast", {}};
  if (f.torch.empty()) return {"gpu.torch.no_python", {}};
  std::vector<Finding> findings;
  std::vector<std::string> without;
  for (const auto& t : f.torch) {
    Finding fi = TorchFinding(t, Gpus(f), f.torch_timeout_ms);
    if (fi.outcome == "gpu.torch.not_installed") {
      without.push_back(t.python);
    } else {
      findings.push_back(std::move(fi));
    }
  }
  if (findings.empty()) return {"gpu.torch.not_installed", {{"pythons", Join(without)}}};
  return Worst(findings);
}

namespace {

// "sm_86" → 86, "compute_90" → 90, "sm_90a" → 90; the kind in `ptx`.
std::optional<int> ArchNumber(const std::string& arch, bool& ptx) {
  int n = 0;
  std::string kind;
  if (!RE2::FullMatch(arch, R"((sm|compute)_(\d+)a?)", &kind, &n)) return std::nullopt;
  ptx = kind == "compute";
  return n;
}

// Whether torch's arch list can run on compute capability `cap` (86 for 8.6):
// a cubin of the same major and a lower or equal minor, or PTX it can JIT.
bool ArchSupported(const std::vector<std::string>& archs, int cap) {
  for (const auto& a : archs) {
    bool ptx = false;
    auto n = ArchNumber(a, ptx);
    if (!n) continue;
    if (ptx ? *n <= cap : (*n / 10 == cap / 10 && *n <= cap)) return true;
  }
  return false;
}

}  // namespace

Finding CheckGpuArch(const SystemView& view, const Facts& f) {
  if (Gpus(f) == nullptr) return NoGpu("gpu.arch.no_gpu");
  for (const auto& t : f.torch) {
    if (!t.cuda_available || t.capabilities.empty()) continue;
    for (size_t i = 0; i < t.capabilities.size(); ++i) {
      auto cv = ParseCudaVersion(t.capabilities[i]);
      if (!cv || ArchSupported(t.arch_list, cv->major * 10 + cv->minor)) continue;
      return {"gpu.arch.missing",
              {{"device", std::to_string(i)},
               {"cap", t.capabilities[i]},
               {"sm", fmt::format("sm_{}{}", cv->major, cv->minor)},
               {"archs", Join(t.arch_list, " ")},
               {"version", t.version},
               {"python", t.python}}};
    }
    return {"gpu.arch.ok", {{"caps", Join(t.capabilities)}, {"archs", Join(t.arch_list, " ")}}};
  }
  return {"gpu.arch.no_torch", {}};
}

Finding CheckGpuEcc(const SystemView& view, const Facts& f) {
  const auto* gpus = Gpus(f);
  if (gpus == nullptr) return NoGpu("gpu.ecc.no_gpu");
  std::vector<std::string> bad, off;
  int known = 0;
  for (const auto& g : *gpus) {
    if (g.ecc_uncorrected_errors.value_or(0) > 0) {
      bad.push_back(fmt::format("GPU {} ({})", g.index, *g.ecc_uncorrected_errors));
    }
    if (g.ecc_enabled) {
      ++known;
      if (!*g.ecc_enabled) off.push_back(fmt::format("GPU {}", g.index));
    }
  }
  if (!bad.empty()) return {"gpu.ecc.errors", {{"gpus", GpuList(bad)}}};
  if (known == 0) return {"gpu.ecc.unknown", {}};
  return {"gpu.ecc.ok",
          {{"count", std::to_string(gpus->size())}, {"off", off.empty() ? "-" : GpuList(off)}}};
}

Finding CheckGpuClocks(const SystemView& view, const Facts& f) {
  const auto* gpus = Gpus(f);
  if (gpus == nullptr) return NoGpu("gpu.clocks.no_gpu");
  std::vector<std::string> slow, capped;
  int known = 0;
  for (const auto& g : *gpus) {
    if (!g.throttle_reasons) continue;
    ++known;
    std::string where =
        fmt::format("GPU {}: {} (SM {}/{} MHz, {}°C)", g.index, Join(g.throttle_reason_names, "+"),
                    g.sm_clock_mhz ? std::to_string(*g.sm_clock_mhz) : "?",
                    g.sm_clock_max_mhz ? std::to_string(*g.sm_clock_max_mhz) : "?",
                    g.temperature_c ? std::to_string(*g.temperature_c) : "?");
    if (*g.throttle_reasons & kSlowdownBits) {
      slow.push_back(where);
    } else if (*g.throttle_reasons & nvmlClocksThrottleReasonSwPowerCap) {
      capped.push_back(where);
    }
  }
  if (!slow.empty()) return {"gpu.clocks.throttled", {{"gpus", Join(slow, "; ")}}};
  if (known == 0) return {"gpu.clocks.unknown", {}};
  if (!capped.empty()) return {"gpu.clocks.power_capped", {{"gpus", Join(capped, "; ")}}};
  return {"gpu.clocks.ok", {{"count", std::to_string(known)}}};
}

Finding CheckGpuMemory(const SystemView&, const Facts& f) {
  const auto* gpus = Gpus(f);
  if (gpus == nullptr) return NoGpu("gpu.memory.no_gpu");
  std::vector<std::string> busy, unlisted;
  int known = 0;
  for (const auto& g : *gpus) {
    if (!g.memory_total_bytes || !g.memory_used_bytes) continue;
    ++known;
    uint64_t total = *g.memory_total_bytes, used = *g.memory_used_bytes;
    uint64_t threshold = std::max<uint64_t>(
        kGpuBusyMinBytes, static_cast<uint64_t>(static_cast<double>(total) * kGpuBusyShare));
    if (used < threshold) continue;
    std::string what = fmt::format("GPU {} {}/{}", g.index, Bytes(used), Bytes(total));
    if (g.processes && g.processes->empty()) {
      unlisted.push_back(what);
      continue;
    }
    if (g.processes) {
      std::vector<std::string> pids;
      for (const auto& p : *g.processes) pids.push_back(std::to_string(p.pid));
      what += " (pid " + Join(pids, ",") + ")";
    }
    busy.push_back(what);
  }
  if (known == 0) return {"gpu.memory.unknown", {}};
  if (!unlisted.empty()) return {"gpu.memory.unlisted", {{"gpus", GpuList(unlisted)}}};
  if (!busy.empty()) return {"gpu.memory.busy", {{"gpus", GpuList(busy)}}};
  return {"gpu.memory.ok", {{"count", std::to_string(known)}}};
}

Finding CheckGpuPersistence(const SystemView& view, const Facts& f) {
  const auto* gpus = Gpus(f);
  if (gpus == nullptr) return NoGpu("gpu.persistence.no_gpu");
  std::vector<std::string> off;
  int known = 0;
  for (const auto& g : *gpus) {
    if (!g.persistence_mode) continue;
    ++known;
    if (!*g.persistence_mode) off.push_back(fmt::format("GPU {}", g.index));
  }
  if (known == 0) return {"gpu.persistence.unknown", {}};
  if (!off.empty()) return {"gpu.persistence.off", {{"gpus", GpuList(off)}}};
  return {"gpu.persistence.ok", {{"count", std::to_string(known)}}};
}

Finding CheckGpuMig(const SystemView& view, const Facts& f) {
  const auto* gpus = Gpus(f);
  if (gpus == nullptr) return NoGpu("gpu.mig.no_gpu");
  std::vector<std::string> on;
  int known = 0;
  for (const auto& g : *gpus) {
    if (!g.mig_enabled) continue;
    ++known;
    if (*g.mig_enabled) on.push_back(fmt::format("GPU {}", g.index));
  }
  if (known == 0) return {"gpu.mig.unsupported", {}};
  if (!on.empty()) return {"gpu.mig.on", {{"gpus", GpuList(on)}}};
  return {"gpu.mig.off", {{"count", std::to_string(known)}}};
}

}  // namespace lathe::doctor

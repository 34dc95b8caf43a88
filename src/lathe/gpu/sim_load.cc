#include "lathe/gpu/sim_load.h"

#include <fmt/format.h>

#include <limits>
#include <optional>
#include <set>

#include "lathe/common/json.h"
#include "lathe/common/units.h"

namespace lathe::gpu {
namespace {

constexpr int kMaxTemperatureC = 200;
constexpr int kMaxClockMhz = 10'000;
constexpr double kMaxPowerW = 10'000;
constexpr int kThrottleBits = 64;

constexpr const char* kGpuFields =
    "index, utilization_gpu_pct, utilization_mem_pct, memory_used_bytes, temperature_c, "
    "sm_clock_mhz, sm_clock_max_mhz, power_w, power_limit_w, throttle_reason_names, "
    "ecc_uncorrected_errors, error, processes";

// One load file being applied: where it came from, for the errors.
class Loader {
 public:
  explicit Loader(const std::string& path) : path_(path) {}

  Status Bad(const std::string& field, const std::string& allowed) const {
    return Status::Msg(Code::kInvalidArgument, "gpu.sim_load_field",
                       {{"path", path_}, {"field", field}, {"allowed", allowed}});
  }

  Result<int64_t> Int(const Json& v, const std::string& field, int64_t lo, int64_t hi) const {
    if (!v.is_number_integer() || v.get<int64_t>() < lo || v.get<int64_t>() > hi) {
      return Bad(field, fmt::format("{}…{}", lo, hi));
    }
    return v.get<int64_t>();
  }

  Result<double> Real(const Json& v, const std::string& field, double hi) const {
    if (!v.is_number() || v.get<double>() < 0 || v.get<double>() > hi) {
      return Bad(field, fmt::format("0…{}", hi));
    }
    return v.get<double>();
  }

  // Bytes as a number or a size in Lathe's units ("20GB", "10GiB").
  Result<uint64_t> Bytes(const Json& v, const std::string& field, uint64_t max) const {
    std::optional<uint64_t> bytes;
    if (v.is_number_unsigned()) bytes = v.get<uint64_t>();
    if (v.is_string()) {
      auto parsed = ParseBytes(v.get<std::string>());
      if (parsed.ok()) bytes = *parsed;
    }
    if (!bytes || *bytes > max) return Bad(field, fmt::format("0…{} ({})", FormatBytes(max), max));
    return *bytes;
  }

  Result<uint64_t> Throttle(const Json& v, const std::string& field) const {
    std::string allowed = fmt::format("[{}, bit<N>]", fmt::join(ThrottleReasonNames(0x1ff), ", "));
    if (!v.is_array()) return Bad(field, allowed);
    uint64_t bits = 0;
    for (size_t i = 0; i < v.size(); ++i) {
      std::optional<int> bit;
      if (v[i].is_string()) bit = BitOf(v[i].get<std::string>());
      if (!bit) return Bad(fmt::format("{}[{}]", field, i), allowed);
      bits |= uint64_t{1} << *bit;
    }
    return bits;
  }

  Status Processes(const Json& v, const std::string& field, uint64_t total, GpuInfo& g) const {
    constexpr const char* kShape = "[{\"pid\": 1234, \"used_memory_bytes\": \"10GB\"}]";
    if (!v.is_array()) return Bad(field, kShape);
    std::vector<GpuProcess> out;
    for (size_t i = 0; i < v.size(); ++i) {
      std::string at = fmt::format("{}[{}]", field, i);
      if (!v[i].is_object()) return Bad(at, kShape);
      GpuProcess p;
      for (const auto& [key, value] : v[i].items()) {
        std::string f = at + "." + key;
        if (key == "pid") {
          ASSIGN_OR_RETURN(int64_t pid, Int(value, f, 1, std::numeric_limits<int>::max()));
          p.pid = static_cast<int>(pid);
        } else if (key == "used_memory_bytes") {
          ASSIGN_OR_RETURN(p.used_memory_bytes, Bytes(value, f, total));
        } else {
          return Bad(f, "pid, used_memory_bytes");
        }
      }
      if (p.pid == 0) return Bad(at + ".pid", fmt::format("1…{}", std::numeric_limits<int>::max()));
      out.push_back(p);
    }
    g.processes = std::move(out);
    return Status::OK();
  }

  // Applies one entry of "gpus" (at `field`) to `g`.
  Status Gpu(const Json& e, const std::string& field, GpuInfo& g) const {
    const uint64_t total = g.memory_total_bytes.value_or(0);
    std::optional<uint64_t> used;
    for (const auto& [key, v] : e.items()) {
      std::string f = field + "." + key;
      if (key == "index") continue;
      if (key == "utilization_gpu_pct") {
        ASSIGN_OR_RETURN(g.utilization_gpu_pct, Int(v, f, 0, 100));
      } else if (key == "utilization_mem_pct") {
        ASSIGN_OR_RETURN(g.utilization_mem_pct, Int(v, f, 0, 100));
      } else if (key == "memory_used_bytes") {
        ASSIGN_OR_RETURN(used, Bytes(v, f, total));
      } else if (key == "temperature_c") {
        ASSIGN_OR_RETURN(g.temperature_c, Int(v, f, 0, kMaxTemperatureC));
      } else if (key == "sm_clock_mhz") {
        ASSIGN_OR_RETURN(g.sm_clock_mhz, Int(v, f, 0, kMaxClockMhz));
      } else if (key == "sm_clock_max_mhz") {
        ASSIGN_OR_RETURN(g.sm_clock_max_mhz, Int(v, f, 0, kMaxClockMhz));
      } else if (key == "power_w") {
        ASSIGN_OR_RETURN(g.power_w, Real(v, f, kMaxPowerW));
      } else if (key == "power_limit_w") {
        ASSIGN_OR_RETURN(g.power_limit_w, Real(v, f, kMaxPowerW));
      } else if (key == "throttle_reason_names") {
        ASSIGN_OR_RETURN(uint64_t bits, Throttle(v, f));
        g.throttle_reasons = bits;
        g.throttle_reason_names = ThrottleReasonNames(bits);
      } else if (key == "ecc_uncorrected_errors") {
        ASSIGN_OR_RETURN(g.ecc_uncorrected_errors,
                         Int(v, f, 0, std::numeric_limits<int64_t>::max()));
      } else if (key == "error") {
        if (!v.is_string()) return Bad(f, "\"…\"");
        g.error = v.get<std::string>();
      } else if (key == "processes") {
        RETURN_IF_ERROR(Processes(v, f, total, g));
      } else {
        return Bad(f, kGpuFields);
      }
    }
    // Unless the file says otherwise, the memory in use is what its processes hold.
    uint64_t held = 0;
    for (const GpuProcess& p : *g.processes) held += p.used_memory_bytes.value_or(0);
    if (!used && held > total) {
      return Bad(field + ".processes", fmt::format("0…{} in all", FormatBytes(total)));
    }
    g.memory_used_bytes = used.value_or(held);
    return Status::OK();
  }

 private:
  static std::optional<int> BitOf(const std::string& name) {
    for (int bit = 0; bit < kThrottleBits; ++bit) {
      if (ThrottleReasonNames(uint64_t{1} << bit).front() == name) return bit;
    }
    return std::nullopt;
  }

  const std::string& path_;
};

}  // namespace

Status ApplySimLoad(std::string_view text, const std::string& path, std::vector<GpuInfo>& gpus) {
  auto parsed = ParseJson(text);
  if (!parsed.ok()) {
    return Status::Msg(Code::kInvalidArgument, "gpu.sim_load_json",
                       {{"path", path}, {"error", parsed.status().message()}});
  }
  Loader load(path);
  const Json& root = *parsed;
  constexpr const char* kShape = "{\"gpus\": [{\"index\": 0, …}]}";
  if (!root.is_object()) return load.Bad("(top level)", kShape);
  for (const auto& [key, v] : root.items()) {
    if (key != "gpus") return load.Bad(key, "gpus");
  }
  if (!root.contains("gpus") || !root["gpus"].is_array()) return load.Bad("gpus", kShape);

  std::vector<GpuInfo> out = gpus;
  std::set<int64_t> seen;
  const int64_t last = static_cast<int64_t>(gpus.size()) - 1;
  const Json& list = root["gpus"];
  for (size_t i = 0; i < list.size(); ++i) {
    std::string field = fmt::format("gpus[{}]", i);
    if (!list[i].is_object()) return load.Bad(field, "{\"index\": 0, …}");
    if (!list[i].contains("index")) return load.Bad(field + ".index", fmt::format("0…{}", last));
    ASSIGN_OR_RETURN(int64_t index, load.Int(list[i]["index"], field + ".index", 0, last));
    if (!seen.insert(index).second) {
      return load.Bad(field + ".index", fmt::format("0…{}, each once", last));
    }
    RETURN_IF_ERROR(load.Gpu(list[i], field, out[index]));
  }
  gpus = std::move(out);
  return Status::OK();
}

}  // namespace lathe::gpu

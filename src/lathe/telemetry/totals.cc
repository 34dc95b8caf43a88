#include "lathe/telemetry/totals.h"

#include <algorithm>

#include "lathe/gpu/inventory.h"

namespace lathe::telemetry {
namespace {

constexpr uint64_t kGpuIdleBit = 1;  // bit 0, "gpu_idle": the GPU has nothing to do

double MaxOf(double a, double b) {
  if (std::isnan(b)) return a;
  return std::isnan(a) ? b : std::max(a, b);
}

Json Num(double v) { return std::isnan(v) ? Json(nullptr) : Json(v); }
double Val(const Json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<double>() : kUnknown;
}

}  // namespace

uint64_t ThrottlingBits(uint64_t reasons) { return reasons & ~kGpuIdleBit; }

namespace {
// The time the sample at `t_ms` stands for, given the one before at `last_ms`.
int64_t Span(int64_t t_ms, int64_t last_ms, int64_t samples, int64_t interval_ms) {
  if (samples == 0 || t_ms <= last_ms) return interval_ms;
  return std::min(t_ms - last_ms, kMaxGapIntervals * interval_ms);
}
}  // namespace

void Totals::AddTick(int64_t t_ms, uint64_t reasons, int64_t interval_ms) {
  const int64_t dt = Span(t_ms, last_ms, samples, interval_ms);
  if (samples == 0) first_ms = t_ms;
  ++samples;
  last_ms = t_ms;
  observed_ms += dt;
  uint64_t bits = ThrottlingBits(reasons);
  if (bits == 0) return;
  throttled_ms += dt;
  for (const std::string& name : gpu::ThrottleReasonNames(bits)) reason_ms[name] += dt;
}

void Totals::Add(const Point& p, bool host, int64_t interval_ms) {
  if (host) {
    if (p.known[kCpuCores]) {
      cpu_sum += p.mean[kCpuCores];
      ++cpu_n;
      cpu_max = MaxOf(cpu_max, p.max[kCpuCores]);
    }
    host_memory_peak = MaxOf(host_memory_peak, p.max[kHostMemory]);
    return;
  }
  AddTick(p.t_ms, p.reasons, interval_ms);
  AddValues(p);
}

void Totals::AddValues(const Point& p) {
  if (p.known[kUtilization]) {
    utilization_sum += p.mean[kUtilization];
    ++utilization_n;
    utilization_max = MaxOf(utilization_max, p.max[kUtilization]);
  }
  memory_peak = MaxOf(memory_peak, p.max[kMemoryUsed]);
  process_memory_peak = MaxOf(process_memory_peak, p.max[kProcessMemory]);
}

double Totals::MeanUtilization() const {
  return utilization_n > 0 ? utilization_sum / static_cast<double>(utilization_n) : kUnknown;
}

Json Totals::ToJson() const {
  return Json{{"samples", samples},
              {"first_ms", first_ms},
              {"last_ms", last_ms},
              {"observed_ms", observed_ms},
              {"throttled_ms", throttled_ms},
              {"reason_ms", reason_ms},
              {"utilization_sum", utilization_sum},
              {"utilization_n", utilization_n},
              {"utilization_max", Num(utilization_max)},
              {"memory_peak", Num(memory_peak)},
              {"process_memory_peak", Num(process_memory_peak)},
              {"cpu_sum", cpu_sum},
              {"cpu_n", cpu_n},
              {"cpu_max", Num(cpu_max)},
              {"host_memory_peak", Num(host_memory_peak)}};
}

Totals Totals::FromJson(const Json& j) {
  Totals t;
  if (!j.is_object()) return t;
  t.samples = j.value("samples", int64_t{0});
  t.first_ms = j.value("first_ms", int64_t{0});
  t.last_ms = j.value("last_ms", int64_t{0});
  t.observed_ms = j.value("observed_ms", int64_t{0});
  t.throttled_ms = j.value("throttled_ms", int64_t{0});
  if (auto it = j.find("reason_ms"); it != j.end() && it->is_object()) {
    for (const auto& [k, v] : it->items()) {
      if (v.is_number_integer()) t.reason_ms[k] = v.get<int64_t>();
    }
  }
  t.utilization_sum = Val(j, "utilization_sum");
  if (std::isnan(t.utilization_sum)) t.utilization_sum = 0;
  t.utilization_n = j.value("utilization_n", int64_t{0});
  t.utilization_max = Val(j, "utilization_max");
  t.memory_peak = Val(j, "memory_peak");
  t.process_memory_peak = Val(j, "process_memory_peak");
  t.cpu_sum = Val(j, "cpu_sum");
  if (std::isnan(t.cpu_sum)) t.cpu_sum = 0;
  t.cpu_n = j.value("cpu_n", int64_t{0});
  t.cpu_max = Val(j, "cpu_max");
  t.host_memory_peak = Val(j, "host_memory_peak");
  return t;
}

}  // namespace lathe::telemetry

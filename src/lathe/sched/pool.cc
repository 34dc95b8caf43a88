#include "lathe/sched/pool.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "lathe/common/units.h"

namespace lathe::sched {
namespace {

// Larger than any machine (1 EiB), small enough that sums of a few never overflow.
constexpr uint64_t kMaxMemory = uint64_t{1} << 60;

std::string Cpus(double c) { return fmt::format("{:g}", c); }

// Maximal runs of consecutive indices, as [first, last] pairs, ascending.
std::vector<std::pair<int, int>> Runs(const std::set<int>& s) {
  std::vector<std::pair<int, int>> runs;
  for (int i : s) {
    if (!runs.empty() && runs.back().second + 1 == i) {
      runs.back().second = i;
    } else {
      runs.push_back({i, i});
    }
  }
  return runs;
}

}  // namespace

Amount operator+(const Amount& a, const Amount& b) {
  return {a.gpus + b.gpus, a.cpus + b.cpus, a.memory_bytes + b.memory_bytes};
}
Amount operator-(const Amount& a, const Amount& b) {
  return {a.gpus - b.gpus, a.cpus - b.cpus, a.memory_bytes - b.memory_bytes};
}
Amount& operator+=(Amount& a, const Amount& b) { return a = a + b; }
Amount& operator-=(Amount& a, const Amount& b) { return a = a - b; }

Amount ToAmount(const Resources& r) {
  return {r.gpus, r.cpus, static_cast<int64_t>(std::min(r.memory_bytes, kMaxMemory))};
}

Resources ToResources(const Amount& a) {
  Amount c = ClampNonNegative(a);
  int gpus = static_cast<int>(std::min<int64_t>(c.gpus, std::numeric_limits<int>::max()));
  return {gpus, c.cpus, static_cast<uint64_t>(c.memory_bytes)};
}

Amount ClampNonNegative(const Amount& a) {
  return {std::max<int64_t>(a.gpus, 0), std::max(a.cpus, 0.0),
          std::max<int64_t>(a.memory_bytes, 0)};
}

bool Covers(const Amount& have, const Amount& need) {
  Amount s = Shortfall(need, have);
  return s.gpus == 0 && s.cpus == 0 && s.memory_bytes == 0;
}

Amount Shortfall(const Amount& need, const Amount& have) {
  Amount s;
  if (need.gpus > 0 && need.gpus > have.gpus) s.gpus = need.gpus - have.gpus;
  if (need.cpus > kCpuEpsilon && need.cpus > have.cpus + kCpuEpsilon)
    s.cpus = need.cpus - have.cpus;
  if (need.memory_bytes > 0 && need.memory_bytes > have.memory_bytes) {
    s.memory_bytes = need.memory_bytes - have.memory_bytes;
  }
  return s;
}

bool Helps(const Amount& give, const Amount& need) {
  return (give.gpus > 0 && need.gpus > 0) || (give.cpus > 0 && need.cpus > kCpuEpsilon) ||
         (give.memory_bytes > 0 && need.memory_bytes > 0);
}

std::string Describe(const Amount& a) {
  std::vector<std::string> parts;
  if (a.gpus != 0) parts.push_back(fmt::format("{} GPU{}", a.gpus, a.gpus == 1 ? "" : "s"));
  if (std::fabs(a.cpus) > kCpuEpsilon) parts.push_back(Cpus(a.cpus) + " cpus");
  if (a.memory_bytes > 0)
    parts.push_back(FormatBytes(static_cast<uint64_t>(a.memory_bytes)) + " memory");
  if (parts.empty()) return "nothing";
  return fmt::format("{}", fmt::join(parts, ", "));
}

std::string DescribeShortfall(const Amount& need, const Amount& have) {
  Amount h = ClampNonNegative(have);
  Amount s = Shortfall(need, have);
  std::vector<std::string> parts;
  if (s.gpus > 0) {
    parts.push_back(
        fmt::format("needs {} GPU{}, {} free", need.gpus, need.gpus == 1 ? "" : "s", h.gpus));
  }
  if (s.cpus > 0) {
    parts.push_back(fmt::format("needs {} cpus, {} free", Cpus(need.cpus), Cpus(h.cpus)));
  }
  if (s.memory_bytes > 0) {
    parts.push_back(fmt::format("needs {} memory, {} free", FormatBytes(need.memory_bytes),
                                FormatBytes(h.memory_bytes)));
  }
  return fmt::format("{}", fmt::join(parts, "; "));
}

Amount FreePool::amount() const { return {static_cast<int64_t>(gpus.size()), cpus, memory_bytes}; }

std::set<int> FreePool::GpusFor(const Resources& r) const {
  if (r.gpu_type.empty()) return gpus;
  std::set<int> out;
  for (int g : gpus) {
    if (g >= 0 && static_cast<size_t>(g) < gpu_names.size() &&
        GpuTypeMatches(gpu_names[static_cast<size_t>(g)], r.gpu_type)) {
      out.insert(g);
    }
  }
  return out;
}

bool FreePool::Fits(const Resources& r) const {
  if (!Covers(amount(), ToAmount(r))) return false;
  return r.gpus <= 0 || r.gpu_type.empty() || GpusFor(r).size() >= static_cast<size_t>(r.gpus);
}

std::vector<int> FreePool::Take(const Resources& r) {
  std::vector<int> picked = PickGpus(GpusFor(r), r.gpus);
  for (int g : picked) gpus.erase(g);
  Amount a = ToAmount(r);
  cpus -= a.cpus;
  memory_bytes -= a.memory_bytes;
  return picked;
}

std::vector<int> PickGpus(const std::set<int>& free, int count) {
  if (count <= 0) return {};
  // 1. Best-fitting run of consecutive indices.
  const std::pair<int, int>* best = nullptr;
  std::vector<std::pair<int, int>> runs = Runs(free);
  for (const auto& run : runs) {
    int len = run.second - run.first + 1;
    if (len >= count && (!best || len < best->second - best->first + 1)) best = &run;
  }
  std::vector<int> out;
  if (best) {
    for (int i = 0; i < count; ++i) out.push_back(best->first + i);
    return out;
  }
  // 2. Lowest indices.
  for (int g : free) {
    if (static_cast<int>(out.size()) == count) break;
    out.push_back(g);
  }
  return out;
}

}  // namespace lathe::sched

#include "lathe/doctor/check_util.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <sstream>

#include "lathe/common/units.h"
#include "lathe/doctor/check_texts.h"

namespace lathe::doctor {
namespace {

// cgroup v1 writes PAGE_COUNTER_MAX × page size for "no limit" (~2⁶³).
constexpr uint64_t kV1NoLimit = 1ULL << 62;

std::string_view Trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

// (hierarchy id, controllers, path) lines of /proc/self/cgroup.
struct CgroupLine {
  std::string controllers;
  std::string path;
};

std::vector<CgroupLine> CgroupLines(const SystemView& view) {
  std::vector<CgroupLine> out;
  auto text = view.ReadFile("/proc/self/cgroup");
  if (!text.ok()) return out;
  std::istringstream in(*text);
  std::string line;
  while (std::getline(in, line)) {
    size_t a = line.find(':');
    size_t b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    out.push_back({line.substr(a + 1, b - a - 1), line.substr(b + 1)});
  }
  return out;
}

bool HasController(const std::string& list, std::string_view name) {
  std::istringstream in(list);
  std::string c;
  while (std::getline(in, c, ',')) {
    if (c == name) return true;
  }
  return false;
}

// `dir` and its ancestors up to `root`, deepest first.
std::vector<std::string> UpTo(const std::string& root, const std::string& rel) {
  std::vector<std::string> out;
  std::string p = rel;
  while (true) {
    while (p.size() > 1 && p.back() == '/') p.pop_back();
    out.push_back(root + (p == "/" ? "" : p));
    if (p.empty() || p == "/") break;
    size_t slash = p.rfind('/');
    p = slash == 0 || slash == std::string::npos ? "/" : p.substr(0, slash);
  }
  return out;
}

struct CgroupDirs {
  bool v2 = false;
  std::vector<std::string> dirs;  // the process's cgroup first, then its ancestors
};

// Where `controller` lives for this process: its v1 hierarchy when it has
// one, else the unified ("0::") v2 tree.
std::optional<CgroupDirs> FindCgroup(const SystemView& view, std::string_view controller) {
  std::optional<std::string> v2;
  for (const auto& l : CgroupLines(view)) {
    if (HasController(l.controllers, controller)) {
      return CgroupDirs{false, UpTo("/sys/fs/cgroup/" + std::string(controller), l.path)};
    }
    if (l.controllers.empty()) v2 = l.path;
  }
  if (v2) return CgroupDirs{true, UpTo("/sys/fs/cgroup", *v2)};
  return std::nullopt;
}

std::optional<uint64_t> SmallestLimit(const SystemView& view, const std::vector<std::string>& dirs,
                                      const char* file) {
  std::optional<uint64_t> best;
  for (const auto& d : dirs) {
    auto line = ReadLine(view, d + "/" + file);
    if (!line || *line == "max") continue;
    auto v = ParseU64(*line);
    if (!v || *v >= kV1NoLimit) continue;
    best = best ? std::min(*best, *v) : *v;
  }
  return best;
}

}  // namespace

std::string Bytes(uint64_t bytes) { return bytes == kUnlimited ? "unlimited" : FormatBytes(bytes); }

std::optional<uint64_t> ParseU64(std::string_view text) {
  text = Trim(text);
  uint64_t v = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || p != text.data() + text.size() || text.empty()) return std::nullopt;
  return v;
}

std::optional<uint64_t> MeminfoBytes(std::string_view meminfo, std::string_view key) {
  std::string k = std::string(key) + ":";
  size_t at = meminfo.find(k);
  while (at != std::string_view::npos && at > 0 && meminfo[at - 1] != '\n') {
    at = meminfo.find(k, at + 1);
  }
  if (at == std::string_view::npos) return std::nullopt;
  size_t end = meminfo.find('\n', at);
  std::string_view rest = meminfo.substr(
      at + k.size(), end == std::string_view::npos ? std::string_view::npos : end - at - k.size());
  rest = Trim(rest);
  bool kb = rest.ends_with("kB");
  if (kb) rest = Trim(rest.substr(0, rest.size() - 2));
  auto v = ParseU64(rest);
  if (!v) return std::nullopt;
  return kb ? *v * 1024 : *v;
}

std::optional<uint64_t> ReadMeminfo(const SystemView& view, std::string_view key) {
  auto text = view.ReadFile("/proc/meminfo");
  if (!text.ok()) return std::nullopt;
  return MeminfoBytes(*text, key);
}

std::optional<uint64_t> KeyedNumber(std::string_view text, std::string_view key) {
  while (!text.empty()) {
    size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    if (line.size() > key.size() && line.starts_with(key) &&
        std::isspace(static_cast<unsigned char>(line[key.size()]))) {
      return ParseU64(line.substr(key.size()));
    }
  }
  return std::nullopt;
}

std::optional<std::string> ReadLine(const SystemView& view, const std::string& path) {
  auto text = view.ReadFile(path);
  if (!text.ok()) return std::nullopt;
  std::string_view s = *text;
  size_t nl = s.find('\n');
  return std::string(Trim(s.substr(0, nl)));
}

std::optional<CudaVersion> ParseCudaVersion(std::string_view s) {
  s = Trim(s);
  CudaVersion v;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v.major);
  if (ec != std::errc() || p == s.data() + s.size() || *p != '.') return std::nullopt;
  auto [q, ec2] = std::from_chars(p + 1, s.data() + s.size(), v.minor);
  if (ec2 != std::errc()) return std::nullopt;
  return v;
}

std::optional<CgroupMemory> ReadCgroupMemory(const SystemView& view) {
  auto cg = FindCgroup(view, "memory");
  if (!cg) return std::nullopt;
  bool v2 = cg->v2;
  const std::vector<std::string>& dirs = cg->dirs;
  CgroupMemory m;
  m.v2 = v2;
  const char* limit_file = v2 ? "memory.max" : "memory.limit_in_bytes";
  // In a container without a cgroup namespace the host path may not exist
  // here; the nearest directory that does is the one mounted for us.
  for (const auto& d : dirs) {
    if (view.ReadFile(d + "/" + limit_file).ok()) {
      m.path = d;
      break;
    }
  }
  if (m.path.empty()) return std::nullopt;
  m.limit_bytes = SmallestLimit(view, dirs, limit_file);
  if (auto u = ReadLine(view, m.path + (v2 ? "/memory.current" : "/memory.usage_in_bytes"))) {
    m.usage_bytes = ParseU64(*u);
  }
  return m;
}

std::optional<double> ReadCgroupCpuQuota(const SystemView& view) {
  auto cg = FindCgroup(view, "cpu");
  if (!cg) return std::nullopt;
  const std::string& path = cg->dirs.front();
  if (cg->v2) {  // v2: "max 100000" or "200000 100000"
    auto line = ReadLine(view, path + "/cpu.max");
    if (!line) return std::nullopt;
    std::istringstream in(*line);
    std::string quota, period;
    in >> quota >> period;
    auto q = ParseU64(quota), p = ParseU64(period);
    if (!q || !p || *p == 0) return std::nullopt;
    return double(*q) / double(*p);
  }
  auto q = ReadLine(view, path + "/cpu.cfs_quota_us");
  auto p = ReadLine(view, path + "/cpu.cfs_period_us");
  if (!q || !p || q->starts_with("-")) return std::nullopt;
  auto qv = ParseU64(*q), pv = ParseU64(*p);
  if (!qv || !pv || *pv == 0) return std::nullopt;
  return double(*qv) / double(*pv);
}

std::string MountType(const SystemView& view, const std::string& path) {
  auto text = view.ReadFile("/proc/self/mounts");
  if (!text.ok()) return "";
  std::istringstream in(*text);
  std::string dev, mnt, type, rest, best_type;
  size_t best_len = 0;
  while (in >> dev >> mnt >> type && std::getline(in, rest)) {
    bool under = path == mnt || (path.starts_with(mnt) && (mnt == "/" || path[mnt.size()] == '/'));
    if (under && mnt.size() >= best_len) {
      best_len = mnt.size();
      best_type = type;
    }
  }
  return best_type;
}

std::string ExistingAncestor(const SystemView& view, const std::string& path) {
  std::string p = path.empty() ? "/" : path;
  while (p.size() > 1 && !view.StatFs(p).ok()) {
    size_t slash = p.rfind('/');
    p = slash == 0 || slash == std::string::npos ? "/" : p.substr(0, slash);
  }
  return p;
}

Finding Worst(const std::vector<Finding>& findings) {
  auto rank = [](const Finding& f) {
    const OutcomeText* o = CheckTexts::Default().Outcome(f.outcome);
    if (o == nullptr) return 0;
    switch (o->severity) {
      case Severity::kFail:
        return 4;
      case Severity::kWarn:
        return 3;
      case Severity::kOk:
        return 2;
      case Severity::kSkipped:
        return 1;
    }
    return 0;
  };
  const Finding* best = nullptr;
  for (const auto& f : findings) {
    if (best == nullptr || rank(f) > rank(*best)) best = &f;
  }
  return best != nullptr ? *best : Finding{};
}

}  // namespace lathe::doctor

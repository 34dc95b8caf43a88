#include "lathe/exec/slurm/slurm_sinfo.h"

#include <algorithm>
#include <charconv>
#include <limits>
#include <map>
#include <string>

#include <fmt/format.h>

namespace lathe::exec {
namespace {

constexpr size_t kSinfoFields = 10;

std::vector<std::string_view> Split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  size_t start = 0;
  while (true) {
    size_t at = s.find(sep, start);
    out.push_back(s.substr(start, at == std::string_view::npos ? at : at - start));
    if (at == std::string_view::npos) return out;
    start = at + 1;
  }
}

// Splits on commas outside parentheses: "gpu:a:2(IDX:0,2),shard:4" is two.
std::vector<std::string_view> SplitTopLevel(std::string_view s) {
  std::vector<std::string_view> out;
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '(') ++depth;
    if (s[i] == ')' && depth > 0) --depth;
    if (s[i] == ',' && depth == 0) {
      out.push_back(s.substr(start, i - start));
      start = i + 1;
    }
  }
  out.push_back(s.substr(start));
  return out;
}

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

bool AllDigits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// A whole number of at most 9 digits (no sign, no overflow possible).
std::optional<int64_t> SmallNumber(std::string_view s) {
  if (!AllDigits(s) || s.size() > 9) return std::nullopt;
  int64_t v = 0;
  std::from_chars(s.data(), s.data() + s.size(), v);
  return v;
}

bool HasControl(std::string_view s) {
  return std::any_of(s.begin(), s.end(), [](char c) {
    auto u = static_cast<unsigned char>(c);
    return u < 0x20 || u == 0x7f;
  });
}

// A sum that stays an int whatever a hostile sinfo reports.
void AddCapped(int& to, int64_t v) {
  to = static_cast<int>(std::min<int64_t>(std::numeric_limits<int>::max(), int64_t{to} + v));
}

}  // namespace

std::vector<std::string> SinfoArgs() {
  return {"--noheader", "--Node",
          "--Format=PartitionName:0|,Partition:0|,NodeList:0|,StateLong:0|,CPUsState:0|,Gres:0|,"
          "GresUsed:0|,Memory:0|,Time:0|,Available:0"};
}

std::optional<int64_t> ParseSlurmDuration(std::string_view s) {
  std::string low = Lower(s);
  if (low == "infinite" || low == "unlimited") return -1;
  int64_t days = 0;
  bool with_days = false;
  if (size_t dash = s.find('-'); dash != std::string_view::npos) {
    auto d = SmallNumber(s.substr(0, dash));
    if (!d) return std::nullopt;
    days = *d;
    with_days = true;
    s = s.substr(dash + 1);
  }
  std::vector<std::string_view> parts = Split(s, ':');
  if (parts.size() > 3) return std::nullopt;
  std::vector<int64_t> v;
  for (std::string_view p : parts) {
    auto n = SmallNumber(p);
    if (!n) return std::nullopt;
    v.push_back(*n);
  }
  int64_t h = 0, m = 0, sec = 0;
  if (with_days) {  // D-HH, D-HH:MM, D-HH:MM:SS
    h = v[0];
    if (v.size() > 1) m = v[1];
    if (v.size() > 2) sec = v[2];
  } else if (v.size() == 1) {  // MM
    m = v[0];
  } else if (v.size() == 2) {  // MM:SS
    m = v[0];
    sec = v[1];
  } else {  // HH:MM:SS
    h = v[0];
    m = v[1];
    sec = v[2];
  }
  // Each part is below 10^9: the sum fits in int64 milliseconds.
  return (((days * 24 + h) * 60 + m) * 60 + sec) * 1000;
}

int GresGpuCount(std::string_view gres, std::vector<std::string>* types) {
  int total = 0;
  for (std::string_view item : SplitTopLevel(gres)) {
    if (size_t paren = item.find('('); paren != std::string_view::npos)
      item = item.substr(0, paren);
    std::vector<std::string_view> f = Split(item, ':');
    if (f[0] != "gpu") continue;
    std::string_view type;
    int64_t count = 0;
    if (f.size() == 1) {
      count = 1;
    } else if (f.size() == 2) {
      if (AllDigits(f[1])) {
        count = SmallNumber(f[1]).value_or(0);
      } else {
        type = f[1];
        count = 1;
      }
    } else if (f.size() == 3) {
      type = f[1];
      count = SmallNumber(f[2]).value_or(0);
    }
    AddCapped(total, count);
    if (types && count > 0 && !type.empty() &&
        std::find(types->begin(), types->end(), type) == types->end()) {
      types->emplace_back(type);
    }
  }
  return total;
}

SlurmNodeClass ClassifyNodeState(std::string_view state_long) {
  std::string low = Lower(state_long);
  size_t end = 0;
  while (end < low.size() && ((low[end] >= 'a' && low[end] <= 'z') || low[end] == '_')) ++end;
  std::string base = low.substr(0, end);
  if (low.find('*') != std::string::npos) return SlurmNodeClass::kDown;  // not responding
  if (base == "idle") return SlurmNodeClass::kIdle;
  if (base == "allocated" || base == "alloc" || base == "mixed" || base == "mix" ||
      base == "completing" || base == "comp") {
    return SlurmNodeClass::kAllocated;
  }
  if (base == "down" || base == "drained" || base == "drain" || base == "draining" ||
      base == "drng" || base == "fail" || base == "failing" || base == "failg") {
    return SlurmNodeClass::kDown;
  }
  return SlurmNodeClass::kOther;
}

Result<std::vector<Partition>> ParseSinfo(std::string_view out) {
  std::vector<Partition> parts;
  std::map<std::string, size_t, std::less<>> index;
  for (std::string_view line : Split(out, '\n')) {
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.find_first_not_of(" \t") == std::string_view::npos) continue;
    auto bad = [&](std::string_view why) {
      std::string shown(line.substr(0, 200));
      for (char& c : shown) {
        if (HasControl(std::string_view(&c, 1))) c = '?';
      }
      return Status::InvalidArgument(fmt::format("sinfo: {}: \"{}\"", why, shown));
    };
    if (HasControl(line)) return bad("a control character");
    std::vector<std::string_view> f = Split(line, '|');
    if (f.size() != kSinfoFields) {
      return bad(fmt::format("{} fields, not {}", f.size(), kSinfoFields));
    }
    std::string_view name = f[0];
    if (name.empty()) return bad("no partition name");
    std::vector<std::string_view> cpus = Split(f[4], '/');
    if (cpus.size() != 4) return bad("CPUs are not allocated/idle/other/total");
    auto cpus_alloc = SmallNumber(cpus[0]);
    auto cpus_total = SmallNumber(cpus[3]);
    if (!cpus_alloc || !cpus_total) return bad("a CPU count is not a number");
    auto memory = SmallNumber(f[7]);
    if (!memory) return bad("the memory is not a number");

    auto it = index.find(name);
    if (it == index.end()) {
      Partition p;
      p.name = std::string(name);
      p.is_default = f[1].ends_with('*');
      p.state = Lower(f[9]);
      p.max_time_ms = ParseSlurmDuration(f[8]).value_or(-1);
      parts.push_back(std::move(p));
      it = index.emplace(std::string(name), parts.size() - 1).first;
    }
    Partition& p = parts[it->second];
    AddCapped(p.nodes_total, 1);
    switch (ClassifyNodeState(f[3])) {
      case SlurmNodeClass::kIdle:
        AddCapped(p.nodes_idle, 1);
        break;
      case SlurmNodeClass::kAllocated:
        AddCapped(p.nodes_allocated, 1);
        break;
      case SlurmNodeClass::kDown:
        AddCapped(p.nodes_down, 1);
        break;
      case SlurmNodeClass::kOther:
        break;
    }
    AddCapped(p.cpus_total, *cpus_total);
    AddCapped(p.cpus_allocated, *cpus_alloc);
    AddCapped(p.gpus_total, GresGpuCount(f[5], &p.gpu_types));
    AddCapped(p.gpus_used, GresGpuCount(f[6]));
    p.memory_mb = std::min<int64_t>(p.memory_mb + *memory, std::numeric_limits<int64_t>::max() / 2);
  }
  for (Partition& p : parts) std::sort(p.gpu_types.begin(), p.gpu_types.end());
  return parts;
}

}  // namespace lathe::exec

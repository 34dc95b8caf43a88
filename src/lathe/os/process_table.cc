#include "lathe/os/process_table.h"

#include <unistd.h>

#include <charconv>
#include <sstream>

#include "lathe/os/files.h"
#include "lathe/os/process.h"

namespace lathe::os {
namespace {

// /proc/PID/stat fields after the command name (which may hold spaces and
// ')'); index 0 is the state (field 3 of proc(5)).
std::vector<std::string> StatFieldsOf(pid_t pid) {
  auto text = ReadFile("/proc/" + std::to_string(pid) + "/stat");
  std::vector<std::string> out;
  if (!text.ok()) return out;
  size_t close = text->rfind(')');
  if (close == std::string::npos) return out;
  std::istringstream in(text->substr(close + 1));
  std::string f;
  while (in >> f) out.push_back(f);
  return out;
}

uint64_t ToU64(const std::string& s) {
  uint64_t v = 0;
  std::from_chars(s.data(), s.data() + s.size(), v);
  return v;
}

class RealTable final : public ProcessTable {
 public:
  std::optional<pid_t> Parent(pid_t pid) override { return ParentPid(pid); }

  std::vector<std::string> CgroupPaths(pid_t pid) override {
    auto text = ReadFile("/proc/" + std::to_string(pid) + "/cgroup");
    return text.ok() ? ParseProcCgroup(*text) : std::vector<std::string>{};
  }

  std::optional<ProcessUsage> Usage(pid_t pid) override {
    // proc(5): utime and stime are fields 14 and 15, in clock ticks.
    constexpr size_t kUtime = 14 - 3, kStime = 15 - 3;
    std::vector<std::string> f = StatFieldsOf(pid);
    if (f.size() <= kStime) return std::nullopt;
    static const long ticks = ::sysconf(_SC_CLK_TCK);
    static const long page = ::sysconf(_SC_PAGE_SIZE);
    ProcessUsage u;
    u.cpu_us = (ToU64(f[kUtime]) + ToU64(f[kStime])) * 1'000'000 / static_cast<uint64_t>(ticks);
    auto statm = ReadFile("/proc/" + std::to_string(pid) + "/statm");
    if (statm.ok()) {
      std::istringstream in(*statm);
      uint64_t size = 0, resident = 0;
      if (in >> size >> resident) u.rss_bytes = resident * static_cast<uint64_t>(page);
    }
    return u;
  }
};

}  // namespace

std::vector<std::string> ParseProcCgroup(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    size_t first = line.find(':');
    size_t second = first == std::string::npos ? first : line.find(':', first + 1);
    if (second == std::string::npos) continue;
    out.push_back(line.substr(second + 1));
  }
  return out;
}

ProcessTable& RealProcessTable() {
  static RealTable* table = new RealTable();
  return *table;
}

}  // namespace lathe::os

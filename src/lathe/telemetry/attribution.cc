#include "lathe/telemetry/attribution.h"

#include <algorithm>
#include <optional>
#include <unordered_map>

namespace lathe::telemetry {
namespace {

int Components(std::string_view p) { return static_cast<int>(std::count(p.begin(), p.end(), '/')); }

}  // namespace

bool CgroupPathUnder(const std::string& proc_path, const std::string& dir) {
  // Two components at least ("/lathe/r-1"): a bare "/r-1" could be anyone's.
  for (size_t end = proc_path.size(); end != std::string::npos && end > 0;
       end = proc_path.rfind('/', end - 1)) {
    std::string_view prefix(proc_path.data(), end);
    if (Components(prefix) < 2) break;
    if (dir.ends_with(prefix)) return true;
    if (end == 0) break;
  }
  return false;
}

Attribution Attribute(const gpu::Inventory& inventory, const std::vector<RunProcesses>& runs,
                      os::ProcessTable& table) {
  std::unordered_map<pid_t, const std::string*> owner;  // step 1
  for (const RunProcesses& r : runs) {
    for (pid_t p : r.pids) owner.emplace(p, &r.run_id);
  }
  auto by_cgroup = [&](pid_t pid) -> const std::string* {  // step 2
    for (const std::string& path : table.CgroupPaths(pid)) {
      for (const RunProcesses& r : runs) {
        for (const std::string& dir : r.cgroup_dirs) {
          if (CgroupPathUnder(path, dir)) return &r.run_id;
        }
      }
    }
    return nullptr;
  };
  auto by_ancestor = [&](pid_t pid) -> const std::string* {  // step 3
    pid_t at = pid;
    for (int i = 0; i < kMaxAncestors; ++i) {
      std::optional<pid_t> parent = table.Parent(at);
      if (!parent || *parent <= 1 || *parent == at) return nullptr;
      if (auto it = owner.find(*parent); it != owner.end()) return it->second;
      at = *parent;
    }
    return nullptr;
  };

  Attribution out;
  for (const gpu::GpuInfo& g : inventory.gpus) {
    if (!g.processes) continue;
    for (const gpu::GpuProcess& p : *g.processes) {
      const std::string* run = nullptr;
      if (auto it = owner.find(p.pid); it != owner.end()) run = it->second;
      if (run == nullptr) run = by_cgroup(p.pid);
      if (run == nullptr) run = by_ancestor(p.pid);
      if (run == nullptr) continue;
      GpuShare& share = out[*run][g.index];
      share.memory_bytes += p.used_memory_bytes.value_or(0);
      share.pids.push_back(p.pid);
    }
  }
  return out;
}

}  // namespace lathe::telemetry

// A process table that says what a test tells it (os/process_table.h).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "lathe/os/process_table.h"

namespace lathe::os {

class FakeProcessTable final : public ProcessTable {
 public:
  struct Entry {
    pid_t parent = 1;
    std::vector<std::string> cgroups;  // as CgroupPaths returns them
    ProcessUsage usage;
  };
  void Set(pid_t pid, Entry e) { procs_[pid] = std::move(e); }
  void Remove(pid_t pid) { procs_.erase(pid); }

  std::optional<pid_t> Parent(pid_t pid) override {
    auto it = procs_.find(pid);
    if (it == procs_.end()) return std::nullopt;
    return it->second.parent;
  }
  std::vector<std::string> CgroupPaths(pid_t pid) override {
    auto it = procs_.find(pid);
    return it == procs_.end() ? std::vector<std::string>{} : it->second.cgroups;
  }
  std::optional<ProcessUsage> Usage(pid_t pid) override {
    auto it = procs_.find(pid);
    if (it == procs_.end()) return std::nullopt;
    return it->second.usage;
  }

 private:
  std::map<pid_t, Entry> procs_;
};

}  // namespace lathe::os

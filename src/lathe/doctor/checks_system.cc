#include "lathe/doctor/checks_system.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>

#include "lathe/common/units.h"
#include "lathe/doctor/check_util.h"

namespace lathe::doctor {
namespace {

constexpr const char* kShm = "/dev/shm";
// Share of the CPUs a DataLoader may use in total (the seed's "cores × 0.75").
constexpr double kWorkerShare = 0.75;

std::string Num(uint64_t v) { return v == kUnlimited ? "unlimited" : std::to_string(v); }

Finding LimitFinding(const SystemView& view, RlimitKind kind, uint64_t warn_below,
                     const std::string& prefix) {
  auto r = view.GetRlimit(kind);
  if (!r.ok()) return {prefix + ".unknown", {{"error", r.status().message()}}};
  MsgArgs a = {{"soft", Num(r->soft)}, {"hard", Num(r->hard)}};
  return {r->soft < warn_below ? prefix + ".low" : prefix + ".ok", a};
}

std::string TmpDir(const SystemView& view) {
  auto t = view.Getenv("TMPDIR");
  return t && !t->empty() ? *t : "/tmp";
}

Finding DiskFinding(const SystemView& view, const std::string& what, const std::string& path) {
  std::string where = ExistingAncestor(view, path);
  auto st = view.StatFs(where);
  if (!st.ok())
    return {"sys.disk.unknown", {{"what", what}, {"path", path}, {"error", st.status().message()}}};
  MsgArgs a = {{"what", what},
               {"path", path},
               {"free", Bytes(st->free_bytes)},
               {"size", Bytes(st->size_bytes)}};
  if (st->free_bytes < kDiskFailBytes) return {"sys.disk.low", a};
  if (st->free_bytes < kDiskWarnBytes) return {"sys.disk.tight", a};
  return {"sys.disk.ok", a};
}

}  // namespace

Finding CheckShm(const SystemView& view, const Facts&) {
  auto st = view.StatFs(kShm);
  if (!st.ok()) return {"sys.shm.missing", {{"error", st.status().message()}}};
  MsgArgs a = {{"size", Bytes(st->size_bytes)},
               {"free", Bytes(st->free_bytes)},
               {"ifree", std::to_string(st->inodes_free)},
               {"itotal", std::to_string(st->inodes_total)}};
  if (st->size_bytes < kShmFailBytes) return {"sys.shm.too_small", a};
  if (st->inodes_total > 0 && st->inodes_free < std::max<uint64_t>(1000, st->inodes_total / 100)) {
    return {"sys.shm.no_inodes", a};
  }
  if (st->size_bytes < kShmWarnBytes) return {"sys.shm.small", a};
  if (st->free_bytes < st->size_bytes / 4 && st->free_bytes < kShmWarnBytes) {
    return {"sys.shm.full", a};
  }
  return {"sys.shm.ok", a};
}

Finding CheckNoFile(const SystemView& view, const Facts&) {
  return LimitFinding(view, RlimitKind::kOpenFiles, kNoFileWarn, "sys.nofile");
}

Finding CheckNproc(const SystemView& view, const Facts&) {
  return LimitFinding(view, RlimitKind::kProcesses, kNprocWarn, "sys.nproc");
}

Finding CheckSwappiness(const SystemView& view, const Facts&) {
  auto line = ReadLine(view, "/proc/sys/vm/swappiness");
  auto value = line ? ParseU64(*line) : std::nullopt;
  if (!value) return {"sys.swappiness.unknown", {}};
  std::optional<uint64_t> swap = ReadMeminfo(view, "SwapTotal");
  MsgArgs a = {{"value", std::to_string(*value)}, {"swap", swap ? Bytes(*swap) : "?"}};
  if (swap && *swap == 0) return {"sys.swappiness.no_swap", a};
  return {*value > kSwappinessWarn ? "sys.swappiness.high" : "sys.swappiness.ok", a};
}

Finding CheckOvercommit(const SystemView& view, const Facts&) {
  auto line = ReadLine(view, "/proc/sys/vm/overcommit_memory");
  auto value = line ? ParseU64(*line) : std::nullopt;
  if (!value) return {"sys.overcommit.unknown", {}};
  if (*value == 2) {
    auto ratio = ReadLine(view, "/proc/sys/vm/overcommit_ratio");
    return {"sys.overcommit.strict", {{"ratio", ratio.value_or("?")}}};
  }
  return {*value == 1 ? "sys.overcommit.always" : "sys.overcommit.heuristic", {}};
}

Finding CheckCgroupMemory(const SystemView& view, const Facts&) {
  std::optional<uint64_t> total = ReadMeminfo(view, "MemTotal");
  auto cg = ReadCgroupMemory(view);
  if (!cg || !total) return {"sys.cgroup_mem.unknown", {}};
  MsgArgs a = {{"total", Bytes(*total)},
               {"path", cg->path},
               {"usage", cg->usage_bytes ? Bytes(*cg->usage_bytes) : "?"}};
  if (!cg->limit_bytes || *cg->limit_bytes >= *total) return {"sys.cgroup_mem.unlimited", a};
  a.push_back({"limit", Bytes(*cg->limit_bytes)});
  return {"sys.cgroup_mem.limited", a};
}

// The kernel counts every process its OOM killer ends: /proc/vmstat for the
// machine (since boot), memory.events (v2) or memory.oom_control (v1) for
// this process's cgroup. A training job killed this way dies with "Killed"
// (exit 137), often read as a GPU out-of-memory.
Finding CheckOomKills(const SystemView& view, const Facts&) {
  auto vmstat = view.ReadFile("/proc/vmstat");
  std::optional<uint64_t> host = vmstat.ok() ? KeyedNumber(*vmstat, "oom_kill") : std::nullopt;
  std::optional<uint64_t> in_cgroup;
  std::string cg_path;
  if (auto cg = ReadCgroupMemory(view)) {
    auto events = view.ReadFile(cg->path + (cg->v2 ? "/memory.events" : "/memory.oom_control"));
    if (events.ok()) in_cgroup = KeyedNumber(*events, "oom_kill");
    cg_path = cg->path;
  }
  if (!host.has_value() && !in_cgroup.has_value()) return {"sys.oom.unknown", {}};
  std::string uptime = "?";
  if (auto up = ReadLine(view, "/proc/uptime")) {
    auto s = static_cast<int64_t>(std::atof(up->c_str()));
    if (s >= 3600) s -= s % 60;  // "3d2h17m", not "3d2h17m5s"
    if (s > 0) uptime = FormatDuration(std::chrono::seconds(s));
  }
  MsgArgs a = {{"uptime", uptime}};
  // A cgroup's count is its own; the machine's includes it.
  if (uint64_t n = in_cgroup.value_or(0); n > 0) {
    a.push_back({"count", std::to_string(n)});
    a.push_back({"path", cg_path});
    return {"sys.oom.cgroup_killed", a};
  }
  if (uint64_t n = host.value_or(0); n > 0) {
    a.push_back({"count", std::to_string(n)});
    return {"sys.oom.killed", a};
  }
  return {"sys.oom.ok", a};
}

Finding CheckTmp(const SystemView& view, const Facts&) {
  std::string dir = TmpDir(view);
  bool from_env = view.Getenv("TMPDIR").has_value() && dir != "/tmp";
  Status w = view.ProbeWritable(dir);
  if (!w.ok()) {
    return {from_env ? "sys.tmp.tmpdir_bad" : "sys.tmp.not_writable",
            {{"path", dir}, {"error", w.message()}}};
  }
  auto st = view.StatFs(dir);
  std::string type = MountType(view, view.RealPath(dir));
  MsgArgs a = {{"path", dir},
               {"type", type.empty() ? "?" : type},
               {"size", st.ok() ? Bytes(st->size_bytes) : "?"},
               {"free", st.ok() ? Bytes(st->free_bytes) : "?"}};
  if (type == "tmpfs" && st.ok() && st->size_bytes < kTmpfsWarnBytes) {
    return {"sys.tmp.small_tmpfs", a};
  }
  return {from_env ? "sys.tmp.ok_tmpdir" : "sys.tmp.ok", a};
}

Finding CheckDiskHome(const SystemView& view, const Facts&) {
  return DiskFinding(view, "home", view.LatheHome());
}

Finding CheckDiskCwd(const SystemView& view, const Facts&) {
  return DiskFinding(view, "cwd", view.Cwd());
}

Finding CheckDiskTmp(const SystemView& view, const Facts&) {
  return DiskFinding(view, "tmp", TmpDir(view));
}

Finding CheckCpus(const SystemView& view, const Facts&) {
  int cpus = std::max(1, view.CpuCount());
  auto quota = ReadCgroupCpuQuota(view);
  double usable = quota ? std::min<double>(cpus, *quota) : cpus;
  int workers = std::max(1, static_cast<int>(std::floor(usable * kWorkerShare)));
  MsgArgs a = {{"cpus", std::to_string(cpus)}, {"workers", std::to_string(workers)}};
  if (quota && *quota + 0.01 < cpus) {
    a.push_back({"quota", fmt::format("{:.1f}", *quota)});
    return {"sys.cpu.quota", a};
  }
  return {"sys.cpu.ok", a};
}

Finding CheckTimeSync(const SystemView& view, const Facts&) {
  auto synced = view.ClockSynchronized();
  if (!synced) return {"sys.time.unknown", {}};
  return {*synced ? "sys.time.ok" : "sys.time.unsynced", {}};
}

}  // namespace lathe::doctor

#include "lathe/doctor/check.h"

#include "lathe/doctor/checks_cluster.h"
#include "lathe/doctor/checks_gpu.h"
#include "lathe/doctor/checks_images.h"
#include "lathe/doctor/checks_lathe.h"
#include "lathe/doctor/checks_network.h"
#include "lathe/doctor/checks_system.h"

namespace lathe::doctor {

std::string_view SeverityName(Severity s) {
  switch (s) {
    case Severity::kOk:
      return "ok";
    case Severity::kWarn:
      return "warn";
    case Severity::kFail:
      return "fail";
    case Severity::kSkipped:
      return "skipped";
  }
  return "ok";
}

std::optional<Severity> ParseSeverity(std::string_view name) {
  for (Severity s : {Severity::kOk, Severity::kWarn, Severity::kFail, Severity::kSkipped}) {
    if (SeverityName(s) == name) return s;
  }
  return std::nullopt;
}

const std::vector<std::string_view>& CheckGroups() {
  static const std::vector<std::string_view> groups = {"gpu", "system", "network", "lathe",
                                                       "cluster"};
  return groups;
}

const std::vector<CheckDef>& AllChecks() {
  static const std::vector<CheckDef> checks = {
      {"gpu.driver", "gpu", CheckGpuDriver},
      {"gpu.visible", "gpu", CheckGpuVisible},
      {"gpu.cuda", "gpu", CheckGpuCuda},
      {"gpu.torch", "gpu", CheckGpuTorch},
      {"gpu.arch", "gpu", CheckGpuArch},
      {"gpu.ecc", "gpu", CheckGpuEcc},
      {"gpu.clocks", "gpu", CheckGpuClocks},
      {"gpu.memory", "gpu", CheckGpuMemory},
      {"gpu.persistence", "gpu", CheckGpuPersistence},
      {"gpu.mig", "gpu", CheckGpuMig},
      {"gpu.cdi", "gpu", CheckCdi},
      {"sys.shm", "system", CheckShm},
      {"sys.nofile", "system", CheckNoFile},
      {"sys.nproc", "system", CheckNproc},
      {"sys.swappiness", "system", CheckSwappiness},
      {"sys.overcommit", "system", CheckOvercommit},
      {"sys.cgroup_mem", "system", CheckCgroupMemory},
      {"sys.oom", "system", CheckOomKills},
      {"sys.tmp", "system", CheckTmp},
      {"sys.disk_home", "system", CheckDiskHome},
      {"sys.disk_cwd", "system", CheckDiskCwd},
      {"sys.disk_tmp", "system", CheckDiskTmp},
      {"sys.cpu", "system", CheckCpus},
      {"sys.time", "system", CheckTimeSync},
      {"net.proxy", "network", CheckProxy},
      {"net.dns", "network", CheckDns},
      {"net.mtu", "network", CheckMtu},
      {"net.nccl", "network", CheckNccl},
      {"lathe.daemon", "lathe", CheckDaemon},
      {"lathe.home", "lathe", CheckHome},
      {"lathe.store", "lathe", CheckStore},
      {"lathe.capture", "lathe", CheckCapture},
      {"lathe.images", "lathe", CheckImages},
      {"cluster.pools", "cluster", CheckClusterPools},
      {"cluster.ping", "cluster", nullptr, CheckClusterPing},
      {"cluster.munge", "cluster", nullptr, CheckClusterMunge},
      {"cluster.clock", "cluster", nullptr, CheckClusterClock},
      {"cluster.partition", "cluster", nullptr, CheckClusterPartition},
      {"cluster.shared_dir", "cluster", nullptr, CheckClusterSharedDir},
      {"cluster.shared_job", "cluster", nullptr, CheckClusterSharedJob},
      {"cluster.lathe_path", "cluster", nullptr, CheckClusterLathePath},
  };
  return checks;
}

}  // namespace lathe::doctor

#include "lathe/doctor/test_util/fake_system.h"

#include <re2/re2.h>

#include <algorithm>

namespace lathe::doctor::testing {

Result<std::string> FakeSystemView::ReadFile(const std::string& path) const {
  {
    std::lock_guard lock(*log_mu);
    if (auto j = job_files.find(path); j != job_files.end()) return j->second;
  }
  auto it = files.find(path);
  if (it == files.end()) return Status::NotFound(path + ": No such file or directory");
  return it->second;
}

Result<std::vector<std::string>> FakeSystemView::ListDir(const std::string& path) const {
  auto it = dirs.find(path);
  if (it == dirs.end()) return Status::NotFound(path + ": No such file or directory");
  return it->second;
}

std::optional<std::string> FakeSystemView::Getenv(const std::string& name) const {
  auto it = env.find(name);
  if (it == env.end()) return std::nullopt;
  return it->second;
}

std::vector<std::pair<std::string, std::string>> FakeSystemView::Environment() const {
  return {env.begin(), env.end()};
}

Result<FsStats> FakeSystemView::StatFs(const std::string& path) const {
  auto it = statfs.find(path);
  if (it == statfs.end()) return Status::NotFound(path + ": No such file or directory");
  return it->second;
}

Result<Rlimit> FakeSystemView::GetRlimit(RlimitKind kind) const {
  return kind == RlimitKind::kOpenFiles ? nofile : nproc;
}

Status FakeSystemView::ProbeWritable(const std::string& dir) const {
  if (writable.count(dir)) return Status::OK();
  return Status::PermissionDenied(dir + ": Permission denied");
}

Status FakeSystemView::DaemonStatus(std::string* where) const {
  *where = daemon_where;
  return daemon;
}

std::optional<std::string> FakeSystemView::FindExecutable(const std::string& name) const {
  if (name.find('/') != std::string::npos) {
    return executables.count(name) ? std::optional<std::string>(name) : std::nullopt;
  }
  for (const char* dir : {"/usr/local/bin/", "/usr/bin/"}) {
    if (executables.count(dir + name)) return dir + name;
  }
  return std::nullopt;
}

Result<CommandOutput> FakeSystemView::Run(const std::vector<std::string>& argv, int64_t) const {
  {
    std::lock_guard lock(*log_mu);
    ++run_count;
  }
  std::string key = argv[0] + (argv.size() > 1 ? " " + argv[1] : "");
  auto it = commands.find(key);
  if (it == commands.end()) {
    // A key that ends where a random part begins ("srun --job-name" for
    // "srun --job-name=lathe-doctor-3f…"): the longest that is a prefix.
    for (auto c = commands.begin(); c != commands.end(); ++c) {
      if (key.starts_with(c->first) && c->first.find(' ') != std::string::npos &&
          (it == commands.end() || c->first.size() > it->first.size())) {
        it = c;
      }
    }
  }
  if (it == commands.end()) return Status::NotFound("cannot execute " + argv[0]);
  return it->second;
}

Result<CommandOutput> FakeSystemView::RunWithEnv(const std::vector<std::string>& argv,
                                                 const std::map<std::string, std::string>& env,
                                                 int64_t timeout_ms) const {
  std::string line = argv[0];
  for (const auto& [k, v] : env) line += " " + k + "=" + v;
  std::string token, path;
  const bool wrote =
      jobs_share_files &&
      RE2::PartialMatch(argv.back(), R"(printf %s '([^']*)' 2>&1 >'([^']+)')", &token, &path);
  {
    std::lock_guard lock(*log_mu);
    env_log.push_back(line);
    if (wrote) job_files[path] = token;
  }
  return Run(argv, timeout_ms);
}

Status FakeSystemView::ProbeWritableAsUser(const std::string& dir, std::string* as_user) const {
  *as_user = user;
  if (user_writable.count(dir)) return Status::OK();
  return Status::PermissionDenied(dir + ": Permission denied");
}

Status FakeSystemView::RemoveFile(const std::string& path) const {
  {
    std::lock_guard lock(*log_mu);
    removed.push_back(path);
  }
  return Status::OK();
}

void FakeSystemView::AddFile(const std::string& path, const std::string& content) {
  files[path] = content;
  // Register every path component in its parent's listing, up to "/".
  for (std::string p = path; p.size() > 1;) {
    size_t slash = p.rfind('/');
    std::string dir = slash == 0 ? "/" : p.substr(0, slash);
    auto& names = dirs[dir];
    std::string base = p.substr(slash + 1);
    if (std::find(names.begin(), names.end(), base) == names.end()) names.push_back(base);
    p = dir;
  }
}

void FakeSystemView::SetTorch(const std::string& json) {
  SetCommand("/usr/bin/python3 -c", CommandOutput{0, json + "\n", ""});
}

FakeSystemView HealthyMachine() {
  FakeSystemView m;
  m.AddFile(
      "/proc/meminfo",
      "MemTotal:       67108864 kB\nMemFree:        60000000 kB\n"
      "MemAvailable:   62000000 kB\nSwapTotal:             0 kB\nSwapFree:              0 kB\n");
  m.AddFile("/proc/self/cgroup", "0::/user.slice/user-1000.slice/session-1.scope\n");
  m.AddFile("/sys/fs/cgroup/user.slice/user-1000.slice/session-1.scope/memory.max", "max\n");
  m.AddFile("/sys/fs/cgroup/user.slice/user-1000.slice/session-1.scope/memory.current",
            "2147483648\n");
  m.AddFile("/sys/fs/cgroup/user.slice/user-1000.slice/session-1.scope/memory.events",
            "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\noom_group_kill 0\n");
  m.AddFile("/sys/fs/cgroup/user.slice/user-1000.slice/session-1.scope/cpu.max", "max 100000\n");
  m.AddFile("/proc/vmstat", "nr_free_pages 1000\npgfault 123\noom_kill 0\nnr_dirty 4\n");
  m.AddFile("/proc/uptime", "266400.52 1000000.00\n");
  m.AddFile("/proc/sys/vm/swappiness", "60\n");
  m.AddFile("/proc/sys/vm/overcommit_memory", "0\n");
  m.AddFile("/proc/self/mounts",
            "/dev/nvme0n1p2 / ext4 rw,relatime 0 0\n"
            "tmpfs /dev/shm tmpfs rw,nosuid,nodev,size=33554432k 0 0\n"
            "/dev/nvme1n1 /work ext4 rw,relatime 0 0\n");
  m.AddFile("/sys/class/net/lo/mtu", "65536\n");
  m.AddFile("/sys/class/net/eth0/mtu", "1500\n");
  m.AddFile("/sys/class/net/eth0/operstate", "up\n");
  m.dirs["/sys/bus/pci/devices"] = {};
  m.dirs["/dev"] = {"null", "zero", "shm"};
  m.dirs[m.home] = {};
  m.statfs["/dev/shm"] = {32 * kGiB, 32 * kGiB, 8'000'000, 7'999'000};
  m.statfs["/tmp"] = {500 * kGiB, 200 * kGiB, 30'000'000, 29'000'000};
  m.statfs["/work"] = {2000 * kGiB, 900 * kGiB, 100'000'000, 99'000'000};
  m.statfs[m.home] = {500 * kGiB, 200 * kGiB, 30'000'000, 29'000'000};
  m.statfs["/"] = {500 * kGiB, 200 * kGiB, 30'000'000, 29'000'000};
  m.SetCommand("getent ahosts",
               CommandOutput{0, "151.101.0.223   STREAM pypi.org\n151.101.0.223   DGRAM\n", ""});
  m.SetTorch(R"({"importable": false, "error": "ModuleNotFoundError: No module named 'torch'"})");
  m.gpus = gpu::Inventory{"none", false, "", "", {}, "cannot load NVML (libnvidia-ml.so.1)"};
  return m;
}

}  // namespace lathe::doctor::testing

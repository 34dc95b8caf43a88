#include "lathe/os/cgroup.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <csignal>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>

#include "lathe/common/ids.h"
#include "lathe/os/clock.h"
#include "lathe/os/files.h"

namespace lathe::os {
namespace {

constexpr int64_t kCpuPeriodUs = 100'000;  // the kernel's default CFS period
constexpr int64_t kMinCpuQuotaUs = 1'000;  // the kernel rejects quotas under 1 ms
constexpr int64_t kKillDeadlineMs = 2'000;
constexpr int64_t kDestroyDeadlineMs = 1'000;
constexpr int64_t kPollMs = 10;
constexpr int kMaxSignalRounds = 50;
// v1 without oom_kill: a peak within this distance of the limit counts as "hit it".
constexpr uint64_t kV1OomSlackBytes = 1 << 20;
// memory.limit_in_bytes reads this (or more) when there is no limit.
constexpr uint64_t kV1Unlimited = uint64_t{1} << 62;

constexpr const char* kControllers[] = {"memory", "cpu", "pids"};

// ---- small file helpers ----------------------------------------------------

std::string Join(const std::string& dir, std::string_view name) {
  return dir + "/" + std::string(name);
}

// cgroupfs takes one value per write(2); a short write means it was refused.
Status WriteCgroupFile(const std::string& path, std::string_view value) {
  int fd = ::open(path.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus("open " + path, errno);
  ssize_t n = ::write(fd, value.data(), value.size());
  int err = errno;
  ::close(fd);
  if (n < 0) return ErrnoStatus(fmt::format("write '{}' to {}", value, path), err);
  if (static_cast<size_t>(n) != value.size()) return Status::IoError("short write to " + path);
  return Status::OK();
}

Status MakeDir(const std::string& path) {
  if (::mkdir(path.c_str(), 0755) == 0) return Status::OK();
  int err = errno;
  struct stat st;
  if (err == EEXIST && ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) return Status::OK();
  return ErrnoStatus("mkdir " + path, err);
}

bool IsDir(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

std::vector<std::string> Split(std::string_view s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    size_t end = s.find(sep, start);
    if (end == std::string_view::npos) end = s.size();
    out.emplace_back(s.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

bool HasWord(const std::string& text, std::string_view word) {
  std::istringstream in(text);
  std::string w;
  while (in >> w) {
    if (w == word) return true;
  }
  return false;
}

std::optional<uint64_t> ParseU64(std::string_view s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.remove_suffix(1);
  if (s.empty()) return std::nullopt;
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  return v;
}

std::optional<uint64_t> ReadU64(const std::string& path) {
  auto text = ReadFile(path);
  return text.ok() ? ParseU64(*text) : std::nullopt;
}

// The value of `key` in a flat-keyed file ("oom_kill 3\nunder_oom 0\n").
std::optional<uint64_t> ReadKeyed(const std::string& path, std::string_view key) {
  auto text = ReadFile(path);
  if (!text.ok()) return std::nullopt;
  std::istringstream in(*text);
  std::string k, v;
  while (in >> k >> v) {
    if (k == key) return ParseU64(v);
  }
  return std::nullopt;
}

// ---- what the system has -----------------------------------------------------

struct Mount {
  std::string root;   // the part of the hierarchy mounted here ("/" usually)
  std::string point;  // where it is mounted
  std::string fstype;
  std::vector<std::string> super_opts;  // v1: the controllers, among others
};

// mountinfo escapes space, tab, newline and backslash as \ooo.
std::string Unescape(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 3 < s.size()) {
      int v = 0;
      bool ok = true;
      for (size_t j = 1; j <= 3 && ok; ++j) {
        ok = s[i + j] >= '0' && s[i + j] <= '7';
        v = v * 8 + (s[i + j] - '0');
      }
      if (ok) {
        out.push_back(static_cast<char>(v));
        i += 3;
        continue;
      }
    }
    out.push_back(s[i]);
  }
  return out;
}

// "36 25 0:31 / /sys/fs/cgroup/memory rw,nosuid shared:14 - cgroup cgroup rw,memory"
std::vector<Mount> ParseCgroupMounts(const std::string& text) {
  std::vector<Mount> mounts;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::vector<std::string> f;
    for (std::string w; fields >> w;) f.push_back(w);
    auto dash = std::find(f.begin(), f.end(), "-");
    if (f.size() < 5 || dash == f.end() || f.end() - dash < 4) continue;
    Mount m{Unescape(f[3]), Unescape(f[4]), dash[1], Split(dash[3], ',')};
    if (m.fstype == "cgroup" || m.fstype == "cgroup2") mounts.push_back(std::move(m));
  }
  return mounts;
}

struct OwnCgroups {
  std::optional<std::string> unified;        // from "0::/path"
  std::map<std::string, std::string> by_v1;  // controller -> path
};

// "4:memory:/process_api/3f…", "1:cpu,cpuacct:/", "0::/user.slice/…"
OwnCgroups ParseProcCgroup(const std::string& text) {
  OwnCgroups own;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    size_t a = line.find(':');
    size_t b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    std::string controllers = line.substr(a + 1, b - a - 1);
    std::string path = line.substr(b + 1);
    if (controllers.empty()) {
      own.unified = path;
      continue;
    }
    for (const std::string& c : Split(controllers, ',')) own.by_v1[c] = path;
  }
  return own;
}

// The directory of cgroup `own` (a path within the hierarchy) under mount `m`.
Result<std::string> CgroupDir(const Mount& m, const std::string& own, const std::string& prefix) {
  std::string rel = own;
  if (m.root != "/") {
    // The mount shows only a subtree (a container without a cgroup namespace).
    bool under = own == m.root || (own.starts_with(m.root) && own[m.root.size()] == '/');
    if (!under) {
      return Status::FailedPrecondition(fmt::format(
          "own cgroup {} is outside the subtree {} mounted at {}", own, m.root, m.point));
    }
    rel = own.substr(m.root.size());
  }
  std::string dir = prefix + m.point;
  if (!rel.empty() && rel != "/") dir += rel;
  return dir;
}

// v2: `ctrl` must be delegated to the daemon's cgroup and enabled for the
// children of <own>/<group>. Returns <own>/<group>.
Result<std::string> TryV2(const char* ctrl, const std::string& own_dir, const std::string& group) {
  auto controllers = ReadFile(Join(own_dir, "cgroup.controllers"));
  if (!controllers.ok()) return controllers.status();
  if (!HasWord(*controllers, ctrl)) {
    return Status::FailedPrecondition(fmt::format(
        "{} is not in {}/cgroup.controllers (not delegated to this cgroup)", ctrl, own_dir));
  }
  std::string enable = fmt::format("+{}", ctrl);
  auto enabled = ReadFile(Join(own_dir, "cgroup.subtree_control"));
  if (!enabled.ok() || !HasWord(*enabled, ctrl)) {
    Status st = WriteCgroupFile(Join(own_dir, "cgroup.subtree_control"), enable);
    if (!st.ok()) {
      // EBUSY: the no-internal-process rule; the daemon itself lives here.
      return Status::FailedPrecondition(
          fmt::format("cannot enable it for the children of {} ({}); a cgroup v2 cgroup that holds "
                      "processes cannot pass controllers down: start the daemon in a cgroup whose "
                      "subtree_control already enables {} (systemd: Delegate=yes)",
                      own_dir, st.message(), ctrl));
    }
  }
  std::string base = Join(own_dir, group);
  RETURN_IF_ERROR(MakeDir(base));
  auto base_enabled = ReadFile(Join(base, "cgroup.subtree_control"));
  if (!base_enabled.ok() || !HasWord(*base_enabled, ctrl)) {
    RETURN_IF_ERROR(WriteCgroupFile(Join(base, "cgroup.subtree_control"), enable));
  }
  return base;
}

// The file a run needs in a v1 hierarchy: a kernel without it cannot limit.
const char* V1KeyFile(std::string_view ctrl) {
  if (ctrl == "memory") return "memory.limit_in_bytes";
  if (ctrl == "cpu") return "cpu.cfs_quota_us";
  return "pids.max";
}

Result<std::string> TryV1(const char* ctrl, const std::string& own_dir, const std::string& group) {
  std::string base = Join(own_dir, group);
  RETURN_IF_ERROR(MakeDir(base));
  if (::access(base.c_str(), W_OK | X_OK) != 0) return ErrnoStatus("access " + base, errno);
  std::string key = Join(base, V1KeyFile(ctrl));
  if (::access(key.c_str(), F_OK) != 0) {
    return Status::FailedPrecondition(key + " is missing (the kernel lacks this feature)");
  }
  return base;
}

struct Found {
  std::string base;
  bool v2 = false;
  std::string why;  // when base is empty
};

Found FindController(const char* ctrl, const std::vector<Mount>& mounts, const OwnCgroups& own,
                     const CgroupPaths& paths) {
  std::vector<std::string> why;
  for (const Mount& m : mounts) {
    if (m.fstype != "cgroup2" || !own.unified) continue;
    auto dir = CgroupDir(m, *own.unified, paths.prefix);
    auto base = dir.ok() ? TryV2(ctrl, *dir, paths.group_name) : Result<std::string>(dir.status());
    if (base.ok()) return {*base, true, ""};
    why.push_back("cgroup v2: " + base.status().message());
    break;
  }
  for (const Mount& m : mounts) {
    if (m.fstype != "cgroup" ||
        std::find(m.super_opts.begin(), m.super_opts.end(), ctrl) == m.super_opts.end()) {
      continue;
    }
    auto path = own.by_v1.find(ctrl);
    if (path == own.by_v1.end()) {
      why.push_back(fmt::format("cgroup v1: {} has no line for {}", paths.proc_self_cgroup, ctrl));
      break;
    }
    auto dir = CgroupDir(m, path->second, paths.prefix);
    auto base = dir.ok() ? TryV1(ctrl, *dir, paths.group_name) : Result<std::string>(dir.status());
    if (base.ok()) return {*base, false, ""};
    why.push_back("cgroup v1: " + base.status().message());
    break;
  }
  if (why.empty()) why.push_back("no cgroup hierarchy has this controller");
  std::string joined;
  for (const std::string& w : why) joined += (joined.empty() ? "" : "; ") + w;
  return {"", false, joined};
}

// ---- a run's directories -----------------------------------------------------

// Sub-cgroups of `dir` (a run may create its own), deepest first, then `dir`.
void PostOrder(const std::string& dir, std::vector<std::string>& out) {
  std::error_code ec;
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->is_directory(ec) && !it->is_symlink(ec)) PostOrder(it->path().string(), out);
  }
  out.push_back(dir);
}

void ReadProcs(const std::string& dir, std::set<pid_t>& out) {
  auto text = ReadFile(Join(dir, "cgroup.procs"));
  if (!text.ok()) return;
  std::istringstream in(*text);
  for (long pid; in >> pid;) out.insert(static_cast<pid_t>(pid));
}

std::string PidList(const std::vector<pid_t>& pids) {
  std::string s;
  for (pid_t p : pids) s += (s.empty() ? "" : ",") + std::to_string(p);
  return s;
}

Status ValidateLimits(const CgroupLimits& l) {
  if (l.memory_bytes && *l.memory_bytes == 0) {
    return Status::InvalidArgument("memory limit must be more than 0 bytes");
  }
  if (l.cpus && !(*l.cpus > 0 && std::isfinite(*l.cpus))) {
    return Status::InvalidArgument(
        fmt::format("cpu limit must be a number of CPUs above 0, not {}", *l.cpus));
  }
  if (l.pids_max && *l.pids_max < 1) {
    return Status::InvalidArgument(
        fmt::format("pids limit must be at least 1, not {}", *l.pids_max));
  }
  return Status::OK();
}

// The line of CgroupSupport::note about `ctrl`, for error messages.
std::string NoteFor(const CgroupSupport& s, std::string_view ctrl) {
  std::istringstream in(s.note);
  std::string line;
  while (std::getline(in, line)) {
    if (line.starts_with(std::string(ctrl) + ":")) return line;
  }
  return std::string(ctrl) + ": unavailable";
}

Status Unavailable(const CgroupSupport& s, std::string_view ctrl) {
  return Status::FailedPrecondition(
      fmt::format("a {} limit was requested but the {} cgroup controller is unavailable ({})", ctrl,
                  ctrl, NoteFor(s, ctrl)));
}

// Adds `ctrl`'s directory to `dirs`, sharing one directory per path (v2).
void Plan(std::vector<RunCgroup::Dir>& dirs, const std::string& base, const std::string& run_id,
          std::string_view ctrl) {
  std::string path = Join(base, run_id);
  auto it = std::find_if(dirs.begin(), dirs.end(), [&](const auto& d) { return d.path == path; });
  if (it == dirs.end()) {
    dirs.push_back({path, std::filesystem::exists(Join(base, "cgroup.controllers"))});
    it = dirs.end() - 1;
  }
  it->memory |= ctrl == "memory";
  it->cpu |= ctrl == "cpu";
  it->pids |= ctrl == "pids";
}

// Writes `value` when `file` exists; its absence or refusal is fine.
void WriteIfPresent(const std::string& dir, const char* file, std::string_view value) {
  std::string path = Join(dir, file);
  // Best effort: a controller that refuses a setting leaves the default; the limit check reports
  // it.
  if (std::filesystem::exists(path)) (void)WriteCgroupFile(path, value);
}

Status WriteMemory(const RunCgroup::Dir& d, const CgroupLimits& l) {
  // A run is one job: when the kernel OOM-kills part of it, kill all of it
  // rather than leave e.g. a trainer waiting forever on a dead worker.
  if (d.v2) WriteIfPresent(d.path, "memory.oom.group", "1");
  if (!l.memory_bytes) return Status::OK();
  std::string bytes = std::to_string(*l.memory_bytes);
  if (d.v2) {
    RETURN_IF_ERROR(WriteCgroupFile(Join(d.path, "memory.max"), bytes));
    // Without this the run would swap instead of hitting its limit.
    WriteIfPresent(d.path, "memory.swap.max", "0");
    return Status::OK();
  }
  RETURN_IF_ERROR(WriteCgroupFile(Join(d.path, "memory.limit_in_bytes"), bytes));
  // memsw = RAM + swap; equal to the RAM limit means no swap. Present only
  // with swap accounting; must be written after limit_in_bytes (memsw >= limit).
  WriteIfPresent(d.path, "memory.memsw.limit_in_bytes", bytes);
  return Status::OK();
}

Status WriteCpu(const RunCgroup::Dir& d, double cpus) {
  int64_t quota = std::max<int64_t>(kMinCpuQuotaUs, std::llround(cpus * kCpuPeriodUs));
  if (d.v2)
    return WriteCgroupFile(Join(d.path, "cpu.max"), fmt::format("{} {}", quota, kCpuPeriodUs));
  RETURN_IF_ERROR(WriteCgroupFile(Join(d.path, "cpu.cfs_period_us"), std::to_string(kCpuPeriodUs)));
  return WriteCgroupFile(Join(d.path, "cpu.cfs_quota_us"), std::to_string(quota));
}

Status WriteLimits(const RunCgroup::Dir& d, const CgroupLimits& l) {
  if (d.memory) RETURN_IF_ERROR(WriteMemory(d, l));
  if (d.cpu && l.cpus) RETURN_IF_ERROR(WriteCpu(d, *l.cpus));
  if (d.pids && l.pids_max) {
    RETURN_IF_ERROR(WriteCgroupFile(Join(d.path, "pids.max"), std::to_string(*l.pids_max)));
  }
  return Status::OK();
}

}  // namespace

// ---- DetectCgroups ---------------------------------------------------------------

CgroupSupport DetectCgroups(const CgroupPaths& paths) {
  CgroupSupport s;
  auto mountinfo = ReadFile(paths.mountinfo);
  auto self = ReadFile(paths.proc_self_cgroup);
  if (!mountinfo.ok() || !self.ok()) {
    s.note = "cannot read " + (mountinfo.ok() ? self.status() : mountinfo.status()).message();
    return s;
  }
  std::vector<Mount> mounts = ParseCgroupMounts(*mountinfo);
  OwnCgroups own = ParseProcCgroup(*self);
  bool any_v1 = false, any_v2 = false;
  for (const char* ctrl : kControllers) {
    Found f = FindController(ctrl, mounts, own, paths);
    if (f.base.empty()) {
      s.note += fmt::format("{}{}: {}", s.note.empty() ? "" : "\n", ctrl, f.why);
      continue;
    }
    (f.v2 ? any_v2 : any_v1) = true;
    std::string_view c = ctrl;
    bool& available = c == "memory" ? s.memory : c == "cpu" ? s.cpu : s.pids;
    std::string& base = c == "memory" ? s.memory_base : c == "cpu" ? s.cpu_base : s.pids_base;
    available = true;
    base = f.base;
  }
  s.mode = any_v1   ? CgroupSupport::Mode::kV1
           : any_v2 ? CgroupSupport::Mode::kV2
                    : CgroupSupport::Mode::kNone;
  return s;
}

// ---- RunCgroup ---------------------------------------------------------------------

Result<std::unique_ptr<RunCgroup>> RunCgroup::Create(const CgroupSupport& support,
                                                     const std::string& run_id,
                                                     const CgroupLimits& limits) {
  if (!IsValidName(run_id)) {
    return Status::InvalidArgument(
        fmt::format("'{}' cannot name a cgroup: use 1-63 letters, digits, '.', '_' or '-', "
                    "starting with a letter or digit",
                    run_id));
  }
  RETURN_IF_ERROR(ValidateLimits(limits));
  if (limits.memory_bytes && !support.memory) return Unavailable(support, "memory");
  if (limits.cpus && !support.cpu) return Unavailable(support, "cpu");
  if (limits.pids_max && !support.pids) return Unavailable(support, "pids");

  std::vector<Dir> dirs;
  if (support.memory) Plan(dirs, support.memory_base, run_id, "memory");
  if (support.pids) Plan(dirs, support.pids_base, run_id, "pids");
  if (support.cpu && limits.cpus) Plan(dirs, support.cpu_base, run_id, "cpu");
  if (dirs.empty()) {
    return Status::FailedPrecondition(
        "neither the memory nor the pids cgroup controller is available: " + support.note);
  }
  std::unique_ptr<RunCgroup> cg(new RunCgroup(std::move(dirs)));
  for (const Dir& d : cg->dirs_) {
    Status st = MakeDir(d.path);
    if (st.ok()) st = WriteLimits(d, limits);
    if (!st.ok()) {
      (void)cg->Destroy();  // the run has no processes yet: this cannot be busy
      return st;
    }
  }
  return cg;
}

Result<std::unique_ptr<RunCgroup>> RunCgroup::Open(const std::vector<std::string>& paths) {
  std::vector<Dir> dirs;
  for (const std::string& p : paths) {
    if (!IsDir(p)) return Status::NotFound("cgroup " + p + " does not exist");
    Dir d{p, std::filesystem::exists(Join(p, "cgroup.controllers"))};
    auto has = [&](const char* f) { return std::filesystem::exists(Join(p, f)); };
    d.memory = d.v2 ? has("memory.max") : has("memory.limit_in_bytes");
    d.cpu = d.v2 ? has("cpu.max") : has("cpu.cfs_quota_us");
    d.pids = has("pids.max");
    dirs.push_back(std::move(d));
  }
  if (dirs.empty()) return Status::InvalidArgument("RunCgroup::Open needs at least one directory");
  return std::unique_ptr<RunCgroup>(new RunCgroup(std::move(dirs)));
}

std::vector<std::string> RunCgroup::dirs() const {
  std::vector<std::string> out;
  for (const Dir& d : dirs_) out.push_back(d.path);
  return out;
}

Status RunCgroup::AddProcess(pid_t pid) {
  for (const Dir& d : dirs_) {
    RETURN_IF_ERROR(WriteCgroupFile(Join(d.path, "cgroup.procs"), std::to_string(pid)));
  }
  return Status::OK();
}

std::vector<pid_t> RunCgroup::Pids() const {
  std::set<pid_t> pids;
  for (const Dir& d : dirs_) {
    std::vector<std::string> all;
    PostOrder(d.path, all);
    for (const std::string& dir : all) ReadProcs(dir, pids);
  }
  return {pids.begin(), pids.end()};
}

Status RunCgroup::KillAll(int signal) {
  if (signal != SIGKILL) return SignalUntilStable(signal);
  for (const Dir& d : dirs_) {
    // cgroup.kill kills every process, including ones forking right now,
    // atomically; the loop below then only waits for them to go.
    if (d.v2) WriteIfPresent(d.path, "cgroup.kill", "1");
  }
  return WaitUntilEmpty();
}

// Signals each process once; a process forked meanwhile shows up in the next
// round, so repeat until a round finds nobody new. (A pid read from
// cgroup.procs could exit and be reused before kill(); the window is tiny,
// and cgroup.kill closes it for SIGKILL on v2.)
Status RunCgroup::SignalUntilStable(int signal) {
  std::set<pid_t> signalled;
  for (int round = 0; round < kMaxSignalRounds; ++round) {
    bool fresh = false;
    for (pid_t pid : Pids()) {
      if (!signalled.insert(pid).second) continue;
      fresh = true;
      if (::kill(pid, signal) != 0 && errno != ESRCH) {
        return ErrnoStatus(fmt::format("kill({}, {})", pid, signal), errno);
      }
    }
    if (!fresh) return Status::OK();
    RealClock().SleepMs(kPollMs);
  }
  return Status::OK();
}

// SIGKILL until nothing is left; processes leave cgroup.procs when they exit
// (zombies are not listed), not when they are reaped.
Status RunCgroup::WaitUntilEmpty() {
  Clock& clock = RealClock();
  int64_t deadline = clock.MonotonicMs() + kKillDeadlineMs;
  while (true) {
    std::vector<pid_t> pids = Pids();
    if (pids.empty()) return Status::OK();
    if (clock.MonotonicMs() >= deadline) {
      return Status::DeadlineExceeded(
          fmt::format("processes {} of cgroup {} survived SIGKILL for {} ms (stuck in the kernel?)",
                      PidList(pids), dirs_.front().path, kKillDeadlineMs));
    }
    for (pid_t pid : pids) {
      if (::kill(pid, SIGKILL) != 0 && errno != ESRCH) {
        return ErrnoStatus(fmt::format("kill({}, SIGKILL)", pid), errno);
      }
    }
    clock.SleepMs(kPollMs);
  }
}

const RunCgroup::Dir* RunCgroup::MemoryDir() const {
  for (const Dir& d : dirs_) {
    if (d.memory) return &d;
  }
  return nullptr;
}

Result<std::string> CgroupPathInHierarchy(const std::string& dir) {
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) return ErrnoStatus("stat " + dir, errno);
  std::string root = dir;
  while (true) {
    size_t slash = root.rfind('/');
    if (slash == std::string::npos || slash == 0) break;
    std::string parent = root.substr(0, slash);
    struct stat pst {};
    if (::stat(parent.c_str(), &pst) != 0 || pst.st_dev != st.st_dev) break;
    root = std::move(parent);
  }
  std::string rel = dir.substr(root.size());
  return rel.empty() ? std::string("/") : rel;
}

bool RunCgroup::OomKilled() const {
  const Dir* m = MemoryDir();
  if (m == nullptr) return false;
  if (m->v2) return ReadKeyed(Join(m->path, "memory.events"), "oom_kill").value_or(0) > 0;
  if (auto kills = ReadKeyed(Join(m->path, "memory.oom_control"), "oom_kill")) return *kills > 0;
  // Kernels before 4.13 do not count kills; a limit that was hit and a peak at
  // the limit is the best evidence left.
  auto failcnt = ReadU64(Join(m->path, "memory.failcnt"));
  return failcnt.value_or(0) > 0 && MemoryLimitReached();
}

bool RunCgroup::MemoryLimitReached() const {
  const Dir* m = MemoryDir();
  if (m == nullptr || m->v2) return false;
  auto peak = ReadU64(Join(m->path, "memory.max_usage_in_bytes"));
  auto limit = ReadU64(Join(m->path, "memory.limit_in_bytes"));
  if (!peak || !limit || *limit >= kV1Unlimited) return false;
  return *peak + kV1OomSlackBytes >= *limit;
}

Result<uint64_t> RunCgroup::MemoryPeakBytes() const {
  const Dir* m = MemoryDir();
  if (m == nullptr) return Status::FailedPrecondition("this run has no memory cgroup");
  std::string path = Join(m->path, m->v2 ? "memory.peak" : "memory.max_usage_in_bytes");
  ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  if (auto v = ParseU64(text)) return *v;
  return Status::IoError(fmt::format("{} holds '{}', not a number", path, text));
}

Result<uint64_t> RunCgroup::MemoryCurrentBytes() const {
  const Dir* m = MemoryDir();
  if (m == nullptr) return Status::FailedPrecondition("this run has no memory cgroup");
  std::string path = Join(m->path, m->v2 ? "memory.current" : "memory.usage_in_bytes");
  ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  if (auto v = ParseU64(text)) return *v;
  return Status::IoError(fmt::format("{} holds '{}', not a number", path, text));
}

Result<uint64_t> RunCgroup::CpuUsageUsec() const {
  constexpr uint64_t kNsPerUs = 1000;
  for (const Dir& d : dirs_) {
    if (d.v2) {
      if (auto us = ReadKeyed(Join(d.path, "cpu.stat"), "usage_usec")) return *us;
    } else if (auto ns = ReadU64(Join(d.path, "cpuacct.usage"))) {
      return *ns / kNsPerUs;
    }
  }
  return Status::NotFound("no cgroup of this run counts CPU time");
}

Status RunCgroup::Destroy() {
  Clock& clock = RealClock();
  int64_t deadline = clock.MonotonicMs() + kDestroyDeadlineMs;
  for (const Dir& d : dirs_) {
    std::vector<std::string> order;
    PostOrder(d.path, order);
    for (const std::string& dir : order) {
      while (::rmdir(dir.c_str()) != 0) {
        int err = errno;
        if (err == ENOENT) break;
        if (err != EBUSY) return ErrnoStatus("rmdir " + dir, err);
        if (clock.MonotonicMs() >= deadline) {
          std::set<pid_t> left;
          ReadProcs(dir, left);
          return Status::FailedPrecondition(
              fmt::format("cgroup {} is busy: processes {} are still in it", dir,
                          PidList(std::vector<pid_t>(left.begin(), left.end()))));
        }
        clock.SleepMs(kPollMs);
      }
    }
  }
  return Status::OK();
}

}  // namespace lathe::os

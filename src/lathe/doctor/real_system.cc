#include "lathe/doctor/real_system.h"

#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/statvfs.h>
#include <sys/timex.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <filesystem>

#include "lathe/gpu/source.h"
#include "lathe/os/command.h"

extern char** environ;

namespace lathe::doctor {
namespace {

// /proc and /sys files are small; anything larger is cut here.
constexpr size_t kMaxReadBytes = 1 << 20;

class RealSystemView : public SystemView {
 public:
  explicit RealSystemView(RealSystemOptions o) : o_(std::move(o)) {}

  Result<std::string> ReadFile(const std::string& path) const override {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return ErrnoStatus(path, errno);
    std::string out;
    char buf[8192];
    ssize_t n;
    while ((n = ::read(fd, buf, sizeof buf)) > 0 && out.size() < kMaxReadBytes) {
      out.append(buf, static_cast<size_t>(n));
    }
    int err = errno;
    ::close(fd);
    if (n < 0) return ErrnoStatus(path, err);
    return out;
  }

  Result<std::vector<std::string>> ListDir(const std::string& path) const override {
    DIR* d = ::opendir(path.c_str());
    if (d == nullptr) return ErrnoStatus(path, errno);
    std::vector<std::string> names;
    while (dirent* e = ::readdir(d)) {
      std::string n = e->d_name;
      if (n != "." && n != "..") names.push_back(n);
    }
    ::closedir(d);
    return names;
  }

  std::optional<std::string> Getenv(const std::string& name) const override {
    const char* v = std::getenv(name.c_str());
    if (v == nullptr) return std::nullopt;
    return std::string(v);
  }

  std::vector<std::pair<std::string, std::string>> Environment() const override {
    std::vector<std::pair<std::string, std::string>> out;
    for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
      std::string kv = *e;
      size_t eq = kv.find('=');
      if (eq != std::string::npos) out.emplace_back(kv.substr(0, eq), kv.substr(eq + 1));
    }
    return out;
  }

  Result<FsStats> StatFs(const std::string& path) const override {
    struct statvfs s {};
    if (::statvfs(path.c_str(), &s) != 0) return ErrnoStatus(path, errno);
    FsStats f;
    f.size_bytes = static_cast<uint64_t>(s.f_blocks) * s.f_frsize;
    f.free_bytes = static_cast<uint64_t>(s.f_bavail) * s.f_frsize;
    f.inodes_total = s.f_files;
    f.inodes_free = s.f_favail;
    return f;
  }

  Result<Rlimit> GetRlimit(RlimitKind kind) const override {
    rlimit r{};
    if (::getrlimit(kind == RlimitKind::kOpenFiles ? RLIMIT_NOFILE : RLIMIT_NPROC, &r) != 0) {
      return ErrnoStatus("getrlimit", errno);
    }
    auto conv = [](rlim_t v) { return v == RLIM_INFINITY ? kUnlimited : uint64_t(v); };
    return Rlimit{conv(r.rlim_cur), conv(r.rlim_max)};
  }

  int CpuCount() const override {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (::sched_getaffinity(0, sizeof set, &set) == 0) return CPU_COUNT(&set);
    long n = ::sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? static_cast<int>(n) : 1;
  }

  std::optional<bool> ClockSynchronized() const override {
    timex t{};
    int state = ::adjtimex(&t);
    if (state < 0) return std::nullopt;
    return state != TIME_ERROR && (t.status & STA_UNSYNC) == 0;
  }

  std::string Cwd() const override {
    char buf[PATH_MAX];
    return ::getcwd(buf, sizeof buf) != nullptr ? buf : "/";
  }

  std::string LatheHome() const override { return o_.lathe_home; }

  Status ProbeWritable(const std::string& dir) const override {
    std::string tmpl = dir + "/.lathe-doctor-XXXXXX";
    int fd = ::mkstemp(tmpl.data());
    if (fd < 0) return ErrnoStatus(dir, errno);
    ::close(fd);
    ::unlink(tmpl.c_str());
    return Status::OK();
  }

  std::string StoreDir() const override { return o_.store_dir; }
  std::string UnreadableStoreDir() const override { return o_.unreadable_store_dir; }
  std::string SelfExe() const override { return o_.self_exe; }
  Result<CaptureResult> CaptureRoundTrip(int64_t timeout_ms) const override {
    if (!o_.capture) return Status::Unavailable("not checked");
    return o_.capture(timeout_ms);
  }

  Status DaemonStatus(std::string* where) const override {
    if (!o_.daemon_status) return Status::Unavailable("not checked");
    return o_.daemon_status(where);
  }

  std::optional<std::string> FindExecutable(const std::string& name) const override {
    if (name.find('/') != std::string::npos) {
      return ::access(name.c_str(), X_OK) == 0 ? std::optional<std::string>(name) : std::nullopt;
    }
    std::string path = Getenv("PATH").value_or("/usr/local/bin:/usr/bin:/bin");
    size_t start = 0;
    while (start <= path.size()) {
      size_t end = path.find(':', start);
      if (end == std::string::npos) end = path.size();
      std::string dir = path.substr(start, end - start);
      std::string cand = (dir.empty() ? "." : dir) + "/" + name;
      if (::access(cand.c_str(), X_OK) == 0) return cand;
      start = end + 1;
    }
    return std::nullopt;
  }

  std::string RealPath(const std::string& path) const override {
    std::error_code ec;
    auto p = std::filesystem::canonical(path, ec);
    return ec ? path : p.string();
  }

  Result<gpu::Inventory> SampleGpus() const override {
    ASSIGN_OR_RETURN(auto source, gpu::OpenGpuSource(o_.gpu_spec));
    return source->Sample();
  }

  Result<CommandOutput> Run(const std::vector<std::string>& argv,
                            int64_t timeout_ms) const override {
    return os::RunCommand(argv, timeout_ms);
  }

 private:
  const RealSystemOptions o_;
};

}  // namespace

std::unique_ptr<SystemView> NewRealSystemView(RealSystemOptions options) {
  return std::make_unique<RealSystemView>(std::move(options));
}

}  // namespace lathe::doctor

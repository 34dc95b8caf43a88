#include "lathe/doctor/real_system.h"

#include <sched.h>
#include <sys/timex.h>

#include <cstdlib>
#include <filesystem>

#include "lathe/gpu/source.h"
#include "lathe/os/clock.h"
#include "lathe/os/command.h"
#include "lathe/os/disk_space.h"
#include "lathe/os/files.h"
#include "lathe/os/identity.h"
#include "lathe/os/machine.h"
#include "lathe/os/process.h"
#include "lathe/os/users.h"

extern char** environ;

namespace lathe::doctor {
namespace {

// /proc and /sys files are small; anything larger is cut here.
constexpr size_t kMaxReadBytes = 1 << 20;

class RealSystemView : public SystemView {
 public:
  explicit RealSystemView(RealSystemOptions o) : o_(std::move(o)) {}

  Result<std::string> ReadFile(const std::string& path) const override {
    ASSIGN_OR_RETURN(std::string out, os::ReadFileUpTo(path, kMaxReadBytes));
    if (out.size() > kMaxReadBytes) out.resize(kMaxReadBytes);
    return out;
  }

  Result<std::vector<std::string>> ListDir(const std::string& path) const override {
    return os::ListDir(path);
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
    ASSIGN_OR_RETURN(os::FilesystemSpace s, os::StatFilesystem(path));
    FsStats f;
    f.size_bytes = s.size_bytes;
    f.free_bytes = s.available_bytes;
    f.inodes_total = s.inodes_total;
    f.inodes_free = s.inodes_available;
    return f;
  }

  Result<Rlimit> GetRlimit(RlimitKind kind) const override {
    ASSIGN_OR_RETURN(
        os::ResourceLimit r,
        os::GetResourceLimit(kind == RlimitKind::kOpenFiles ? os::LimitedResource::kOpenFiles
                                                            : os::LimitedResource::kProcesses));
    auto conv = [](uint64_t v) { return v == os::kNoLimit ? kUnlimited : v; };
    return Rlimit{conv(r.soft), conv(r.hard)};
  }

  int CpuCount() const override {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (::sched_getaffinity(0, sizeof set, &set) == 0) return CPU_COUNT(&set);
    return os::OnlineCpus();
  }

  std::optional<bool> ClockSynchronized() const override {
    timex t{};
    int state = ::adjtimex(&t);
    if (state < 0) return std::nullopt;
    return state != TIME_ERROR && (t.status & STA_UNSYNC) == 0;
  }

  std::string Cwd() const override { return os::CurrentDir().value_or("/"); }

  std::string LatheHome() const override { return o_.lathe_home; }
  bool LatheHomeIsOthers() const override { return o_.lathe_home_is_others; }

  Status ProbeWritable(const std::string& dir) const override { return os::ProbeWritable(dir); }

  std::string StoreDir() const override { return o_.store_dir; }
  std::string UnreadableStoreDir() const override { return o_.unreadable_store_dir; }
  std::string SelfExe() const override { return o_.self_exe; }
  int64_t WallClockMs() const override { return os::RealClock().NowMs(); }

  std::string UserName() const override {
    auto u = os::LookupUser(os::RealUid());
    return u.ok() ? u->name : std::to_string(os::RealUid());
  }

  Status ProbeWritableAsUser(const std::string& dir, std::string* as_user) const override {
    if (!os::IsRoot()) {
      *as_user = UserName();
      return os::ProbeWritable(dir);
    }
    ASSIGN_OR_RETURN(os::UserInfo nobody, os::LookupUserByName("nobody"));
    *as_user = nobody.name;
    return os::AsUser(os::IdentityOf(nobody.uid, nobody.gid),
                      [&] { return os::ProbeWritable(dir); });
  }

  Status RemoveFile(const std::string& path) const override { return os::RemoveFile(path); }
  Result<CaptureResult> CaptureRoundTrip(int64_t timeout_ms) const override {
    if (!o_.capture) return Status::Unavailable("not checked");
    return o_.capture(timeout_ms);
  }

  Result<CommandOutput> RunInImage(const std::string& image, const std::vector<std::string>& argv,
                                   int gpus, int64_t timeout_ms) const override {
    if (!o_.run_in_image) return Status::Unavailable("not checked");
    return o_.run_in_image(image, argv, gpus, timeout_ms);
  }

  Status DaemonStatus(std::string* where) const override {
    if (!o_.daemon_status) return Status::Unavailable("not checked");
    return o_.daemon_status(where);
  }

  std::optional<std::string> FindExecutable(const std::string& name) const override {
    if (name.find('/') != std::string::npos) {
      return os::IsExecutable(name) ? std::optional<std::string>(name) : std::nullopt;
    }
    std::string path = Getenv("PATH").value_or("/usr/local/bin:/usr/bin:/bin");
    size_t start = 0;
    while (start <= path.size()) {
      size_t end = path.find(':', start);
      if (end == std::string::npos) end = path.size();
      std::string dir = path.substr(start, end - start);
      std::string cand = (dir.empty() ? "." : dir) + "/" + name;
      if (os::IsExecutable(cand)) return cand;
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

  Result<CommandOutput> RunWithEnv(const std::vector<std::string>& argv,
                                   const std::map<std::string, std::string>& env,
                                   int64_t timeout_ms) const override {
    std::map<std::string, std::string> all;
    for (auto& [k, v] : Environment()) all[k] = v;
    for (const auto& [k, v] : env) all[k] = v;
    return os::RunCommandWithEnv(argv, all, timeout_ms);
  }

 private:
  const RealSystemOptions o_;
};

}  // namespace

std::unique_ptr<SystemView> NewRealSystemView(RealSystemOptions options) {
  return std::make_unique<RealSystemView>(std::move(options));
}

}  // namespace lathe::doctor

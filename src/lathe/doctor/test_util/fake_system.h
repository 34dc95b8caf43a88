// A fabricated machine for doctor tests: every answer a SystemView gives
// comes from these public fields. HealthyMachine() fills them with a sane
// GPU-less Linux box; a test changes the one thing it is about.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "lathe/doctor/system_view.h"

namespace lathe::doctor::testing {

class FakeSystemView : public SystemView {
 public:
  std::map<std::string, std::string> files;              // path → content
  std::map<std::string, std::vector<std::string>> dirs;  // path → names
  std::map<std::string, std::string> env;
  std::map<std::string, FsStats> statfs;  // exact path → answer
  Rlimit nofile{65536, 65536};
  Rlimit nproc{127000, 127000};
  int cpus = 16;
  std::optional<bool> clock_synced = true;
  std::string cwd = "/work";
  std::string home = "/home/ann/.local/state/lathe";
  bool home_is_others = false;  // the system daemon's home, seen by a user
  std::set<std::string> writable = {"/tmp", "/home/ann/.local/state/lathe", "/home/ann"};
  Status daemon = Status::Unavailable("no socket at /home/ann/.local/state/lathe/lathe.sock");
  std::string daemon_where = "/home/ann/.local/state/lathe/lathe.sock";
  std::set<std::string> executables = {"/usr/bin/python3", "/usr/bin/getent", "/usr/bin/podman",
                                       "/usr/sbin/runc", "/usr/bin/catatonit"};
  // Command answers keyed by "argv[0] argv[1]" (or the longest key with a
  // space that is a prefix of it); a missing key is NotFound.
  std::map<std::string, Result<CommandOutput>> commands;
  Result<gpu::Inventory> gpus = gpu::Inventory{};
  mutable int run_count = 0;  // commands run (probes)
  std::string store_dir;      // "" = no store; fsck answers come from commands["lathe snap"]
  std::string unreadable_store_dir;
  Result<CaptureResult> capture = CaptureResult{"5e1f0c2a9b7d3e4f", 380, "", ""};
  int64_t now_ms = 1796585593000;  // the wall clock
  std::string user = "ann";
  // Directories an ordinary user may write (ProbeWritableAsUser).
  std::set<std::string> user_writable;
  // What RunWithEnv was given, one "argv[0] NAME=VALUE …" line per call.
  // Checks run in parallel (a line per pool): the members written by the
  // const calls below are written under log_mu; tests read them after the run.
  std::shared_ptr<std::mutex> log_mu = std::make_shared<std::mutex>();  // shared by copies
  mutable std::vector<std::string> env_log;
  mutable std::vector<std::string> removed;  // RemoveFile's paths
  // A really shared directory: what the cluster test job's script (run
  // through RunWithEnv) writes with `printf %s 'X' … >'PATH'` is then read
  // back by ReadFile.
  bool jobs_share_files = false;
  mutable std::map<std::string, std::string> job_files;

  Result<std::string> ReadFile(const std::string& path) const override;
  Result<std::vector<std::string>> ListDir(const std::string& path) const override;
  std::optional<std::string> Getenv(const std::string& name) const override;
  std::vector<std::pair<std::string, std::string>> Environment() const override;
  Result<FsStats> StatFs(const std::string& path) const override;
  Result<Rlimit> GetRlimit(RlimitKind kind) const override;
  int CpuCount() const override { return cpus; }
  std::optional<bool> ClockSynchronized() const override { return clock_synced; }
  std::string Cwd() const override { return cwd; }
  std::string LatheHome() const override { return home; }
  bool LatheHomeIsOthers() const override { return home_is_others; }
  Status ProbeWritable(const std::string& dir) const override;
  Status DaemonStatus(std::string* where) const override;
  std::optional<std::string> FindExecutable(const std::string& name) const override;
  std::string RealPath(const std::string& path) const override { return path; }
  std::string StoreDir() const override { return store_dir; }
  std::string UnreadableStoreDir() const override { return unreadable_store_dir; }
  std::string SelfExe() const override { return "lathe"; }
  Result<CaptureResult> CaptureRoundTrip(int64_t) const override { return capture; }
  int64_t WallClockMs() const override { return now_ms; }
  std::string UserName() const override { return user; }
  Status ProbeWritableAsUser(const std::string& dir, std::string* as_user) const override;
  Status RemoveFile(const std::string& path) const override;
  Result<gpu::Inventory> SampleGpus() const override { return gpus; }
  Result<CommandOutput> Run(const std::vector<std::string>& argv,
                            int64_t timeout_ms) const override;
  // As Run (the same answers), and logs the environment given.
  Result<CommandOutput> RunWithEnv(const std::vector<std::string>& argv,
                                   const std::map<std::string, std::string>& env,
                                   int64_t timeout_ms) const override;

  // Convenience: a file, listed in its directory and every ancestor's.
  void AddFile(const std::string& path, const std::string& content);
  // The answer to commands whose "argv[0] argv[1]" is `key`.
  void SetCommand(const std::string& key, Result<CommandOutput> answer) {
    commands.insert_or_assign(key, std::move(answer));
  }
  // The torch probe's answer for /usr/bin/python3.
  void SetTorch(const std::string& json);
};

// A GPU-less machine where every system, network and lathe check is ok:
// 64 GiB RAM, no swap, cgroup v2 without limit, no OOM kill since boot (up
// 3 days), /dev/shm 32 GiB, /tmp on
// ext4 with 200 GiB free, eth0 MTU 1500, no proxy, DNS answering, torch
// not installed, no nvcc.
FakeSystemView HealthyMachine();

inline constexpr uint64_t kGiB = 1ULL << 30;
inline constexpr uint64_t kMiB = 1ULL << 20;

}  // namespace lathe::doctor::testing

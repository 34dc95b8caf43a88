#include "lathe/exec/container/podman.h"

#include <algorithm>

#include <fmt/format.h>

#include "lathe/exec/slurm/slurm_commands.h"
#include "lathe/os/files.h"

namespace lathe::exec {

namespace {

std::string LimitText(uint64_t v) { return v == os::kNoLimit ? "-1" : std::to_string(v); }

// podman 4.3 runs its OCI runtime with at most 32768 processes (its own
// RLIMIT_NPROC): a container asking for more fails to start ("error setting
// rlimit type 6").
constexpr uint64_t kPodmanMaxProcesses = 32768;

// podman's PATH, root's or a user's: the system's directories alone.
constexpr char kPodmanPath[] = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

}  // namespace

std::string ContainersConf(const PodmanSetup& s, const os::ResourceLimit& open_files,
                           const os::ResourceLimit& processes) {
  return fmt::format(R"(# Written by the Lathe daemon at each start (exec/container/podman.h).
[containers]
default_ulimits = ["nofile={}:{}", "nproc={}:{}"]
init_path = "/usr/libexec/podman/catatonit"
[engine]
cgroup_manager = "cgroupfs"
events_logger = "file"
runtime = "runc"
tmp_dir = "{}"
)",
                     LimitText(open_files.soft), LimitText(open_files.hard),
                     LimitText(std::min(processes.soft, kPodmanMaxProcesses)),
                     LimitText(std::min(processes.hard, kPodmanMaxProcesses)), s.LibpodTmpDir());
}

std::string StorageConf(const PodmanSetup& s) {
  return fmt::format(R"(# Written by the Lathe daemon at each start (exec/container/podman.h).
[storage]
driver = "overlay"
graphroot = "{}"
runroot = "{}"
[storage.options.overlay]
skip_mount_home = "true"
)",
                     s.GraphRoot(), s.RunRoot());
}

namespace {

// s.ConfPath(): ContainersConf with this process's limits.
Status WriteContainersConf(const PodmanSetup& s) {
  auto files = os::GetResourceLimit(os::LimitedResource::kOpenFiles);
  auto procs = os::GetResourceLimit(os::LimitedResource::kProcesses);
  const os::ResourceLimit fallback{1024, 1024};
  return os::WriteFileAtomic(
      s.ConfPath(),
      ContainersConf(s, files.ok() ? *files : fallback, procs.ok() ? *procs : fallback), 0644);
}

}  // namespace

Status PreparePodmanSetup(const PodmanSetup& s) {
  for (const std::string& d : {s.dir, s.GraphRoot(), s.RunRoot(), s.TmpDir(), s.LibpodTmpDir()}) {
    RETURN_IF_ERROR(os::MakeDirs(d, 0700));
  }
  RETURN_IF_ERROR(os::WriteFileAtomic(s.StorageConfPath(), StorageConf(s), 0644));
  return WriteContainersConf(s);
}

std::vector<std::string> PodmanBase(const PodmanSetup& s) {
  return {s.podman,    "--root",           s.GraphRoot(), "--runroot",
          s.RunRoot(), "--storage-driver", "overlay"};
}

std::map<std::string, std::string> PodmanEnvironment(const PodmanSetup& s) {
  return {{"PATH", kPodmanPath},
          {"HOME", s.dir},
          {"CONTAINERS_CONF", s.ConfPath()},
          {"CONTAINERS_STORAGE_CONF", s.StorageConfPath()},
          {"TMPDIR", s.TmpDir()},
          {"LANG", "C.UTF-8"}};
}

std::string ContainerName(const std::string& run_id, int attempt) {
  return fmt::format("lathe-{}-{}", run_id, attempt);
}

std::vector<std::string> PodmanRemove(const PodmanSetup& s, const std::string& name) {
  std::vector<std::string> argv = PodmanBase(s);
  argv.insert(argv.end(), {"rm", "--force", "--ignore", "--time", "0", name});
  return argv;
}

ContainerLaunch PodmanRun(const PodmanSetup& s, const ContainerRun& r) {
  const std::string name = ContainerName(r.run_id, r.attempt);
  ContainerLaunch c;
  c.argv = PodmanBase(s);
  auto add = [&](std::initializer_list<std::string> args) {
    c.argv.insert(c.argv.end(), args.begin(), args.end());
  };
  add({"run", "--rm", "--name", name, "--label", "lathe.run=" + r.run_id, "--label",
       fmt::format("lathe.attempt={}", r.attempt), "--network", "host", "--init", "--user",
       fmt::format("{}:{}", r.uid, r.gid)});
  for (gid_t g : r.groups) {
    if (g != r.gid) add({"--group-add", std::to_string(g)});
  }
  add({"--security-opt", "no-new-privileges", "--cap-drop", "all", "--pull", "never"});
  if (!r.cgroup_parent.empty()) add({"--cgroup-parent", r.cgroup_parent});
  if (r.shm_bytes > 0) add({"--shm-size", std::to_string(r.shm_bytes)});
  for (const auto& m : r.mounts) {
    add({"--volume",
         m.stage + ":" + m.source + (m.readonly ? ":ro,nosuid,nodev" : ":nosuid,nodev")});
  }
  for (const auto& d : r.devices) add({"--device", d});
  if (!r.env_file.empty()) add({"--env-file", r.env_file});
  if (!r.workdir.empty()) add({"--workdir", r.workdir});
  add({"--umask", fmt::format("{:04o}", r.umask)});
  // The run's command, not the image's entrypoint: `lathe run --image X -- cmd` runs cmd.
  add({"--entrypoint", "", r.image_id});
  c.argv.insert(c.argv.end(), r.argv.begin(), r.argv.end());
  c.env = PodmanEnvironment(s);
  c.mounts = r.mounts;
  c.cleanup_argv = PodmanRemove(s, name);
  return c;
}

std::string BuildStorageConf() {
  return R"(# Written by the Lathe daemon at each start (exec/container/podman.h).
# Each user's podman gives its own --root and --runroot.
[storage]
driver = "vfs"
[storage.options]
skip_mount_home = "true"
[storage.options.vfs]
ignore_chown_errors = "true"
)";
}

Status PrepareBuildRoot(const std::string& root) {
  RETURN_IF_ERROR(os::MakeDirs(root, 0711));
  RETURN_IF_ERROR(os::Chmod(root, 0711));
  BuildStore b;
  b.root = root;
  RETURN_IF_ERROR(os::WriteFileAtomic(b.StorageConfPath(), BuildStorageConf(), 0644));
  PodmanSetup s;
  s.dir = root;  // its tmp_dir is replaced by each user's --tmpdir
  return WriteContainersConf(s);
}

std::vector<std::string> BuildPodmanBase(const BuildStore& b) {
  std::vector<std::string> argv = SetprivPrefix(b.user);
  // ignore_chown_errors on the command line: podman 4.3 leaves a rootless
  // user's storage.conf driver options unread (measured: `podman info` shows
  // none), and a base with files of other owners fails to load without it.
  argv.insert(argv.end(), {b.podman, "--root", b.GraphRoot(), "--runroot", b.RunRoot(), "--tmpdir",
                           b.LibpodTmpDir(), "--storage-driver", "vfs", "--storage-opt",
                           "vfs.ignore_chown_errors=true"});
  return argv;
}

std::map<std::string, std::string> BuildPodmanEnvironment(const BuildStore& b) {
  return {{"PATH", kPodmanPath},
          {"HOME", b.Dir()},
          {"USER", b.user.name.empty() ? std::to_string(b.user.uid) : b.user.name},
          {"XDG_RUNTIME_DIR", b.RuntimeDir()},
          {"CONTAINERS_CONF", b.ConfPath()},
          {"CONTAINERS_STORAGE_CONF", b.StorageConfPath()},
          {"TMPDIR", b.TmpDir()},
          {"LANG", "C.UTF-8"}};
}

std::vector<std::string> PodmanBuild(const BuildStore& b, const std::string& dir,
                                     const std::string& file, const std::string& iidfile) {
  std::vector<std::string> argv = BuildPodmanBase(b);
  argv.insert(argv.end(),
              {"build", "--network", "host", "--pull=never", "--layers", "--iidfile", iidfile});
  if (!file.empty()) argv.insert(argv.end(), {"--file", file});
  argv.push_back(dir);
  return argv;
}

Result<std::string> ContainerEnvFile(const std::map<std::string, std::string>& env,
                                     bool keep_path) {
  std::string out;
  for (const auto& [k, v] : env) {
    if (k == "PATH" && !keep_path) continue;
    if (v.find('\n') != std::string::npos || v.find('\r') != std::string::npos) {
      return Status::Msg(Code::kInvalidArgument, "image.env_line_break", {{"name", k}});
    }
    out += k + "=" + v + "\n";
  }
  return out;
}

PodmanExit DecodePodmanExit(int status) {
  PodmanExit e;
  if (status > 128 && status < 128 + 65) {
    e.signal = status - 128;
  } else {
    e.code = status;
  }
  return e;
}

}  // namespace lathe::exec

// Images::Build: `lathe image build` (daemon/images.h). The build runs as the
// user in their own rootless podman (exec::BuildStore); the daemon gives it
// the user's base images and takes the result into the shared store.
#include <fcntl.h>

#include <cctype>

#include <sys/stat.h>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "lathe/daemon/images.h"
#include "lathe/daemon/images_internal.h"
#include "lathe/exec/container/containerfile.h"
#include "lathe/exec/slurm/slurm_commands.h"
#include "lathe/os/command.h"
#include "lathe/os/fd.h"
#include "lathe/os/files.h"

namespace lathe::daemon {
namespace {

constexpr int64_t kBuildTimeoutMs = 6LL * 3600 * 1000;
constexpr int64_t kStepTimeoutMs = 30LL * 60 * 1000;  // a save or a load of a big image
constexpr size_t kTailBytes = 4096;
constexpr size_t kMaxContainerfileBytes = 1 << 20;

// NAME:TAG as a file name: what is not [A-Za-z0-9._-] becomes '_'.
std::string LogName(const std::string& name) {
  std::string out = name;
  for (char& c : out) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '-' && c != '_') c = '_';
  }
  return out;
}

// A command of the user's podman, its merged output kept (a failure's reason).
Result<os::CommandOutput> UserPodman(const exec::BuildStore& b,
                                     std::initializer_list<std::string> args, int stdin_fd = -1) {
  std::vector<std::string> argv = exec::BuildPodmanBase(b);
  argv.insert(argv.end(), args.begin(), args.end());
  return os::RunCommandLines(argv, exec::BuildPodmanEnvironment(b), stdin_fd, kStepTimeoutMs,
                             kTailBytes, [](std::string_view) {});
}

Status StepFailed(const std::string& what, const std::string& why) {
  return Status::Msg(Code::kInternal, "image.build_step_failed", {{"step", what}, {"why", why}});
}

// A step of the user's podman (its output merged): its reason.
Status StepFailed(const std::string& what, const os::CommandOutput& out) {
  return StepFailed(what, PodmanReasonIn(out.out, out.exit_code));
}

// Rootless podman leaves a pause process behind (it holds the user
// namespace for the user's next podman). A build must not leave a process:
// it is stopped when the build ends. The pid is read from the user's file, so
// the signal is sent as the user: it can reach none of anyone else's.
void StopPause(const exec::BuildStore& b, const os::FsIdentity& user) {
  std::string pid;
  (void)os::AsUser(user, [&]() -> Status {
    auto t = os::ReadRegularFileUpTo(b.LibpodTmpDir() + "/pause.pid", 32);
    if (t.ok()) pid = *t;
    return Status::OK();
  });
  while (!pid.empty() && !std::isdigit(static_cast<unsigned char>(pid.back()))) pid.pop_back();
  if (pid.empty() || pid.find_first_not_of("0123456789") != std::string::npos) return;
  std::vector<std::string> argv = exec::SetprivPrefix(b.user);
  argv.insert(argv.end(), {"/bin/kill", "-TERM", pid});
  (void)os::RunCommandWithEnv(argv, {{"PATH", "/usr/bin:/bin"}}, 5000);
}

}  // namespace

Status Images::PrepareBuildStore(const exec::BuildStore& b, const os::FsIdentity& user,
                                 const std::vector<std::pair<std::string, std::string>>& bases,
                                 const std::function<void(std::string_view)>& on_line) {
  // Made by root in root's 0711 directory (no user can put a link there),
  // then the user's; what is inside, the user makes.
  if (!os::Exists(b.Dir())) RETURN_IF_ERROR(os::MakeDir(b.Dir(), 0700));
  RETURN_IF_ERROR(os::ChownNoFollow(b.Dir(), user.uid, user.gid));
  RETURN_IF_ERROR(os::Chmod(b.Dir(), 0700));
  RETURN_IF_ERROR(os::AsUser(user, [&]() -> Status {
    for (const std::string& d : b.UserDirs()) RETURN_IF_ERROR(os::MakeDirs(d, 0700));
    return Status::OK();
  }));
  for (const auto& [ref, id] : bases) {
    ASSIGN_OR_RETURN(os::CommandOutput exists, UserPodman(b, {"image", "exists", id}));
    if (exists.exit_code != 0) {
      on_line(fmt::format("lathe: giving the build {} ({})", ref, id.substr(0, 12)));
      // Saved by root into root's directory, opened, unlinked at once: the
      // user's podman reads it on its stdin and never sees a path.
      const std::string archive =
          fmt::format("{}/base-{}-{}.tar", podman_->TmpDir(), id.substr(0, 12), clock_.NowMs());
      auto saved = os::RunCommandWithEnv(
          Podman({"save", "--format", "oci-archive", "--output", archive, id}),
          exec::PodmanEnvironment(*podman_), kStepTimeoutMs);
      if (!saved.ok()) return saved.status();
      if (saved->exit_code != 0) {
        (void)os::RemoveFileIfPresent(archive);
        return StepFailed("podman save " + ref, PodmanReason(*saved));
      }
      auto file = os::Fd::Open(archive, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
      (void)os::RemoveFileIfPresent(archive);
      if (!file.ok()) return file.status();
      ASSIGN_OR_RETURN(os::CommandOutput loaded, UserPodman(b, {"load"}, file->get()));
      if (loaded.exit_code != 0) return StepFailed("podman load " + ref, loaded);
    }
    if (ref.find('@') != std::string::npos) continue;  // found by its digest, not a name
    ASSIGN_OR_RETURN(os::CommandOutput tagged, UserPodman(b, {"tag", id, ref}));
    if (tagged.exit_code != 0) return StepFailed("podman tag " + ref, tagged);
  }
  return Status::OK();
}

Status Images::MoveBuilt(const exec::BuildStore& b, const os::FsIdentity& user,
                         const std::string& id) {
  const std::string archive = fmt::format("{}/built-{}.tar", b.TmpDir(), clock_.NowMs());
  ASSIGN_OR_RETURN(os::CommandOutput saved,
                   UserPodman(b, {"save", "--format", "oci-archive", "--output", archive, id}));
  // Opened as the user (their directory), unlinked once open.
  os::Fd file;
  Status opened = os::AsUser(user, [&]() -> Status {
    auto f = os::Fd::Open(archive, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY);
    (void)os::RemoveFileIfPresent(archive);
    if (!f.ok()) return f.status();
    file = std::move(*f);
    return Status::OK();
  });
  if (saved.exit_code != 0) return StepFailed("podman save", saved);
  RETURN_IF_ERROR(opened);
  // On its stdin: podman resolves a /proc/PID/fd path, which an unlinked file no longer has.
  auto loaded =
      os::RunCommandLines(Podman({"load", "--quiet"}), exec::PodmanEnvironment(*podman_),
                          file.get(), kStepTimeoutMs, kTailBytes, [](std::string_view) {});
  if (!loaded.ok()) return loaded.status();
  if (loaded->exit_code != 0 || StoredOf({id}).count(id) == 0) {
    return StepFailed("podman load", *loaded);
  }
  return Status::OK();
}

Result<ImageView> Images::Build(const os::FsIdentity& user, const BuildRequest& req,
                                const std::function<void(std::string_view)>& on_line) {
  RETURN_IF_ERROR(CheckImageName(req.name));
  if (!podman_) {
    return Status::Msg(Code::kFailedPrecondition, "image.unavailable", {{"note", note_}});
  }
  if (req.dir.empty() || req.dir[0] != '/') {
    return Status::Msg(Code::kInvalidArgument, "image.bad_path", {{"path", req.dir}});
  }
  if (!req.file.empty() && req.file[0] != '/') {
    return Status::Msg(Code::kInvalidArgument, "image.bad_path", {{"path", req.file}});
  }
  const std::string name = NormalizeImageName(req.name);
  // The Containerfile, read as the user: only for its FROM lines (podman
  // reads it again, as the user too).
  std::string file = req.file, text;
  RETURN_IF_ERROR(os::AsUser(user, [&]() -> Status {
    // Opened first, so that a directory the user cannot read says so.
    RETURN_IF_ERROR(os::Fd::Open(req.dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC).status());
    if (file.empty()) {
      for (const char* f : {"Containerfile", "Dockerfile"}) {
        if (os::Exists(req.dir + "/" + f)) {
          file = req.dir + "/" + f;
          break;
        }
      }
      if (file.empty()) {
        return Status::Msg(Code::kInvalidArgument, "image.build_no_file", {{"dir", req.dir}});
      }
    }
    ASSIGN_OR_RETURN(text, os::ReadRegularFileUpTo(file, kMaxContainerfileBytes));
    return Status::OK();
  }));
  ASSIGN_OR_RETURN(std::vector<exec::BaseImage> refs, exec::ContainerfileBases(text));
  std::vector<std::pair<std::string, std::string>> bases;
  for (const auto& r : refs) {
    ASSIGN_OR_RETURN(std::string id, Resolve(user.uid, r.ref, ""));
    bases.emplace_back(r.ref, id);
  }

  const exec::BuildStore b = BuildStoreFor(user);
  struct PauseStopper {
    const exec::BuildStore& b;
    const os::FsIdentity& user;
    ~PauseStopper() { StopPause(b, user); }
  } stop_pause{b, user};
  RETURN_IF_ERROR(PrepareBuildStore(b, user, bases, on_line));

  const std::string log_path = b.LogDir() + "/" + LogName(name) + ".log";
  os::Fd log;
  RETURN_IF_ERROR(os::AsUser(user, [&]() -> Status {
    ASSIGN_OR_RETURN(
        log, os::Fd::Open(log_path,
                          O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY, 0600));
    return Status::OK();
  }));
  const std::string iid = fmt::format("{}/iid-{}", b.TmpDir(), clock_.NowMs());
  auto out =
      os::RunCommandLines(exec::PodmanBuild(b, req.dir, file, iid), exec::BuildPodmanEnvironment(b),
                          -1, kBuildTimeoutMs, kTailBytes, [&](std::string_view line) {
                            std::string l(line);
                            l.push_back('\n');
                            (void)os::WriteFull(log.get(), l, log_path);
                            on_line(line);
                          });
  if (!out.ok()) return out.status();
  std::optional<std::string> id;
  (void)os::AsUser(user, [&]() -> Status {
    auto t = os::ReadRegularFileUpTo(iid, 256);
    (void)os::RemoveFileIfPresent(iid);
    if (t.ok()) id = IdIn(*t);
    return Status::OK();
  });
  if (out->exit_code != 0 || !id) {
    return Status::Msg(
        Code::kInvalidArgument, "image.build_failed",
        {{"name", req.name}, {"log", log_path}, {"why", PodmanReasonIn(out->out, out->exit_code)}});
  }
  // A build whose every step was cached gives an id the store may hold
  // already: nothing to move (a save and a load of the whole image).
  if (StoredOf({*id}).count(*id) == 0) {
    on_line(fmt::format("lathe: storing {} ({})", name, id->substr(0, 12)));
    RETURN_IF_ERROR(MoveBuilt(b, user, *id));
  }
  // The last build's time, for PruneBuildCaches (root's to set: the
  // directory is in root's).
  (void)os::SetMtime(b.Dir(), clock_.NowMs() * 1000000);
  return Record({user.uid, name, *id, "build " + req.dir, clock_.NowMs()});
}

std::vector<uid_t> Images::PruneBuildCaches(uid_t uid, bool everyone, int64_t unused_for_ms,
                                            bool dry_run) {
  std::vector<uid_t> out;
  if (!podman_) return out;
  const std::string root = BuildRoot(paths_);
  auto names = os::ListDir(root);
  if (!names.ok()) return out;
  const int64_t now_ms = clock_.NowMs();
  for (const std::string& n : *names) {
    if (n.empty() || n.find_first_not_of("0123456789") != std::string::npos || n.size() > 9) {
      continue;
    }
    const uid_t u = static_cast<uid_t>(std::stoul(n));
    if (!everyone && u != uid) continue;
    auto st = os::LstatFile(root + "/" + n);
    if (!st.ok() || !S_ISDIR(st->mode) || now_ms - st->mtime_ns / 1000000 < unused_for_ms) continue;
    out.push_back(u);
    if (dry_run) continue;
    const os::FsIdentity who = os::IdentityOf(u, u);
    const exec::BuildStore b = BuildStoreFor(who);
    auto reset = UserPodman(b, {"system", "reset", "--force"});
    StopPause(b, who);
    if (!reset.ok() || reset->exit_code != 0) {
      spdlog::warn(
          "build cache of uid {}: not emptied: {}", u,
          reset.ok() ? PodmanReasonIn(reset->out, reset->exit_code) : reset.status().ToString());
    }
  }
  return out;
}

}  // namespace lathe::daemon

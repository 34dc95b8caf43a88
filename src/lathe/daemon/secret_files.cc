#include "lathe/daemon/secret_files.h"

#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include "lathe/os/file_owner.h"
#include "lathe/os/files.h"
#include "lathe/os/identity.h"
#include "lathe/os/users.h"

namespace lathe::daemon {

std::string SecretFilesDir(const std::string& run_dir, int attempt) {
  return fmt::format("{}/secrets-{}", run_dir, attempt);
}

Status WriteSecretFiles(const std::string& dir, const std::map<std::string, std::string>& values,
                        uid_t uid, gid_t gid) {
  RETURN_IF_ERROR(RemoveSecretFiles(dir, uid, gid));
  Status st = os::WritePrivateDir(dir, values, uid, gid);
  if (!st.ok()) return Status(st.code(), "cannot write the run's secret files: " + st.message());
  return Status::OK();
}

Status RemoveSecretFiles(const std::string& dir, uid_t uid, gid_t gid) {
  auto stamp = os::LstatFile(dir);
  if (!stamp.ok()) return stamp.status().IsNotFound() ? Status::OK() : stamp.status();
  if (!S_ISDIR(stamp->mode)) return os::RemoveFile(dir);
  // The run may have taken its own permissions away; the directory is
  // reached through the daemon's run directory, which nobody else can change.
  RETURN_IF_ERROR(os::Chmod(dir, 0700));
  Status contents = os::AsUser(os::IdentityOf(uid, gid), [&]() -> Status {
    ASSIGN_OR_RETURN(auto names, os::ListDir(dir));
    for (const auto& name : names) RETURN_IF_ERROR(os::RemoveAll(dir + "/" + name));
    return Status::OK();
  });
  RETURN_IF_ERROR(contents);
  return os::RemoveDir(dir);
}

namespace {

// A directory that belongs to a user, not to root or the daemon's user.
bool UsersDir(const os::FileOwner& o) {
  return S_ISDIR(o.mode) && o.uid != 0 && o.uid != os::EffectiveUid();
}

}  // namespace

Status RemoveDaemonTree(const std::string& dir) {
  auto top = os::LstatOwner(dir);
  if (!top.ok()) return top.status().IsNotFound() ? Status::OK() : top.status();
  if (!S_ISDIR(top->mode)) return os::RemoveFile(dir);
  if (UsersDir(*top)) return RemoveSecretFiles(dir, top->uid, top->gid);
  ASSIGN_OR_RETURN(auto names, os::ListDir(dir));
  for (const auto& name : names) {
    const std::string path = dir + "/" + name;
    auto o = os::LstatOwner(path);
    if (o.ok() && UsersDir(*o)) RETURN_IF_ERROR(RemoveSecretFiles(path, o->uid, o->gid));
  }
  return os::RemoveAll(dir);
}

}  // namespace lathe::daemon

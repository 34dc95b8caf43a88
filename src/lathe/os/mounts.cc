#include "lathe/os/mounts.h"

#include <fcntl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>

#include <cerrno>

namespace lathe::os {

Result<Fd> OpenDirAs(const std::string& path, const FsIdentity& id) {
  if (path.empty() || path[0] != '/') {
    return Status::InvalidArgument("not an absolute path: " + path);
  }
  Fd fd;
  RETURN_IF_ERROR(AsUser(id, [&]() -> Status {
    int raw = ::open(path.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (raw < 0) return ErrnoStatus("open " + path, errno);
    fd = Fd(raw);
    return Status::OK();
  }));
  return fd;
}

Result<Fd> OpenOwnedDirAs(const std::string& path, const FsIdentity& id) {
  ASSIGN_OR_RETURN(Fd fd, OpenDirAs(path, id));
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return ErrnoStatus("stat " + path, errno);
  if (st.st_uid != id.uid) {
    return Status::PermissionDenied(path + " belongs to uid " + std::to_string(st.st_uid) +
                                    ", not to " + id.name);
  }
  return fd;
}

Status BindReadOnlyOnItself(int dir_fd, const std::string& what) {
  Fd tree(
      ::open_tree(dir_fd, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH | AT_RECURSIVE));
  if (!tree.valid()) return ErrnoStatus("open_tree " + what, errno);
  mount_attr attr{};
  attr.attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID;
  if (::mount_setattr(tree.get(), "", AT_EMPTY_PATH | AT_RECURSIVE, &attr, sizeof attr) != 0) {
    return ErrnoStatus("mount_setattr " + what, errno);
  }
  if (::move_mount(tree.get(), "", dir_fd, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) !=
      0) {
    return ErrnoStatus("move_mount " + what, errno);
  }
  return Status::OK();
}

Status BindDirOnto(int dir_fd, const std::string& target, bool readonly, const std::string& what) {
  Fd tree(
      ::open_tree(dir_fd, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH | AT_RECURSIVE));
  if (!tree.valid()) return ErrnoStatus("open_tree " + what, errno);
  mount_attr attr{};
  attr.attr_set = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | (readonly ? MOUNT_ATTR_RDONLY : 0);
  if (::mount_setattr(tree.get(), "", AT_EMPTY_PATH | AT_RECURSIVE, &attr, sizeof attr) != 0) {
    return ErrnoStatus("mount_setattr " + what, errno);
  }
  if (::move_mount(tree.get(), "", AT_FDCWD, target.c_str(), MOVE_MOUNT_F_EMPTY_PATH) != 0) {
    return ErrnoStatus("move_mount " + what + " onto " + target, errno);
  }
  return Status::OK();
}

Status ForbidNewPrivileges() {
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
    return ErrnoStatus("prctl(PR_SET_NO_NEW_PRIVS)", errno);
  }
  return Status::OK();
}

}  // namespace lathe::os

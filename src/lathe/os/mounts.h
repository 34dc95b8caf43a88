// Mounts on paths a user named, done by a root process without a race.
//
// A root process that mounts by path resolves the path as root, once per
// mount(2) call: a user who swaps a component of it for a symlink between two
// lookups redirects the mount, e.g. binds their own directory over /etc. The
// rule (docs/security.md, "Paths a user names"): such a directory is opened
// once, with the user's file-system identity and without following its last
// component, its owner is checked, and every mount step then acts on that
// open descriptor — no path is resolved again.
//
// Both calls are for a single-threaded child before exec (the run's
// process, in its own mount namespace); they need CAP_SYS_ADMIN there.
#pragma once

#include <sys/types.h>

#include <string>

#include "lathe/common/status.h"
#include "lathe/os/fd.h"
#include "lathe/os/users.h"

namespace lathe::os {

// Opens the directory `path` (absolute) as `id` (O_PATH | O_DIRECTORY |
// O_NOFOLLOW: the last component is never a symlink; the components before
// it are resolved with the user's permissions) and checks that `id.uid`
// owns it. PermissionDenied naming the path when the user does not own it;
// the errno's Status when it cannot be opened.
Result<Fd> OpenOwnedDirAs(const std::string& path, const FsIdentity& id);

// OpenOwnedDirAs without the owner check: a directory the user may enter
// but need not own (a group's project directory, a run's secrets).
Result<Fd> OpenDirAs(const std::string& path, const FsIdentity& id);

// Binds the directory open at `dir_fd` (with its submounts) onto the
// directory `target`, without set-user-ID programs or device files, and
// read-only when `readonly`. `target` is a path no user can change (a
// directory of root's): only the source comes from a user, and it is the
// descriptor, not a path. For a run in a container image, whose podman is
// handed `target` (exec/monitor.cc).
Status BindDirOnto(int dir_fd, const std::string& target, bool readonly, const std::string& what);

// Binds the directory open at `dir_fd` onto itself, read-only, without
// set-user-ID, recursively (open_tree, mount_setattr, move_mount on the
// descriptor: no path is looked up). The mount lands in the calling
// process's mount namespace, in which `dir_fd` must have been opened.
Status BindReadOnlyOnItself(int dir_fd, const std::string& what);

// Sets PR_SET_NO_NEW_PRIVS on the calling process: from now on neither it
// nor anything it executes gains privileges from a set-user-ID or
// set-group-ID program or file capabilities.
Status ForbidNewPrivileges();

}  // namespace lathe::os

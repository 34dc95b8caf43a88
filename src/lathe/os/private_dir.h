// A directory of this process's user alone: mode 0700, owned by the effective
// uid, opened without following a symlink. It holds files that carry a
// credential from one program of the user's to another (the CLI's sign-in page
// for the browser, api/browser_page.h): nobody else may list it, enter it, or
// plant or swap an entry in it. Every call works relative to the directory's
// descriptor, so a path swapped after the check leads nowhere.
//
// Thread-safety: the functions may be called from any thread.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "lathe/common/status.h"
#include "lathe/os/fd.h"

namespace lathe::os {

// Whether `dir` is a directory owned by the effective uid (following
// symlinks): a place where this user's private directories may be made
// (an inherited $XDG_RUNTIME_DIR of someone else's is not).
bool IsOwnDirectory(const std::string& dir);

// Opens `dir` (O_DIRECTORY|O_NOFOLLOW), making it and any missing parent with
// mode 0700 first. A directory of this user's with a looser mode is set to
// 0700. PermissionDenied naming the path when it is a symlink, not a
// directory, or another user's.
Result<Fd> OpenPrivateDir(const std::string& dir);

// Creates the plain file `name` in the directory open as `dir_fd` — a new
// file (O_EXCL|O_NOFOLLOW), mode 0600 whatever the umask — holding `data`.
// `dir` names the directory in errors. AlreadyExists when the name is taken.
Status WriteNewFileAt(int dir_fd, const std::string& dir, const std::string& name,
                      std::string_view data);

// Removes the regular files in the directory open as `dir_fd` whose names
// start with `prefix` and that were last modified before `before_ms` (epoch
// ms): what a crash or a closed terminal left. Returns how many went; entries
// that vanish meanwhile are skipped.
Result<int> RemoveOldFilesAt(int dir_fd, const std::string& dir, std::string_view prefix,
                             int64_t before_ms);

}  // namespace lathe::os

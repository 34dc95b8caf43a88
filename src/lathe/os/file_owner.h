// Who owns a file: for a root process that must act on a user's file with
// that user's identity (os::AsUser) rather than its own.
#pragma once

#include <sys/types.h>

#include <string>

#include "lathe/common/status.h"

namespace lathe::os {

struct FileOwner {
  uid_t uid = 0;
  gid_t gid = 0;
  mode_t mode = 0;  // st_mode: the type (S_ISDIR(mode) ...) and permission bits
};

// Who owns `path` itself, and what it is (lstat(2): a symlink's own owner).
// NotFound when it does not exist.
Result<FileOwner> LstatOwner(const std::string& path);

}  // namespace lathe::os

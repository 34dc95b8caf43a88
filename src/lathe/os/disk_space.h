// Free and total space of a filesystem (statvfs(2)).
#pragma once

#include <cstdint>
#include <string>

#include "lathe/common/status.h"

namespace lathe::os {

// Bytes an unprivileged writer may still use on the filesystem of `path`.
Result<uint64_t> AvailableBytes(const std::string& path);
// Total size of the filesystem of `path`.
Result<uint64_t> FilesystemBytes(const std::string& path);

// The whole of statvfs(2), in bytes and inodes.
struct FilesystemSpace {
  uint64_t size_bytes = 0;
  uint64_t available_bytes = 0;  // to an unprivileged writer (f_bavail)
  uint64_t inodes_total = 0;
  uint64_t inodes_available = 0;  // to an unprivileged writer (f_favail)
};
Result<FilesystemSpace> StatFilesystem(const std::string& path);

// Bytes the tree at `path` takes on disk (allocated blocks, so a log with a
// punched hole counts what it keeps): every entry under it, symlinks not
// followed, other filesystems mounted below not entered. NotFound when
// `path` does not exist; entries that vanish during the walk count nothing.
// fts(3) walks it.
Result<uint64_t> TreeDiskBytes(const std::string& path);

}  // namespace lathe::os

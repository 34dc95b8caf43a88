#include "lathe/os/disk_space.h"

#include <sys/statvfs.h>

#include <cerrno>

namespace lathe::os {

Result<FilesystemSpace> StatFilesystem(const std::string& path) {
  struct statvfs s;
  if (::statvfs(path.c_str(), &s) != 0) return ErrnoStatus("statvfs " + path, errno);
  FilesystemSpace f;
  f.size_bytes = static_cast<uint64_t>(s.f_blocks) * s.f_frsize;
  f.available_bytes = static_cast<uint64_t>(s.f_bavail) * s.f_frsize;
  f.inodes_total = s.f_files;
  f.inodes_available = s.f_favail;
  return f;
}

Result<uint64_t> AvailableBytes(const std::string& path) {
  ASSIGN_OR_RETURN(FilesystemSpace f, StatFilesystem(path));
  return f.available_bytes;
}

Result<uint64_t> FilesystemBytes(const std::string& path) {
  ASSIGN_OR_RETURN(FilesystemSpace f, StatFilesystem(path));
  return f.size_bytes;
}

}  // namespace lathe::os

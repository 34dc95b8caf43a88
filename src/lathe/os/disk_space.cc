#include "lathe/os/disk_space.h"

#include <sys/statvfs.h>

#include <cerrno>

namespace lathe::os {

Result<uint64_t> AvailableBytes(const std::string& path) {
  struct statvfs s;
  if (::statvfs(path.c_str(), &s) != 0) return ErrnoStatus("statvfs " + path, errno);
  return static_cast<uint64_t>(s.f_bavail) * s.f_frsize;
}

Result<uint64_t> FilesystemBytes(const std::string& path) {
  struct statvfs s;
  if (::statvfs(path.c_str(), &s) != 0) return ErrnoStatus("statvfs " + path, errno);
  return static_cast<uint64_t>(s.f_blocks) * s.f_frsize;
}

}  // namespace lathe::os

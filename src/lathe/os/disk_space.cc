#include "lathe/os/disk_space.h"

#include <fts.h>
#include <sys/stat.h>  // FTSENT's st_blocks
#include <sys/statvfs.h>

#include <cerrno>

#include "lathe/os/files.h"

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

Result<uint64_t> TreeDiskBytes(const std::string& path) {
  RETURN_IF_ERROR(LstatFile(path).status());  // NotFound when it does not exist
  std::string copy = path;
  char* roots[] = {copy.data(), nullptr};
  FTS* fts = ::fts_open(roots, FTS_PHYSICAL | FTS_NOCHDIR | FTS_XDEV, nullptr);
  if (fts == nullptr) return ErrnoStatus("fts_open " + path, errno);
  uint64_t bytes = 0;
  while (FTSENT* e = ::fts_read(fts)) {
    switch (e->fts_info) {
      case FTS_DP:  // a directory, on the way back up: counted on the way down
      case FTS_DNR:
      case FTS_ERR:
      case FTS_NS:  // vanished or unreadable meanwhile: nothing to count
        break;
      default:
        bytes += static_cast<uint64_t>(e->fts_statp->st_blocks) * 512;
    }
  }
  ::fts_close(fts);
  return bytes;
}

}  // namespace lathe::os

#include "lathe/os/file_owner.h"

#include <sys/stat.h>

#include <cerrno>

namespace lathe::os {

Result<FileOwner> LstatOwner(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return ErrnoStatus(path, errno);
  return FileOwner{st.st_uid, st.st_gid, st.st_mode};
}

}  // namespace lathe::os

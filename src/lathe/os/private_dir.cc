#include "lathe/os/private_dir.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "lathe/os/files.h"

namespace lathe::os {

bool IsOwnDirectory(const std::string& dir) {
  struct stat st;
  return ::stat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == ::geteuid();
}

Result<Fd> OpenPrivateDir(const std::string& dir) {
  RETURN_IF_ERROR(MakeDirs(dir, 0700));
  Fd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd.valid()) {
    // ELOOP/ENOTDIR: a symlink or a file where the directory should be.
    if (errno == ELOOP || errno == ENOTDIR) {
      return Status::PermissionDenied(dir + " is not a directory of this user's own");
    }
    return ErrnoStatus("open " + dir, errno);
  }
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) return ErrnoStatus("stat " + dir, errno);
  if (st.st_uid != ::geteuid()) {
    return Status::PermissionDenied(dir + " belongs to uid " + std::to_string(st.st_uid) +
                                    ", not to this user");
  }
  if ((st.st_mode & 07777) != 0700 && ::fchmod(fd.get(), 0700) != 0) {
    return ErrnoStatus("chmod " + dir, errno);
  }
  return fd;
}

Status WriteNewFileAt(int dir_fd, const std::string& dir, const std::string& name,
                      std::string_view data) {
  const std::string path = dir + "/" + name;
  if (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos) {
    return Status::InvalidArgument("not a plain file name: " + path);
  }
  Fd fd(::openat(dir_fd, name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!fd.valid()) return ErrnoStatus("create " + path, errno);
  if (::fchmod(fd.get(), 0600) != 0) return ErrnoStatus("chmod " + path, errno);
  Status st = WriteFull(fd.get(), data, path);
  if (st.ok()) st = fd.Close(path);
  // Best effort: clean-up of a file that could not be made right.
  if (!st.ok()) (void)::unlinkat(dir_fd, name.c_str(), 0);
  return st;
}

Result<int> RemoveOldFilesAt(int dir_fd, const std::string& dir, std::string_view prefix,
                             int64_t before_ms) {
  int copy = ::fcntl(dir_fd, F_DUPFD_CLOEXEC, 0);  // closedir closes its descriptor
  if (copy < 0) return ErrnoStatus("dup " + dir, errno);
  DIR* d = ::fdopendir(copy);
  if (d == nullptr) {
    int err = errno;
    ::close(copy);
    return ErrnoStatus("opendir " + dir, err);
  }
  ::rewinddir(d);
  int removed = 0;
  while (struct dirent* e = ::readdir(d)) {
    std::string_view name = e->d_name;
    if (name.substr(0, prefix.size()) != prefix) continue;
    struct stat st;
    if (::fstatat(dir_fd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode)) {
      continue;
    }
    const int64_t mtime_ms = int64_t{st.st_mtim.tv_sec} * 1000 + st.st_mtim.tv_nsec / 1'000'000;
    if (mtime_ms < before_ms && ::unlinkat(dir_fd, e->d_name, 0) == 0) ++removed;
  }
  ::closedir(d);
  return removed;
}

}  // namespace lathe::os

#include "lathe/os/file_lock.h"

#include <fcntl.h>
#include <sys/file.h>

#include <cerrno>

namespace lathe::os {
namespace {

int LockOp(FileLock::Mode mode) { return mode == FileLock::Mode::kShared ? LOCK_SH : LOCK_EX; }

}  // namespace

Result<FileLock> FileLock::Acquire(const std::string& path, Mode mode, unsigned file_mode) {
  ASSIGN_OR_RETURN(Fd fd, Fd::Open(path, O_RDWR | O_CREAT, file_mode));
  while (::flock(fd.get(), LockOp(mode)) != 0) {
    if (errno != EINTR) return ErrnoStatus("lock " + path, errno);
  }
  return FileLock(std::move(fd));
}

Result<FileLock> FileLock::TryAcquire(const std::string& path, Mode mode, unsigned file_mode) {
  ASSIGN_OR_RETURN(Fd fd, Fd::Open(path, O_RDWR | O_CREAT, file_mode));
  while (::flock(fd.get(), LockOp(mode) | LOCK_NB) != 0) {
    if (errno == EWOULDBLOCK) return Status::AlreadyExists("lock " + path + ": held elsewhere");
    if (errno != EINTR) return ErrnoStatus("lock " + path, errno);
  }
  return FileLock(std::move(fd));
}

}  // namespace lathe::os

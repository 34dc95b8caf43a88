// Advisory whole-file locks (flock(2)): the snapshot store's lock and the
// daemon's single-instance lock.
#pragma once

#include <string>

#include "lathe/common/status.h"
#include "lathe/os/fd.h"

namespace lathe::os {

// An flock(2) on a file, held until destruction (or the process dies, which
// is what makes it crash-safe: a killed snapshotter or daemon never leaves a
// stale lock). The lock belongs to the open file description, so locks taken
// through different FileLock objects conflict even inside one process.
// Move-only; one FileLock is not shared between threads without a lock.
class FileLock {
 public:
  enum class Mode { kShared, kExclusive };

  // Opens (creating it with `file_mode` if missing; an existing file keeps
  // its mode) `path` O_RDWR | O_CLOEXEC and waits until the lock is granted.
  static Result<FileLock> Acquire(const std::string& path, Mode mode, unsigned file_mode = 0644);
  // As Acquire, but does not wait: AlreadyExists when another open file
  // description holds a conflicting lock on `path`; other errors (the file
  // cannot be opened) keep their ErrnoStatus code.
  static Result<FileLock> TryAcquire(const std::string& path, Mode mode, unsigned file_mode = 0644);

  FileLock(FileLock&&) = default;
  FileLock& operator=(FileLock&&) = default;

 private:
  explicit FileLock(Fd fd) : fd_(std::move(fd)) {}
  Fd fd_;
};

}  // namespace lathe::os

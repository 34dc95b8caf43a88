// Low-level file helpers for the store: an owning file descriptor, full
// reads and writes that retry on EINTR, free space, directory listing and
// advisory store locks. Errors are Statuses built with ErrnoStatus (ENOSPC
// and EDQUOT become ResourceExhausted).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "lathe/common/status.h"

namespace lathe::snap {

// Owns one file descriptor; closes it on destruction. Move-only.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  Fd& operator=(Fd&& o) noexcept;
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd();

  // open(2) with O_CLOEXEC added.
  static Result<Fd> Open(const std::string& path, int flags, unsigned mode = 0644);

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  // Closes now and reports the error close(2) gives (it can report a failed
  // write-back on some filesystems).
  Status Close(const std::string& what);

 private:
  int fd_ = -1;
};

// Reads exactly `n` bytes at `offset`; an early end of file is an IoError
// naming `what`.
Status PreadFull(int fd, void* buf, size_t n, uint64_t offset, const std::string& what);
// Reads up to `n` bytes from the current position, fewer only at end of file.
Result<size_t> ReadUpTo(int fd, void* buf, size_t n, const std::string& what);
Status WriteFull(int fd, const void* buf, size_t n, const std::string& what);
Status PwriteFull(int fd, const void* buf, size_t n, uint64_t offset, const std::string& what);
Status Fsync(int fd, const std::string& what);

// Bytes an unprivileged writer may still use on the filesystem of `path`.
Result<uint64_t> AvailableBytes(const std::string& path);
// Total size of the filesystem of `path`.
Result<uint64_t> FilesystemBytes(const std::string& path);

// Names in `dir` (without . and ..), sorted. NotFound when `dir` is missing.
Result<std::vector<std::string>> ListDir(const std::string& dir);

// An flock(2) on a file, held until destruction (or the process dies, which
// is what makes it crash-safe: a killed snapshotter never leaves a stale
// lock). Locks taken through different FileLock objects conflict even inside
// one process.
class FileLock {
 public:
  enum class Mode { kShared, kExclusive };
  static Result<FileLock> Acquire(const std::string& path, Mode mode);
  FileLock(FileLock&&) = default;
  FileLock& operator=(FileLock&&) = default;

 private:
  explicit FileLock(Fd fd) : fd_(std::move(fd)) {}
  Fd fd_;
};

}  // namespace lathe::snap

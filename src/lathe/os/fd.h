// File descriptors: an owning descriptor and the full read and write loops
// that every caller uses instead of its own (they retry EINTR and short
// transfers). Errors are Statuses built with ErrnoStatus naming `what` (ENOSPC
// and EDQUOT become ResourceExhausted). Thread-safety: the free functions may
// be called from any thread; one Fd is not shared between threads without a
// lock.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "lathe/common/status.h"

namespace lathe::os {

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
  // Gives up ownership: returns the descriptor (-1 if none) without closing it.
  int release() {
    int fd = fd_;
    fd_ = -1;
    return fd;
  }
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

// The one write-all loop: writes all `n` bytes or fails. A failure part-way
// leaves an unknown prefix written; a caller that must know how much went out
// (a log that counts lost bytes) writes with its own single write(2).
Status WriteFull(int fd, const void* buf, size_t n, const std::string& what);
Status WriteFull(int fd, std::string_view data, const std::string& what);
// The same loop for a forked child before exec (only async-signal-safe calls
// there: it allocates nothing): 0, or the errno that stopped it.
int WriteFullErrno(int fd, const void* buf, size_t n);
// At `offset`, without moving the file position.
Status PwriteFull(int fd, const void* buf, size_t n, uint64_t offset, const std::string& what);
// To a socket with MSG_NOSIGNAL: a closed peer is an error (EPIPE), not a
// SIGPIPE that ends the process.
Status SendFull(int fd, std::string_view data, const std::string& what);

Status Fsync(int fd, const std::string& what);
// syncfs(2): writes back everything of the filesystem `fd` is on (one call
// for the many files a restore wrote, instead of an fsync each).
Status SyncFilesystem(int fd, const std::string& what);
// ftruncate(2): the file is `size` bytes long afterwards.
Status Truncate(int fd, uint64_t size, const std::string& what);
// Turns O_DIRECT on or off; false when the filesystem refuses it (then
// nothing changed).
bool SetDirectIo(int fd, bool on);
// Whether `fd` is open with O_DIRECT.
bool IsDirectIo(int fd);

}  // namespace lathe::os

#include "lathe/os/fd.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

namespace lathe::os {

Fd& Fd::operator=(Fd&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = o.fd_;
    o.fd_ = -1;
  }
  return *this;
}

Fd::~Fd() {
  if (fd_ >= 0) ::close(fd_);
}

Result<Fd> Fd::Open(const std::string& path, int flags, unsigned mode) {
  int fd = ::open(path.c_str(), flags | O_CLOEXEC, mode);
  if (fd < 0) return ErrnoStatus(path, errno);
  return Fd(fd);
}

Status Fd::Close(const std::string& what) {
  int fd = fd_;
  fd_ = -1;
  if (fd >= 0 && ::close(fd) != 0 && errno != EINTR) return ErrnoStatus("close " + what, errno);
  return Status::OK();
}

Status PreadFull(int fd, void* buf, size_t n, uint64_t offset, const std::string& what) {
  auto* p = static_cast<char*>(buf);
  while (n > 0) {
    ssize_t r = ::pread(fd, p, n, static_cast<off_t>(offset));
    if (r < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus("read " + what, errno);
    }
    if (r == 0) return Status::IoError("read " + what + ": unexpected end of file");
    p += r;
    n -= static_cast<size_t>(r);
    offset += static_cast<uint64_t>(r);
  }
  return Status::OK();
}

Result<size_t> ReadUpTo(int fd, void* buf, size_t n, const std::string& what) {
  auto* p = static_cast<char*>(buf);
  size_t got = 0;
  while (got < n) {
    ssize_t r = ::read(fd, p + got, n - got);
    if (r < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus("read " + what, errno);
    }
    if (r == 0) break;
    got += static_cast<size_t>(r);
  }
  return got;
}

namespace {

// The one write loop. `op(p, n, done)` makes one attempt to write `n` bytes
// from `p`, `done` bytes having gone out before it, and returns what write(2)
// would. Returns 0 or the errno that stopped it; allocates nothing.
template <typename Op>
int WriteLoop(const void* buf, size_t n, Op op) {
  const auto* p = static_cast<const char*>(buf);
  size_t done = 0;
  while (done < n) {
    ssize_t r = op(p + done, n - done, done);
    if (r < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    if (r == 0) return EIO;  // no progress on a non-empty write
    done += static_cast<size_t>(r);
  }
  return 0;
}

Status WriteStatus(int err, const std::string& what) {
  return err == 0 ? Status::OK() : ErrnoStatus("write " + what, err);
}

}  // namespace

int WriteFullErrno(int fd, const void* buf, size_t n) {
  return WriteLoop(buf, n, [fd](const char* p, size_t k, size_t) { return ::write(fd, p, k); });
}

Status WriteFull(int fd, const void* buf, size_t n, const std::string& what) {
  return WriteStatus(WriteFullErrno(fd, buf, n), what);
}

Status WriteFull(int fd, std::string_view data, const std::string& what) {
  return WriteFull(fd, data.data(), data.size(), what);
}

Status PwriteFull(int fd, const void* buf, size_t n, uint64_t offset, const std::string& what) {
  return WriteStatus(WriteLoop(buf, n,
                               [fd, offset](const char* p, size_t k, size_t done) {
                                 return ::pwrite(fd, p, k, static_cast<off_t>(offset + done));
                               }),
                     what);
}

Status SendFull(int fd, std::string_view data, const std::string& what) {
  return WriteStatus(
      WriteLoop(data.data(), data.size(),
                [fd](const char* p, size_t k, size_t) { return ::send(fd, p, k, MSG_NOSIGNAL); }),
      what);
}

Status Fsync(int fd, const std::string& what) {
  if (::fsync(fd) != 0) return ErrnoStatus("fsync " + what, errno);
  return Status::OK();
}

Status SyncFilesystem(int fd, const std::string& what) {
  if (::syncfs(fd) != 0) return ErrnoStatus("syncfs " + what, errno);
  return Status::OK();
}

Status Truncate(int fd, uint64_t size, const std::string& what) {
  if (::ftruncate(fd, static_cast<off_t>(size)) != 0) return ErrnoStatus("truncate " + what, errno);
  return Status::OK();
}

bool SetDirectIo(int fd, bool on) {
  int fl = ::fcntl(fd, F_GETFL);
  if (fl < 0) return false;
  int want = on ? (fl | O_DIRECT) : (fl & ~O_DIRECT);
  return want == fl || ::fcntl(fd, F_SETFL, want) == 0;
}

bool IsDirectIo(int fd) {
  int fl = ::fcntl(fd, F_GETFL);
  return fl >= 0 && (fl & O_DIRECT) != 0;
}

}  // namespace lathe::os

#include "lathe/snap/file_io.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

namespace lathe::snap {

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

Status WriteFull(int fd, const void* buf, size_t n, const std::string& what) {
  const auto* p = static_cast<const char*>(buf);
  while (n > 0) {
    ssize_t r = ::write(fd, p, n);
    if (r < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus("write " + what, errno);
    }
    p += r;
    n -= static_cast<size_t>(r);
  }
  return Status::OK();
}

Status PwriteFull(int fd, const void* buf, size_t n, uint64_t offset, const std::string& what) {
  const auto* p = static_cast<const char*>(buf);
  while (n > 0) {
    ssize_t r = ::pwrite(fd, p, n, static_cast<off_t>(offset));
    if (r < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus("write " + what, errno);
    }
    p += r;
    n -= static_cast<size_t>(r);
    offset += static_cast<uint64_t>(r);
  }
  return Status::OK();
}

Status Fsync(int fd, const std::string& what) {
  if (::fsync(fd) != 0) return ErrnoStatus("fsync " + what, errno);
  return Status::OK();
}

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

Result<std::vector<std::string>> ListDir(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return ErrnoStatus(dir, errno);
  std::vector<std::string> names;
  errno = 0;
  while (struct dirent* e = ::readdir(d)) {
    std::string name = e->d_name;
    if (name != "." && name != "..") names.push_back(std::move(name));
  }
  int err = errno;
  ::closedir(d);
  if (err != 0) return ErrnoStatus("readdir " + dir, err);
  std::sort(names.begin(), names.end());
  return names;
}

Result<FileLock> FileLock::Acquire(const std::string& path, Mode mode) {
  ASSIGN_OR_RETURN(Fd fd, Fd::Open(path, O_RDWR | O_CREAT, 0644));
  int op = mode == Mode::kShared ? LOCK_SH : LOCK_EX;
  while (::flock(fd.get(), op) != 0) {
    if (errno != EINTR) return ErrnoStatus("lock " + path, errno);
  }
  return FileLock(std::move(fd));
}

}  // namespace lathe::snap

#include "lathe/os/random_access_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

namespace lathe::os {

RandomAccessFile& RandomAccessFile::operator=(RandomAccessFile&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = o.fd_;
    path_ = std::move(o.path_);
    o.fd_ = -1;
  }
  return *this;
}

RandomAccessFile::~RandomAccessFile() {
  if (fd_ >= 0) ::close(fd_);
}

Result<RandomAccessFile> RandomAccessFile::Open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus(path, errno);
  RandomAccessFile f;
  f.fd_ = fd;
  f.path_ = path;
  return f;
}

Result<size_t> RandomAccessFile::ReadAt(uint64_t offset, char* buf, size_t n) const {
  size_t got = 0;
  while (got < n) {
    ssize_t r = ::pread(fd_, buf + got, n - got, static_cast<off_t>(offset + got));
    if (r < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus("read " + path_, errno);
    }
    if (r == 0) break;
    got += static_cast<size_t>(r);
  }
  return got;
}

Result<uint64_t> RandomAccessFile::Size() const {
  struct stat st;
  if (::fstat(fd_, &st) != 0) return ErrnoStatus("stat " + path_, errno);
  return static_cast<uint64_t>(st.st_size);
}

}  // namespace lathe::os

// A file opened read-only for reads at offsets (pread), for readers that walk
// a large file in bounded blocks — forwards or backwards — without holding it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "lathe/common/status.h"

namespace lathe::os {

// Owns one read-only descriptor; closes it on destruction. Move-only.
// Thread-safety: ReadAt and Size may be called from several threads at once
// (pread does not move a shared position).
class RandomAccessFile {
 public:
  RandomAccessFile() = default;  // not open: valid() is false
  RandomAccessFile(RandomAccessFile&& o) noexcept : fd_(o.fd_), path_(std::move(o.path_)) {
    o.fd_ = -1;
  }
  RandomAccessFile& operator=(RandomAccessFile&& o) noexcept;
  RandomAccessFile(const RandomAccessFile&) = delete;
  RandomAccessFile& operator=(const RandomAccessFile&) = delete;
  ~RandomAccessFile();

  // NotFound when `path` does not exist; other errors from ErrnoStatus.
  static Result<RandomAccessFile> Open(const std::string& path);

  bool valid() const { return fd_ >= 0; }
  // Reads up to `n` bytes at `offset` into `buf`, fewer only at the end of the
  // file (0 there). Retries EINTR and short reads.
  Result<size_t> ReadAt(uint64_t offset, char* buf, size_t n) const;
  // The file's size now (it may grow while it is read).
  Result<uint64_t> Size() const;

 private:
  int fd_ = -1;
  std::string path_;  // for error messages
};

}  // namespace lathe::os

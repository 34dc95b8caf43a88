#include "lathe/os/files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <filesystem>

#include "lathe/common/ids.h"

namespace lathe::os {

Result<std::string> ReadFile(const std::string& path) { return ReadFileUpTo(path, SIZE_MAX - 1); }

Result<std::string> ReadFileUpTo(const std::string& path, size_t max_bytes) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus(path, errno);
  std::string out;
  char buf[65536];
  while (out.size() <= max_bytes) {
    size_t want = std::min(sizeof buf, max_bytes + 1 - out.size());
    ssize_t n = ::read(fd, buf, want);
    if (n < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      ::close(fd);
      return ErrnoStatus(path, err);
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

Status FsyncDir(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus(dir, errno);
  int rc = ::fsync(fd);
  int err = errno;
  ::close(fd);
  return rc == 0 ? Status::OK() : ErrnoStatus("fsync " + dir, err);
}

namespace {
Status WriteAll(int fd, std::string_view data, const std::string& path) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus("write " + path, errno);
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  return Status::OK();
}
}  // namespace

Status WriteFileAtomic(const std::string& path, std::string_view data, unsigned mode,
                       Durability durability) {
  const bool sync = durability == Durability::kSync;
  std::string dir = std::filesystem::path(path).parent_path().string();
  if (dir.empty()) dir = ".";
  std::string tmp = path + ".tmp-" + NewId("");
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
  if (fd < 0) return ErrnoStatus(tmp, errno);
  Status st = WriteAll(fd, data, tmp);
  if (st.ok() && ::fchmod(fd, mode) != 0) st = ErrnoStatus("chmod " + tmp, errno);
  if (st.ok() && sync && ::fsync(fd) != 0) st = ErrnoStatus("fsync " + tmp, errno);
  ::close(fd);
  if (st.ok() && ::rename(tmp.c_str(), path.c_str()) != 0)
    st = ErrnoStatus("rename " + path, errno);
  if (!st.ok()) {
    ::unlink(tmp.c_str());  // nothing already stored is touched on failure
    return st;
  }
  return sync ? FsyncDir(dir) : Status::OK();
}

Status MakeDirs(const std::string& path, unsigned mode) {
  std::string cur;
  for (size_t i = 0; i <= path.size(); ++i) {
    if (i == path.size() || (path[i] == '/' && i > 0)) {
      cur = path.substr(0, i);
      if (::mkdir(cur.c_str(), mode) != 0 && errno != EEXIST)
        return ErrnoStatus("mkdir " + cur, errno);
    }
  }
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return ErrnoStatus(path, errno);
  if (!S_ISDIR(st.st_mode)) return Status::FailedPrecondition(path + " is not a directory");
  return Status::OK();
}

Status MakeDirsOwned(const std::string& path, unsigned mode, uid_t uid, gid_t gid) {
  for (size_t i = 0; i <= path.size(); ++i) {
    if (i != path.size() && (path[i] != '/' || i == 0)) continue;
    std::string cur = path.substr(0, i);
    if (::mkdir(cur.c_str(), mode) == 0) {
      if (::lchown(cur.c_str(), uid, gid) != 0) return ErrnoStatus("chown " + cur, errno);
    } else if (errno != EEXIST) {
      return ErrnoStatus("mkdir " + cur, errno);
    }
  }
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return ErrnoStatus(path, errno);
  if (!S_ISDIR(st.st_mode)) return Status::FailedPrecondition(path + " is not a directory");
  return Status::OK();
}

Status ChownTree(const std::string& path, uid_t uid, gid_t gid) {
  if (::lchown(path.c_str(), uid, gid) != 0) return ErrnoStatus("chown " + path, errno);
  std::error_code ec;
  std::filesystem::recursive_directory_iterator it(path, ec), end;
  for (; !ec && it != end; it.increment(ec)) {
    std::string p = it->path().string();
    if (::lchown(p.c_str(), uid, gid) != 0) return ErrnoStatus("chown " + p, errno);
  }
  if (ec) return Status::IoError("walk " + path + ": " + ec.message());
  return Status::OK();
}

bool Exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

Result<FileStamp> StatFile(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return ErrnoStatus(path, errno);
  constexpr int64_t kNsPerSec = 1'000'000'000;
  FileStamp s;
  s.device = static_cast<uint64_t>(st.st_dev);
  s.inode = static_cast<uint64_t>(st.st_ino);
  s.size_bytes = static_cast<uint64_t>(st.st_size);
  s.mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * kNsPerSec + st.st_mtim.tv_nsec;
  s.ctime_ns = static_cast<int64_t>(st.st_ctim.tv_sec) * kNsPerSec + st.st_ctim.tv_nsec;
  return s;
}

Result<unsigned> FileMode(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return ErrnoStatus(path, errno);
  return static_cast<unsigned>(st.st_mode & 07777);
}

Status RemoveAll(const std::string& path) {
  std::error_code ec;
  std::filesystem::remove_all(path, ec);
  if (ec) return Status::IoError("remove " + path + ": " + ec.message());
  return Status::OK();
}

}  // namespace lathe::os

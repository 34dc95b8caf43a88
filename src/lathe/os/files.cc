#include "lathe/os/files.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <filesystem>

#include "lathe/common/ids.h"
#include "lathe/os/fd.h"

namespace lathe::os {

Result<std::string> ReadFile(const std::string& path) { return ReadFileUpTo(path, SIZE_MAX - 1); }

Result<std::string> ReadFileUpTo(const std::string& path, size_t max_bytes) {
  ASSIGN_OR_RETURN(Fd fd, Fd::Open(path, O_RDONLY));
  std::string out;
  char buf[65536];
  while (out.size() <= max_bytes) {
    size_t want = std::min(sizeof buf, max_bytes + 1 - out.size());
    ASSIGN_OR_RETURN(size_t n, ReadUpTo(fd.get(), buf, want, path));
    out.append(buf, n);
    if (n < want) break;  // end of file
  }
  return out;
}

Result<std::string> ReadRegularFileUpTo(const std::string& path, size_t max_bytes) {
  ASSIGN_OR_RETURN(Fd fd, Fd::Open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK));
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return ErrnoStatus(path, errno);
  if (!S_ISREG(st.st_mode)) return Status::InvalidArgument(path + " is not a regular file");
  std::string out;
  char buf[65536];
  while (out.size() <= max_bytes) {
    size_t want = std::min(sizeof buf, max_bytes + 1 - out.size());
    ASSIGN_OR_RETURN(size_t n, ReadUpTo(fd.get(), buf, want, path));
    out.append(buf, n);
    if (n < want) break;
  }
  return out;
}

Status FsyncDir(const std::string& dir) {
  ASSIGN_OR_RETURN(Fd fd, Fd::Open(dir, O_RDONLY | O_DIRECTORY));
  return Fsync(fd.get(), dir);
}

Status WriteFileAtomic(const std::string& path, std::string_view data, unsigned mode,
                       Durability durability) {
  const bool sync = durability == Durability::kSync;
  std::string dir = std::filesystem::path(path).parent_path().string();
  if (dir.empty()) dir = ".";
  std::string tmp = path + ".tmp-" + NewId("");
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
  if (fd < 0) return ErrnoStatus(tmp, errno);
  Status st = WriteFull(fd, data, tmp);
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

Status ChmodOpenFile(int fd, unsigned mode, const std::string& what) {
  if (::fchmod(fd, static_cast<mode_t>(mode)) != 0) return ErrnoStatus("chmod " + what, errno);
  return Status::OK();
}

Status Chown(const std::string& path, uid_t uid, gid_t gid) {
  if (::chown(path.c_str(), uid, gid) != 0) return ErrnoStatus("chown " + path, errno);
  return Status::OK();
}

Status ChownNoFollow(const std::string& path, uid_t uid, gid_t gid) {
  if (::lchown(path.c_str(), uid, gid) != 0) return ErrnoStatus("chown " + path, errno);
  return Status::OK();
}

int AccessError(const std::string& path, int mode) {
  return ::faccessat(AT_FDCWD, path.c_str(), mode, AT_EACCESS) == 0 ? 0 : errno;
}

Status MakeDir(const std::string& path, unsigned mode) {
  if (::mkdir(path.c_str(), static_cast<mode_t>(mode)) != 0) {
    if (errno == EEXIST) return Status::AlreadyExists("mkdir " + path + ": it exists");
    return ErrnoStatus("mkdir " + path, errno);
  }
  return Status::OK();
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

namespace {

FileStamp StampOf(const struct stat& st) {
  constexpr int64_t kNsPerSec = 1'000'000'000;
  FileStamp s;
  s.device = static_cast<uint64_t>(st.st_dev);
  s.inode = static_cast<uint64_t>(st.st_ino);
  s.size_bytes = static_cast<uint64_t>(st.st_size);
  s.mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * kNsPerSec + st.st_mtim.tv_nsec;
  s.ctime_ns = static_cast<int64_t>(st.st_ctim.tv_sec) * kNsPerSec + st.st_ctim.tv_nsec;
  s.mode = static_cast<uint32_t>(st.st_mode);
  s.uid = st.st_uid;
  s.gid = st.st_gid;
  return s;
}

}  // namespace

Result<FileStamp> StatFile(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return ErrnoStatus(path, errno);
  return StampOf(st);
}

Result<FileStamp> LstatFile(const std::string& path) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) return ErrnoStatus(path, errno);
  return StampOf(st);
}

Result<FileStamp> StatOpenFile(int fd, const std::string& what) {
  struct stat st;
  if (::fstat(fd, &st) != 0) return ErrnoStatus("stat " + what, errno);
  return StampOf(st);
}

Result<std::string> ReadLink(const std::string& path) {
  char buf[PATH_MAX];
  ssize_t n = ::readlink(path.c_str(), buf, sizeof buf);
  if (n < 0) return ErrnoStatus(path, errno);
  if (static_cast<size_t>(n) == sizeof buf) return Status::IoError(path + ": link target too long");
  return std::string(buf, static_cast<size_t>(n));
}

bool IsExecutable(const std::string& path) { return ::access(path.c_str(), X_OK) == 0; }

Status Chmod(const std::string& path, unsigned mode) {
  if (::chmod(path.c_str(), static_cast<mode_t>(mode)) != 0)
    return ErrnoStatus("chmod " + path, errno);
  return Status::OK();
}

Status RemoveFile(const std::string& path) {
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) return ErrnoStatus("remove " + path, errno);
  return Status::OK();
}

Result<bool> RemoveFileIfPresent(const std::string& path) {
  if (::unlink(path.c_str()) == 0) return true;
  if (errno == ENOENT) return false;
  return ErrnoStatus(path, errno);
}

Status ExchangePaths(const std::string& a, const std::string& b) {
  if (::renameat2(AT_FDCWD, a.c_str(), AT_FDCWD, b.c_str(), RENAME_EXCHANGE) != 0) {
    return ErrnoStatus("exchange " + a + " and " + b, errno);
  }
  return Status::OK();
}

Status MakeSymlink(const std::string& target, const std::string& path) {
  if (::symlink(target.c_str(), path.c_str()) != 0) return ErrnoStatus("symlink " + path, errno);
  return Status::OK();
}

Status SetMtime(const std::string& path, int64_t mtime_ns) {
  constexpr int64_t kNsPerSec = 1'000'000'000;
  struct timespec ts[2];
  ts[0].tv_sec = 0;
  ts[0].tv_nsec = UTIME_OMIT;
  ts[1].tv_sec = mtime_ns / kNsPerSec;
  ts[1].tv_nsec = mtime_ns % kNsPerSec;
  if (::utimensat(AT_FDCWD, path.c_str(), ts, AT_SYMLINK_NOFOLLOW) != 0) {
    return ErrnoStatus("utimes " + path, errno);
  }
  return Status::OK();
}

Status Rename(const std::string& from, const std::string& to) {
  if (::rename(from.c_str(), to.c_str()) != 0) {
    return ErrnoStatus("rename " + from + " to " + to, errno);
  }
  return Status::OK();
}

Status ProbeWritable(const std::string& dir) {
  std::string tmpl = dir + "/.lathe-probe-XXXXXX";
  int fd = ::mkostemp(tmpl.data(), O_CLOEXEC);
  if (fd < 0) return ErrnoStatus(dir, errno);
  ::close(fd);
  ::unlink(tmpl.c_str());
  return Status::OK();
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

Status RemoveDir(const std::string& path) {
  if (::rmdir(path.c_str()) == 0 || errno == ENOENT) return Status::OK();
  return ErrnoStatus("rmdir " + path, errno);
}

namespace {
Status WritePrivateFiles(int dir_fd, const std::string& dir,
                         const std::map<std::string, std::string>& files, uid_t uid, gid_t gid) {
  for (const auto& [name, content] : files) {
    const std::string path = dir + "/" + name;
    if (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos) {
      return Status::InvalidArgument("not a plain file name: " + path);
    }
    Fd fd(
        ::openat(dir_fd, name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (!fd.valid()) return ErrnoStatus("create " + path, errno);
    // The mode whatever the umask; the owner before any byte is written.
    if (::fchmod(fd.get(), 0600) != 0) return ErrnoStatus("chmod " + path, errno);
    if (::fchown(fd.get(), uid, gid) != 0) return ErrnoStatus("chown " + path, errno);
    RETURN_IF_ERROR(WriteFull(fd.get(), content, path));
    RETURN_IF_ERROR(fd.Close(path));
  }
  return Status::OK();
}
}  // namespace

Status WritePrivateDir(const std::string& dir, const std::map<std::string, std::string>& files,
                       uid_t uid, gid_t gid) {
  RETURN_IF_ERROR(MakeDir(dir, 0700));
  Status st = [&]() -> Status {
    Fd dir_fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!dir_fd.valid()) return ErrnoStatus("open " + dir, errno);
    if (::fchmod(dir_fd.get(), 0700) != 0) return ErrnoStatus("chmod " + dir, errno);
    RETURN_IF_ERROR(WritePrivateFiles(dir_fd.get(), dir, files, uid, gid));
    if (::fchown(dir_fd.get(), uid, gid) != 0) return ErrnoStatus("chown " + dir, errno);
    return Status::OK();
  }();
  if (!st.ok()) (void)RemoveAll(dir);  // nothing in it is anyone else's yet
  return st;
}

}  // namespace lathe::os

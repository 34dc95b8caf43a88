// Files: reading, durable atomic writes, directories.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "lathe/common/status.h"

namespace lathe::os {

// Reads the whole file. NotFound when it does not exist.
Result<std::string> ReadFile(const std::string& path);

// Reads at most `max_bytes` + 1 bytes: a result longer than `max_bytes` means
// the file is larger (or endless, as /dev/zero), which the caller refuses.
Result<std::string> ReadFileUpTo(const std::string& path, size_t max_bytes);

// ReadFileUpTo for a file someone else may have made (a user's, read by a
// root daemon): never through a symlink at the last component, never
// blocking on a FIFO or a device; InvalidArgument for anything but a
// regular file.
Result<std::string> ReadRegularFileUpTo(const std::string& path, size_t max_bytes);

enum class Durability {
  kSync,    // survives power loss: fsync the file and the directory
  kNoSync,  // survives a crash of any process, not power loss (no fsync)
};

// Replaces `path` with `data` so that a crash leaves either the old or the
// new content, never a mix: write a temp file in the same directory, (fsync
// it,) rename it over `path`, (fsync the directory).
Status WriteFileAtomic(const std::string& path, std::string_view data, unsigned mode = 0644,
                       Durability durability = Durability::kSync);

// fsync on a directory, making a rename or create in it durable.
Status FsyncDir(const std::string& dir);

// mkdir(2) of one directory; AlreadyExists when `path` exists.
Status MakeDir(const std::string& path, unsigned mode);

// mkdir -p with `mode` for the directories it creates.
Status MakeDirs(const std::string& path, unsigned mode = 0755);

// MakeDirs, then gives each directory it created to uid:gid (for a root
// daemon creating directories in a user's tree).
Status MakeDirsOwned(const std::string& path, unsigned mode, uid_t uid, gid_t gid);

// lchown of `path` and everything below it (symlinks themselves, not their targets).
Status ChownTree(const std::string& path, uid_t uid, gid_t gid);

bool Exists(const std::string& path);

// access(2) with X_OK for the real user: `path` may be executed.
bool IsExecutable(const std::string& path);

// chmod(2), following symlinks.
Status Chmod(const std::string& path, unsigned mode);
// fchmod(2) of an open descriptor; `what` names it in errors.
Status ChmodOpenFile(int fd, unsigned mode, const std::string& what);
// chown(2), following symlinks; a uid or gid of -1 keeps that one.
Status Chown(const std::string& path, uid_t uid, gid_t gid);
// lchown(2): a symlink itself, never what it points at.
Status ChownNoFollow(const std::string& path, uid_t uid, gid_t gid);
// Whether this process's effective identity (its file-system identity) may
// `mode` (R_OK, W_OK, X_OK, F_OK) `path` (faccessat with AT_EACCESS): 0, or
// the errno that says why not.
int AccessError(const std::string& path, int mode);

// unlink(2); a missing file is fine (OK).
Status RemoveFile(const std::string& path);

// unlink(2) that says whether there was a file: true when one was removed,
// false when `path` did not exist.
Result<bool> RemoveFileIfPresent(const std::string& path);

// rename(2), replacing `to` atomically. NotFound when `from` is missing.
Status Rename(const std::string& from, const std::string& to);

// renameat2(2) with RENAME_EXCHANGE: `a` and `b` (both must exist; either may
// be a directory, even a non-empty one) swap names atomically. An error where
// the filesystem cannot (EINVAL) as where either is missing.
Status ExchangePaths(const std::string& a, const std::string& b);

// symlink(2): creates `path` as a symlink holding `target`. AlreadyExists when
// anything is at `path`.
Status MakeSymlink(const std::string& target, const std::string& path);

// Sets the modification time of `path` itself (a symlink's own, not its
// target's), leaving the access time as it is.
Status SetMtime(const std::string& path, int64_t mtime_ns);

// Creates and removes a file in `dir`: OK when this process may create files
// there, else why not.
Status ProbeWritable(const std::string& dir);

// Names in `dir` (without . and ..), sorted. NotFound when `dir` is missing.
Result<std::vector<std::string>> ListDir(const std::string& dir);

// What identifies one version of a file without reading it: equal stamps mean
// "probably unchanged". Timestamps are as coarse as the kernel's (a jiffy, or
// a second on some file systems), so two writes close together may leave equal
// stamps; a reader that must not miss a change re-reads a file whose mtime is
// that recent.
struct FileStamp {
  uint64_t device = 0;
  uint64_t inode = 0;
  uint64_t size_bytes = 0;
  int64_t mtime_ns = 0;  // since the Unix epoch
  int64_t ctime_ns = 0;
  uint32_t mode = 0;  // st_mode: the file type and permission bits (S_ISDIR(mode) ...)
  uint32_t uid = 0;   // the owner
  uint32_t gid = 0;
  bool operator==(const FileStamp&) const = default;
};

// stat(2) of `path`, following symlinks. NotFound when it does not exist.
Result<FileStamp> StatFile(const std::string& path);
// lstat(2): a symlink's own stamp, not its target's.
Result<FileStamp> LstatFile(const std::string& path);
// fstat(2) of an open descriptor; `what` names it in errors.
Result<FileStamp> StatOpenFile(int fd, const std::string& what);

// The target a symlink holds (readlink(2)).
Result<std::string> ReadLink(const std::string& path);

// The permission bits of `path` (following symlinks), e.g. 0600. NotFound
// when it does not exist.
Result<unsigned> FileMode(const std::string& path);

// Removes a directory tree; a missing one is fine.
Status RemoveAll(const std::string& path);

// rmdir(2) of an empty directory; a missing one is fine.
Status RemoveDir(const std::string& path);

// Creates directory `dir` (one mkdir, mode 0700; AlreadyExists when anything
// is at that path) holding `files` (plain name -> content), each a new file
// of mode 0600 made with O_EXCL|O_NOFOLLOW relative to the directory's
// descriptor, then gives the files and, last, the directory to uid:gid
// (a root daemon handing a user private files). Until that last step only
// this process's user can enter the directory, so every entry in it is one
// this call made. The caller makes sure nobody else can replace `dir`
// itself (its parent is not writable by uid). On failure what was made is
// removed.
Status WritePrivateDir(const std::string& dir, const std::map<std::string, std::string>& files,
                       uid_t uid, gid_t gid);

}  // namespace lathe::os

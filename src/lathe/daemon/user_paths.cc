#include "lathe/daemon/user_paths.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <filesystem>

#include "lathe/common/path_check.h"
#include "lathe/os/files.h"

namespace lathe::daemon {
namespace {

std::string Normal(const std::string& p) {
  std::string n = std::filesystem::path(p).lexically_normal().string();
  while (n.size() > 1 && n.back() == '/') n.pop_back();
  return n;
}

std::string SocketDir(const std::string& socket) {
  size_t slash = socket.rfind('/');
  return slash == std::string::npos || slash == 0 ? "/" : socket.substr(0, slash);
}

}  // namespace

std::string ExistingAncestor(std::string p) {
  while (p != "/") {
    if (os::LstatFile(p).ok()) return p;
    p = std::filesystem::path(p).parent_path().string();
  }
  return p;
}

namespace {

// `id`: path.cannot_enter | cannot_use | cannot_create | cannot_reach.
Status Denied(const char* id, const std::string& field, const std::string& path, int err,
              const std::string& parent = "") {
  MsgArgs args = {{"field", field}, {"path", path}, {"detail", std::strerror(err)}};
  if (!parent.empty()) args.push_back({"parent", parent});
  return Status::Msg(Code::kPermissionDenied, id, args);
}

// With the caller's identity (the checks of faccessat with AT_EACCESS are
// made with the thread's file-system ids).
Status CheckAccess(const std::string& field, const std::string& path, PathUse use) {
  struct stat st;
  if (::stat(path.c_str(), &st) == 0) {
    if (!S_ISDIR(st.st_mode)) {
      return Status::Msg(Code::kInvalidArgument, "path.not_dir",
                         {{"field", field}, {"path", path}});
    }
    const int mode = use == PathUse::kWorkdir      ? X_OK
                     : use == PathUse::kReadSource ? (R_OK | X_OK)
                                                   : (R_OK | W_OK | X_OK);
    if (int err = os::AccessError(path, mode); err != 0) {
      const char* id = use == PathUse::kWorkdir      ? "path.cannot_enter"
                       : use == PathUse::kReadSource ? "path.cannot_read"
                                                     : "path.cannot_use";
      return Denied(id, field, path, err);
    }
    return Status::OK();
  }
  if (errno != ENOENT) return Denied("path.cannot_reach", field, path, errno);
  // A source is read, never made: a missing one is simply not there.
  if (use == PathUse::kReadSource) {
    return Status::Msg(Code::kNotFound, "path.not_found", {{"field", field}, {"path", path}});
  }
  // A missing workdir may yet be made (by an earlier run); the start says so if not.
  if (use == PathUse::kWorkdir) return Status::OK();
  // Missing: it is created by the user, in the nearest directory that exists.
  std::string parent = ExistingAncestor(path);
  if (::stat(parent.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return Status::Msg(Code::kInvalidArgument, "path.not_dir",
                       {{"field", field}, {"path", parent}});
  }
  if (int err = os::AccessError(parent, W_OK | X_OK); err != 0) {
    return Denied("path.cannot_create", field, path, err, parent);
  }
  return Status::OK();
}

}  // namespace

bool PathWithin(const std::string& inner, const std::string& outer) {
  if (outer == "/") return true;
  return inner == outer ||
         (inner.size() > outer.size() && inner.compare(0, outer.size(), outer) == 0 &&
          inner[outer.size()] == '/');
}

Result<std::string> ResolveAsFarAsExists(const std::string& path) {
  std::filesystem::path p = std::filesystem::path(Normal(path));
  std::filesystem::path rest;
  while (true) {
    char buf[PATH_MAX];
    if (::realpath(p.c_str(), buf) != nullptr)
      return Normal((std::filesystem::path(buf) / rest).string());
    if (errno != ENOENT && errno != ENOTDIR) return ErrnoStatus(p.string(), errno);
    if (p == p.root_path() || p.empty()) return Normal(path);
    rest = p.filename() / rest;
    p = p.parent_path();
  }
}

ReservedPaths::ReservedPaths(const HomePaths& home) {
  for (const std::string& d : {home.home, home.store, SocketDir(home.socket)}) {
    auto real = ResolveAsFarAsExists(d);
    std::string r = real.ok() ? *real : Normal(d);
    bool seen = false;
    for (const auto& x : dirs_) seen = seen || x == r;
    if (!seen) dirs_.push_back(r);
  }
}

Status ReservedPaths::Check(const std::string& field, const std::string& path, PathUse use,
                            const os::AccessAs& as) const {
  if (path.empty() || path[0] != '/') {
    return Status::Msg(Code::kInvalidArgument, "path.not_absolute",
                       {{"field", field}, {"path", path}});
  }
  RETURN_IF_ERROR(CheckPathName(path, field));  // no NUL, within PATH_MAX and NAME_MAX
  Result<std::string> real = Status::Internal("not resolved");
  Status st = os::WithAccess(as, [&] {
    real = ResolveAsFarAsExists(path);
    if (!real.ok()) {
      int err = real.status().IsPermissionDenied() ? EACCES : EINVAL;
      return Denied("path.cannot_reach", field, path, err);
    }
    return Status::OK();
  });
  RETURN_IF_ERROR(st);
  // Both as the user wrote it and as it resolves: a symlink must not lead
  // into the daemon's directories, nor its name.
  for (const std::string& p : {Normal(path), *real}) {
    for (const auto& reserved : dirs_) {
      if (PathWithin(p, reserved)) {
        return Status::Msg(Code::kPermissionDenied, "path.reserved",
                           {{"field", field}, {"path", path}, {"reserved", reserved}});
      }
      if (use != PathUse::kWorkdir && PathWithin(reserved, p)) {
        return Status::Msg(Code::kPermissionDenied, "path.contains_reserved",
                           {{"field", field}, {"path", path}, {"reserved", reserved}});
      }
    }
  }
  if (use == PathUse::kRestoreTarget) return Status::OK();  // the restorer writes as the user
  return os::WithAccess(as, [&] { return CheckAccess(field, *real, use); });
}

}  // namespace lathe::daemon

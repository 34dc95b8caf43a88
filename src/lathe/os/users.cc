#include "lathe/os/users.h"

#include <grp.h>
#include <pwd.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <thread>

#include <spdlog/spdlog.h>

namespace lathe::os {
namespace {
Result<UserInfo> FromPasswd(passwd* pw, const std::string& what) {
  if (pw == nullptr) return Status::NotFound("no such user: " + what);
  UserInfo u;
  u.uid = pw->pw_uid;
  u.gid = pw->pw_gid;
  u.name = pw->pw_name;
  u.home = pw->pw_dir ? pw->pw_dir : "/";
  u.shell = pw->pw_shell ? pw->pw_shell : "/bin/sh";
  return u;
}
}  // namespace

Result<UserInfo> LookupUser(uid_t uid) {
  passwd pw;
  passwd* out = nullptr;
  char buf[16384];
  getpwuid_r(uid, &pw, buf, sizeof buf, &out);
  return FromPasswd(out, std::to_string(uid));
}

Result<UserInfo> LookupUserByName(const std::string& name) {
  passwd pw;
  passwd* out = nullptr;
  char buf[16384];
  getpwnam_r(name.c_str(), &pw, buf, sizeof buf, &out);
  return FromPasswd(out, name);
}

std::vector<gid_t> GroupsOf(const UserInfo& user) {
  int n = 64;
  std::vector<gid_t> groups(n);
  if (getgrouplist(user.name.c_str(), user.gid, groups.data(), &n) < 0) {
    groups.resize(n);
    getgrouplist(user.name.c_str(), user.gid, groups.data(), &n);
  }
  groups.resize(n);
  return groups;
}

std::vector<std::string> GroupNamesOf(const UserInfo& user) {
  std::vector<std::string> names;
  for (gid_t g : GroupsOf(user)) {
    group gr;
    group* out = nullptr;
    char buf[16384];
    if (getgrgid_r(g, &gr, buf, sizeof buf, &out) == 0 && out != nullptr) {
      names.emplace_back(out->gr_name);
    }
  }
  return names;
}

bool GroupExists(const std::string& name) {
  group gr;
  group* out = nullptr;
  char buf[16384];
  return getgrnam_r(name.c_str(), &gr, buf, sizeof buf, &out) == 0 && out != nullptr;
}

Status RunAsUser(const UserInfo& user, const std::function<Status()>& body) {
  std::vector<gid_t> groups = GroupsOf(user);
  Status result;
  std::thread t([&] {
    if (::syscall(SYS_setgroups, groups.size(), groups.data()) != 0) {
      result = ErrnoStatus("setgroups for " + user.name, errno);
      return;
    }
    ::syscall(SYS_setfsgid, user.gid);
    ::syscall(SYS_setfsuid, user.uid);
    // setfs*id report the previous id, never an error: read them back.
    if (static_cast<uid_t>(::syscall(SYS_setfsuid, -1)) != user.uid ||
        static_cast<gid_t>(::syscall(SYS_setfsgid, -1)) != user.gid) {
      result = Status::PermissionDenied("cannot take the file-system identity of " + user.name);
      return;
    }
    result = body();
  });
  t.join();
  return result;
}

FsIdentity IdentityOf(uid_t uid, gid_t fallback_gid) {
  FsIdentity id;
  id.uid = uid;
  auto u = LookupUser(uid);
  if (!u.ok()) {
    id.gid = fallback_gid;
    id.name = std::to_string(uid);
    id.groups = {fallback_gid};
    return id;
  }
  id.gid = u->gid;
  id.name = u->name;
  id.groups = GroupsOf(*u);
  return id;
}

namespace {
// The raw syscalls change the calling thread only (glibc's wrappers would
// change every thread of the process).
bool SetThreadFsIdentity(uid_t uid, gid_t gid, const std::vector<gid_t>& groups) {
  if (::syscall(SYS_setgroups, groups.size(), groups.data()) != 0) return false;
  ::syscall(SYS_setfsgid, gid);
  ::syscall(SYS_setfsuid, uid);
  // setfs*id report the previous id, never an error: read them back.
  return static_cast<uid_t>(::syscall(SYS_setfsuid, -1)) == uid &&
         static_cast<gid_t>(::syscall(SYS_setfsgid, -1)) == gid;
}
}  // namespace

Status AsUser(const FsIdentity& id, const std::function<Status()>& body) {
  if (::geteuid() != 0 || id.uid == ::geteuid()) return body();
  uid_t own_uid = static_cast<uid_t>(::syscall(SYS_setfsuid, -1));
  gid_t own_gid = static_cast<gid_t>(::syscall(SYS_setfsgid, -1));
  int n = static_cast<int>(::syscall(SYS_getgroups, 0, nullptr));
  std::vector<gid_t> own_groups(n > 0 ? n : 0);
  if (n > 0) ::syscall(SYS_getgroups, n, own_groups.data());
  Status result;
  if (SetThreadFsIdentity(id.uid, id.gid, id.groups)) {
    result = body();
  } else {
    result = Status::PermissionDenied("cannot take the file-system identity of " + id.name);
  }
  if (!SetThreadFsIdentity(own_uid, own_gid, own_groups)) {
    // A thread that cannot become itself again must not go on acting.
    spdlog::critical("cannot restore this thread's file-system identity after acting as {}",
                     id.name);
    std::abort();
  }
  return result;
}

AccessAs AccessAsUser(FsIdentity id) {
  return [id = std::move(id)](const std::function<Status()>& body) { return AsUser(id, body); };
}

Status DropPrivileges(uid_t uid, gid_t gid) {
  if (::geteuid() != 0) {
    if (::getuid() == uid && ::geteuid() == uid && ::getgid() == gid && ::getegid() == gid) {
      return Status::OK();
    }
    return Status::FailedPrecondition("only root can become uid " + std::to_string(uid));
  }
  if (::setgroups(0, nullptr) != 0) return ErrnoStatus("setgroups", errno);
  if (::setresgid(gid, gid, gid) != 0)
    return ErrnoStatus("setresgid " + std::to_string(gid), errno);
  if (::setresuid(uid, uid, uid) != 0)
    return ErrnoStatus("setresuid " + std::to_string(uid), errno);
  uid_t ru = 0, eu = 0, su = 0;
  gid_t rg = 0, eg = 0, sg = 0;
  if (::getresuid(&ru, &eu, &su) != 0 || ::getresgid(&rg, &eg, &sg) != 0 || ru != uid ||
      eu != uid || su != uid || rg != gid || eg != gid || sg != gid) {
    return Status::Internal("the process did not become " + std::to_string(uid) + ":" +
                            std::to_string(gid));
  }
  if (uid != 0 && ::setuid(0) == 0) {
    return Status::Internal("root could be regained after becoming uid " + std::to_string(uid));
  }
  return Status::OK();
}

}  // namespace lathe::os

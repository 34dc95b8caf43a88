#include "lathe/os/users.h"

#include <grp.h>
#include <pwd.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <thread>

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

}  // namespace lathe::os

#include "lathe/os/users.h"

#include <grp.h>
#include <pwd.h>

#include <cerrno>

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

}  // namespace lathe::os

// Local users: names, homes, groups.
#pragma once

#include <sys/types.h>

#include <functional>
#include <string>
#include <vector>

#include "lathe/common/status.h"

namespace lathe::os {

struct UserInfo {
  uid_t uid = 0;
  gid_t gid = 0;
  std::string name;
  std::string home;
  std::string shell;
};

Result<UserInfo> LookupUser(uid_t uid);
Result<UserInfo> LookupUserByName(const std::string& name);
// Supplementary groups of a user (for initgroups-equivalent set-up).
std::vector<gid_t> GroupsOf(const UserInfo& user);

// Runs `body` on a new thread whose file-system identity is `user`'s
// (fsuid, fsgid and supplementary groups; threads it starts inherit it), and
// waits for it. A root daemon writing into a user's tree this way gets the
// kernel's permission checks at every step, so a directory swapped for a
// symlink between a check and the write cannot redirect the write to a place
// the user could not write; files are created as the user's. The calling
// thread and the rest of the process keep their identity (the raw syscalls
// change one thread only, unlike glibc's setgroups, which changes all).
Status RunAsUser(const UserInfo& user, const std::function<Status()>& body);

}  // namespace lathe::os

// Local users: names, homes, groups.
#pragma once

#include <sys/types.h>

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

}  // namespace lathe::os

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
// The names of the user's groups (primary and supplementary); a gid without
// a group entry is left out.
std::vector<std::string> GroupNamesOf(const UserInfo& user);
// Whether the system knows a group of that name.
bool GroupExists(const std::string& name);

// Runs `body` on a new thread whose file-system identity is `user`'s
// (fsuid, fsgid and supplementary groups; threads it starts inherit it), and
// waits for it. A root daemon writing into a user's tree this way gets the
// kernel's permission checks at every step, so a directory swapped for a
// symlink between a check and the write cannot redirect the write to a place
// the user could not write; files are created as the user's. The calling
// thread and the rest of the process keep their identity (the raw syscalls
// change one thread only, unlike glibc's setgroups, which changes all).
Status RunAsUser(const UserInfo& user, const std::function<Status()>& body);

// A file-system identity, resolved once (the passwd and group lookups are not
// free): what a root daemon takes on to act on a path a user named.
struct FsIdentity {
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<gid_t> groups;
  std::string name;  // for messages; may be the uid in digits
};
// `uid`'s identity; a uid without a passwd entry gets `fallback_gid` and no
// supplementary groups.
FsIdentity IdentityOf(uid_t uid, gid_t fallback_gid);

// Runs `body` on the calling thread with `id`'s file-system identity, then
// gives the thread its own back. For many short accesses (every file a
// snapshot opens) where a thread per call would cost too much; threads
// started inside `body` keep `id`. When the process is not root, or `id` is
// the process's own user, `body` simply runs.
Status AsUser(const FsIdentity& id, const std::function<Status()>& body);

// How a component is told to do its file-system accesses of a user's tree:
// `as(body)` runs body with the user's identity. Empty: as the process.
using AccessAs = std::function<Status(const std::function<Status()>&)>;
AccessAs AccessAsUser(FsIdentity id);

// With `as` (may be empty) around `body`.
inline Status WithAccess(const AccessAs& as, const std::function<Status()>& body) {
  return as ? as(body) : body();
}

// Makes the whole process `uid`:`gid` for good, as a root server does once
// it has bound its listeners: no supplementary groups, then the real,
// effective and saved gid, then the uid (glibc applies each to every thread).
// Then checks that the ids took and, when `uid` is not root, that root cannot
// be regained (setuid(0) fails). FailedPrecondition when the process is not
// root and is not `uid`:`gid` already; an errno status when a call fails.
Status DropPrivileges(uid_t uid, gid_t gid);

}  // namespace lathe::os

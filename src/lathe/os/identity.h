// This process's own identity: its real and effective user and group ids.
// What code outside os/ asks before acting ("am I root?", "is this file
// mine?"); acting as another user is users.h's (AsUser, RunAsUser).
// Thread-safe: each call asks the kernel. A thread that took another
// file-system identity (AsUser) still answers with the process's ids: the
// file-system ids are not these.
#pragma once

#include <sys/types.h>

namespace lathe::os {

// getuid(2): the user who started the process.
uid_t RealUid();
// geteuid(2): the user whose permissions the process has.
uid_t EffectiveUid();
// getgid(2).
gid_t RealGid();
// getegid(2).
gid_t EffectiveGid();

// The effective user is root (a system daemon, or a command run with sudo).
bool IsRoot();

}  // namespace lathe::os

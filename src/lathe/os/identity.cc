#include "lathe/os/identity.h"

#include <unistd.h>

namespace lathe::os {

uid_t RealUid() { return ::getuid(); }
uid_t EffectiveUid() { return ::geteuid(); }
gid_t RealGid() { return ::getgid(); }
gid_t EffectiveGid() { return ::getegid(); }
bool IsRoot() { return ::geteuid() == 0; }

}  // namespace lathe::os

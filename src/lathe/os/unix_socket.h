// Unix-domain socket files: telling a live server's socket from one a dead
// server left behind, so a restarted server can take its path again.
#pragma once

#include <string>

#include "lathe/common/status.h"

namespace lathe::os {

// True when something accepts connections at `path`, or when that cannot be
// told (then the file is not ours to delete).
bool UnixSocketIsLive(const std::string& path);

// Removes a stale socket file at `path`; nothing there is fine. AlreadyExists
// when `path` is something else than a socket, or a server listens on it.
Status RemoveStaleUnixSocket(const std::string& path);

}  // namespace lathe::os

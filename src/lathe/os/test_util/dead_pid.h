// A pid that certainly names no live process: a child that exited and was
// reaped. For tests of liveness checks and of re-adopting vanished monitors.
#pragma once

#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

namespace lathe::os {

inline pid_t DeadPid() {
  pid_t pid = ::fork();
  if (pid == 0) ::_exit(0);
  ::waitpid(pid, nullptr, 0);
  return pid;
}

}  // namespace lathe::os
